package onnx

import "math"

// weightQMax is the largest |q| of a quantized weight: 7 bits (see
// quantizeColumns).
const weightQMax = 64

// quantizeColumns quantizes a row-major [rows, cols] MatMul weight (B of
// A·B: cols are output features) to int8 with one scale per column,
// symmetric (zero point 0): scale = max|column| / weightQMax and q =
// round(w / scale), so every value is within scale/2 of q·scale and q is
// in [-weightQMax, weightQMax]. An all-zero column gets scale 1.
//
// Signed weights against unsigned activations (uint8, from
// DynamicQuantizeLinear) is the u8s8 product that AVX-512 VNNI and AVX2
// run; on AVX2 without VNNI (vpmaddubsw) the sum of two products is held in
// 16 bits and saturates once 2·255·|q| > 32767. So the weights use 7 bits,
// as ONNX Runtime's quantizer does with reduce_range: 2·255·64 = 32640
// cannot saturate on any x86 CPU. (With 8 bits, TestQuantizedGraph's tiny
// BERT moved by 0.32 on an AVX2 machine, against its limit of 0.1.)
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
			scale[c] = m / weightQMax
		}
	}
	q := make([]int8, len(w))
	for r := 0; r < rows; r++ {
		for c, v := range w[r*cols : (r+1)*cols] {
			x := math.Round(float64(v) / float64(scale[c]))
			q[r*cols+c] = int8(max(-weightQMax, min(weightQMax, x)))
		}
	}
	return q, scale
}
