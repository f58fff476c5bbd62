package tensor

import "golang.org/x/sys/cpu"

// infer512 and infer256 are the inference micro-kernels in infer_amd64.s:
// C[0:mr, 0:nr] = (flags&1 ? C : 0) + (bias) + A[0:mr, 0:kk]·B[0:kk, 0:nr],
// A, B and C row-major with strides lda, ldb, ldc in floats, the product
// summed with one FMA per k in k order.
//
//go:noescape
func infer512(kk int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int)

//go:noescape
func infer256(kk int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int)

// inferKernels lists the kernels this CPU runs, fastest first; the
// portable one is always last.
func inferKernels() []*ikernel {
	var ks []*ikernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, &ikernel{name: "avx512", mr: 12, nr: 32, asm: infer512})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, &ikernel{name: "avx2", mr: 6, nr: 16, asm: infer256})
	}
	return append(ks, goKernel)
}

// scores512 is in scores_amd64.s: infer512's tile and sums, then C =
// s·(A·B) + bias and each row's running maximum (16 lanes a row) at mx.
//
//go:noescape
func scores512(kk int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, bias *float32, s float32, mx *float32, np int)

// scoresKernel is scores512 where this process runs infer512, else nil.
var scoresKernel = func() func(int, *float32, int, *float32, int, *float32, int, *float32, float32, *float32, int) {
	if inferKernel.name == "avx512" {
		return scores512
	}
	return nil
}()
