//go:build !amd64

package ops

import "math"

// The vector parts of SoftmaxScaled, GELUInPlace and AddLayerNorm: none
// here (useInferAVX2, always false, is for the tests of both paths).

var useInferAVX2 = false

func scaleBiasMaxVec(x, b []float32, s float32) (int, float32) { return 0, float32(math.Inf(-1)) }

func expSubSumVec(x []float32, mx float32) (int, float32) { return 0, 0 }

func scaleVec(x []float32, s float32) int { return 0 }

func geluVec(x []float32) int { return 0 }

func addSumVec(x, res []float32) (int, float64) { return 0, 0 }

func sqDevSumVec(x []float32, mu float32) (int, float64) { return 0, 0 }

func normVec(out, x, w, b []float32, mu, rs float32) int { return 0 }

var useSoftmaxAVX512 = false

func expScaledVec(row, bias []float32, scale float32) (float32, bool) { return 0, false }

func expRowsVec(s []float32, ld, n, rows int, m, inv []float32) bool { return false }

func scaleRowsVec(x []float32, ld, n int, f []float32) bool { return false }
