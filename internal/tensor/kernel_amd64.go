package tensor

import "golang.org/x/sys/cpu"

// kernelAVX2 is the 6×16 micro-kernel in kernel_amd64.s (AVX2 + FMA).
//
//go:noescape
func kernelAVX2(kk int, a, b, c *float32, ldc int, alpha float32)

var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func kernel(kk int, a, b []float32, c []float32, ldc int, alpha float32) {
	if !useAVX2 {
		kernelGo(kk, a, b, c, ldc, alpha)
		return
	}
	// Bounds are checked here once; the assembly trusts them.
	_ = a[kk*mr-1]
	_ = b[kk*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernelAVX2(kk, &a[0], &b[0], &c[0], ldc, alpha)
}
