package tensor

import "golang.org/x/sys/cpu"

// int8VNNI and int8AVX2 are the int8 micro-kernels in infer_int8_amd64.s
// (see i8kernel): an 8×32 tile in AVX-512 VNNI and a 4×16 tile in AVX2.
//
//go:noescape
func int8VNNI(kg int, a *uint8, lda int, b *int8, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32)

//go:noescape
func int8AVX2(kg int, a *uint8, lda int, b *int8, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32)

// int8Kernels lists the int8 kernels this CPU runs, fastest first; the
// portable one is always last.
func int8Kernels() []*i8kernel {
	var ks []*i8kernel
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI {
		ks = append(ks, &i8kernel{name: "avx512vnni", mr: 8, nr: 32, maxW: 127, asm: int8VNNI})
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, &i8kernel{name: "avx2", mr: 4, nr: 16, maxW: 64, asm: int8AVX2})
	}
	return append(ks, goInt8Kernel)
}
