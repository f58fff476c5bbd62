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

// int4Block is how many consecutive input features share one scale and
// zero point in an int4 weight (MatMulNBits' block_size; llama.cpp's Q4
// blocks are 32 too).
const int4Block = 32

// quantizeBlocks4 quantizes a Linear weight w, row-major [out, in] (row n
// holds output feature n's weights), to unsigned 4 bits in blocks of
// int4Block along in, with llama.cpp's Q4_1 grid: over each block, step
// d = (max − min)/15 and q = round((w − min)/d) ∈ [0, 15], so that w is
// within d/2 of min + q·d. MatMulNBits computes (q − zp)·scale, so scale = d
// and the zero point is the float zp = −min/d (ONNX Runtime takes float
// zero points). A Q4_1 GGUF's weights (SmolLM2's), dequantized and
// quantized again here, come back on their own grid: the 4-bit graph
// loses nothing of the file. The layout is MatMulNBits': packed [out,
// blocks, int4Block/2] bytes, two weights a byte, the lower-indexed one in
// the low nibble; scales and zero points [out·blocks]. A row whose length
// is not a multiple of int4Block is padded with q = 0. A block of equal
// values gets scale 1 and q = 0.
func quantizeBlocks4(w []float32, out, in int) (packed []uint8, scales, zps []float32) {
	nb := (in + int4Block - 1) / int4Block
	packed = make([]uint8, out*nb*int4Block/2)
	scales = make([]float32, out*nb)
	zps = make([]float32, out*nb)
	for n := 0; n < out; n++ {
		row := w[n*in : (n+1)*in]
		for b := 0; b < nb; b++ {
			blk := row[b*int4Block : min((b+1)*int4Block, in)]
			lo, hi := blk[0], blk[0]
			for _, v := range blk {
				lo, hi = min(lo, v), max(hi, v)
			}
			d := (hi - lo) / 15
			if d == 0 {
				d = 1
			}
			scales[n*nb+b], zps[n*nb+b] = d, -lo/d
			for i, v := range blk {
				q := uint8(max(0, min(15, math.Round(float64((v-lo)/d)))))
				packed[(n*nb+b)*int4Block/2+i/2] |= q << (4 * (i % 2))
			}
		}
	}
	return packed, scales, zps
}

// dequantizeBlocks4 is quantizeBlocks4's inverse: the [out, in] weights
// (q − zp)·scale that MatMulNBits multiplies by.
func dequantizeBlocks4(packed []uint8, scales, zps []float32, out, in int) []float32 {
	nb := (in + int4Block - 1) / int4Block
	w := make([]float32, out*in)
	for n := 0; n < out; n++ {
		for k := 0; k < in; k++ {
			b, i := k/int4Block, k%int4Block
			q := packed[(n*nb+b)*int4Block/2+i/2] >> (4 * (i % 2)) & 15
			w[n*in+k] = (float32(q) - zps[n*nb+b]) * scales[n*nb+b]
		}
	}
	return w
}

// int8Block is how many consecutive values of a row share one scale in an
// int8 embedding table (llama.cpp's Q8_0 blocks are 32 too).
const int8Block = 32

// quantizeBlocks8 quantizes a [rows, cols] table (cols a multiple of
// int8Block) to int8 in blocks of int8Block along each row, symmetric, as
// llama.cpp's Q8_0 does: scale = max|block|/127, q = round(w/scale), so w
// is within scale/2 of q·scale; a Q8_0 GGUF's table (SmolLM2's
// token_embd), dequantized and quantized again, comes back exactly. An
// all-zero block gets scale 1. scales is [rows, cols/int8Block].
func quantizeBlocks8(w []float32, rows, cols int) (q []int8, scales []float32) {
	q = make([]int8, len(w))
	scales = make([]float32, rows*cols/int8Block)
	for b := range scales {
		blk := w[b*int8Block : (b+1)*int8Block]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		if d == 0 {
			d = 1
		}
		scales[b] = d
		for i, v := range blk {
			q[b*int8Block+i] = int8(max(-127, min(127, math.Round(float64(v/d)))))
		}
	}
	return q, scales
}
