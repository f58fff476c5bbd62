package ops

import "golang.org/x/sys/cpu"

// softmaxRow512 is in softmax_avx512_amd64.s (AVX-512 F); n ≥ 1.
//
//go:noescape
func softmaxRow512(x, b *float32, n int, s float32, c *[inferConsts][8]float32) float32

// useSoftmaxAVX512 says whether ExpScaled runs softmaxRow512 (a variable
// for the tests of every path). Its values are the AVX2 kernels' bit for
// bit, so it needs their FMA too.
var useSoftmaxAVX512 = cpu.X86.HasAVX512F && useInferAVX2

// expScaledVec is ExpScaled's whole row in one AVX-512 call (the last
// len%16 elements under a mask), where there is AVX-512: false when it
// did nothing.
func expScaledVec(row, bias []float32, scale float32) (float32, bool) {
	if !useSoftmaxAVX512 || len(row) == 0 {
		return 0, false
	}
	bias = bias[:len(row)]
	return softmaxRow512(&row[0], &bias[0], len(row), scale, inferTable), true
}

// expRows512 and scaleRows512 are in softmax_avx512_amd64.s (AVX-512 F).
//
//go:noescape
func expRows512(x *float32, ld, n, rows int, m, inv *float32, c *[inferConsts][8]float32)

//go:noescape
func scaleRows512(x *float32, ld, n int, f *float32, rows int)

// expRowsVec is expRowMax on rows rows of s (n values, ld apart, maxima
// at m 16 lanes a row), each sum's reciprocal in inv, in one AVX-512
// call, where there is AVX-512: false when it did nothing.
func expRowsVec(s []float32, ld, n, rows int, m, inv []float32) bool {
	if !useSoftmaxAVX512 || n <= 0 || rows <= 0 {
		return false
	}
	_, _, _ = s[(rows-1)*ld+n-1], m[rows*16-1], inv[rows-1]
	expRows512(&s[0], ld, n, rows, &m[0], &inv[0], inferTable)
	return true
}

// scaleRowsVec sets rows rows of x (n values, ld apart; n a multiple of
// 16) to x·f[r] in one AVX-512 call, where there is AVX-512: false when
// it did nothing.
func scaleRowsVec(x []float32, ld, n int, f []float32) bool {
	rows := len(f)
	if !useSoftmaxAVX512 || n <= 0 || n%16 != 0 || rows == 0 {
		return false
	}
	_ = x[(rows-1)*ld+n-1]
	scaleRows512(&x[0], ld, n, &f[0], rows)
	return true
}
