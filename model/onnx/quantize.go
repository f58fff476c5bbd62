package onnx

import "math"

// quantizeColumns quantizes a row-major [rows, cols] MatMul weight (B of
// A·B: cols are output features) to int8 with one scale per column,
// symmetric (zero point 0): scale = max|column| / 127 and q =
// round(w / scale), so every value is within scale/2 of q·scale and q is
// in [-127, 127]. An all-zero column gets scale 1.
//
// Signed weights against unsigned activations (uint8, from
// DynamicQuantizeLinear) is the u8s8 product that AVX-512 VNNI and AVX2
// run; on AVX2 without VNNI the 16-bit intermediate can saturate for
// extreme activations (ONNX Runtime's quantizer offers reduce_range for
// such CPUs; anna's benchmark machine has VNNI).
func quantizeColumns(w []float32, rows, cols int) ([]int8, []float32) {
	scale := make([]float32, cols)
	for r := 0; r < rows; r++ {
		for c, v := range w[r*cols : (r+1)*cols] {
			scale[c] = max(scale[c], float32(math.Abs(float64(v))))
		}
	}
	for c, m := range scale {
		if m == 0 {
			scale[c] = 1
		} else {
			scale[c] = m / 127
		}
	}
	q := make([]int8, len(w))
	for r := 0; r < rows; r++ {
		for c, v := range w[r*cols : (r+1)*cols] {
			x := math.Round(float64(v) / float64(scale[c]))
			q[r*cols+c] = int8(max(-127, min(127, x)))
		}
	}
	return q, scale
}
