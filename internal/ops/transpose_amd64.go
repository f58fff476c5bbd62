package ops

import "golang.org/x/sys/cpu"

// transpose16 is in transpose_amd64.s (AVX-512 F): dst (stride ldd) gets
// the transpose of jb·16 rows of db·16 values of src (stride lds), one
// 16×16 block at a time.
//
//go:noescape
func transpose16(dst *float32, ldd int, src *float32, lds int, jb, db int)

var useTranspose512 = cpu.X86.HasAVX512F

// transposeBlocks transposes the first L&^15 rows of k into kt (stride
// ldt) where there is AVX-512 and D is a multiple of 16, and says how many
// rows it did.
func transposeBlocks(kt []float32, ldt int, k []float32, L, D, ld int) int {
	jb := L / 16
	if !useTranspose512 || jb == 0 || D%16 != 0 {
		return 0
	}
	_ = k[(jb*16-1)*ld+D-1]
	_ = kt[(D-1)*ldt+jb*16-1]
	transpose16(&kt[0], ldt, &k[0], ld, jb, D/16)
	return jb * 16
}

// prefetchRows is in transpose_amd64.s: a hint, no values read.
//
//go:noescape
func prefetchRows(p *float32, rows, stride, n int)

// prefetch asks for rows rows of n floats of x (stride floats apart,
// from x[0]) in the second level cache; it reads nothing and x must hold
// them.
func prefetch(x []float32, rows, stride, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	_ = x[(rows-1)*stride+n-1]
	prefetchRows(&x[0], rows, stride, n)
}
