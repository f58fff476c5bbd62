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

// expRow512 is in softmax_avx512_amd64.s (AVX-512 F); n ≥ 1.
//
//go:noescape
func expRow512(x *float32, n int, m *float32, c *[inferConsts][8]float32) float32

// expRowVec is expRowMax's whole row in one AVX-512 call, where there is
// AVX-512: false when it did nothing.
func expRowVec(row, m []float32) (float32, bool) {
	if !useSoftmaxAVX512 || len(row) == 0 {
		return 0, false
	}
	_ = m[15]
	return expRow512(&row[0], len(row), &m[0], inferTable), true
}
