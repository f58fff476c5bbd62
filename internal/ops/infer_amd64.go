package ops

import (
	"math"

	"golang.org/x/sys/cpu"
)

// inferConsts is the number of constant rows inferTable holds.
const inferConsts = 28

// In infer_amd64.s (AVX2 and FMA); n is a multiple of 8.
//
//go:noescape
func scaleBiasMaxAVX2(x, b *float32, n int, s float32, c *[inferConsts][8]float32) float32

//go:noescape
func expSubSumAVX2(x *float32, n int, mx float32, c *[inferConsts][8]float32) float32

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func geluAVX2(x *float32, n int, c *[inferConsts][8]float32)

//go:noescape
func addSumAVX2(x, res *float32, n int) float64

//go:noescape
func sqDevSumAVX2(x *float32, n int, mu float32) float64

//go:noescape
func normAVX2(out, x, w, b *float32, n int, mu, rs float32)

// inferTable holds the constants of infer_amd64.s, in its order; it is
// read only.
var inferTable = func() *[inferConsts][8]float32 {
	vals := [inferConsts]float32{1.44269504088896341, 1, math.Float32frombits(127), 0.5, invSqrt2, 4, -4,
		-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
		-7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02,
		-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02,
		float32(math.Inf(-1)), 12582912,
		-126, exp2C1, exp2C2, exp2C3, exp2C4, exp2C5, exp2C6}
	var t [inferConsts][8]float32
	for i, v := range vals {
		for j := range t[i] {
			t[i][j] = v
		}
	}
	return &t
}()

var useInferAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// The vector parts of SoftmaxScaled, GELUInPlace and AddLayerNorm: each
// does the first len&^7 elements where there is AVX2 and FMA, and says
// how many it did.

func scaleBiasMaxVec(x, b []float32, s float32) (n int, mx float32) {
	n = len(x) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0, float32(math.Inf(-1))
	}
	return n, scaleBiasMaxAVX2(&x[0], &b[0], n, s, inferTable)
}

func expSubSumVec(x []float32, mx float32) (n int, sum float32) {
	n = len(x) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0, 0
	}
	return n, expSubSumAVX2(&x[0], n, mx, inferTable)
}

func scaleVec(x []float32, s float32) int {
	n := len(x) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0
	}
	scaleAVX2(&x[0], n, s)
	return n
}

func geluVec(x []float32) int {
	n := len(x) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0
	}
	geluAVX2(&x[0], n, inferTable)
	return n
}

func addSumVec(x, res []float32) (int, float64) {
	n := len(res) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0, 0
	}
	_ = x[n-1]
	return n, addSumAVX2(&x[0], &res[0], n)
}

func sqDevSumVec(x []float32, mu float32) (int, float64) {
	n := len(x) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0, 0
	}
	return n, sqDevSumAVX2(&x[0], n, mu)
}

func normVec(out, x, w, b []float32, mu, rs float32) int {
	n := len(x) &^ 7
	if !useInferAVX2 || n == 0 {
		return 0
	}
	_, _, _ = out[n-1], w[n-1], b[n-1]
	normAVX2(&out[0], &x[0], &w[0], &b[0], n, mu, rs)
	return n
}
