package onnxfile

import "fmt"

// Int8Columns is an int8 product weight with one float32 scale per output
// column, as anna's converter writes a quantized graph's products (model/
// onnx's quantizeColumns): W, In×Out row-major (MatMulIntegerToFloat's B,
// ONNX's layout), symmetric, so that the float32 weight is
// W[k, j]·Scale[j].
type Int8Columns struct {
	In, Out int
	W       []int8
	Scale   []float32
}

// Int8ColumnsOf returns w (int8, shape [in, out]) and scale (out float32
// values) as Int8Columns, or an error naming the tensor that is not so.
func Int8ColumnsOf(w, scale *Tensor, in, out int) (*Int8Columns, error) {
	if w.DataType != Int8 || len(w.Shape) != 2 || w.Shape[0] != in || w.Shape[1] != out || len(w.Int64) != in*out {
		return nil, fmt.Errorf("%s (element type %d, shape %v, want int8 [%d %d])", w.Name, w.DataType, w.Shape, in, out)
	}
	if scale.DataType != Float || len(scale.Float) != out {
		return nil, fmt.Errorf("%s (%d float32 values, want %d)", scale.Name, len(scale.Float), out)
	}
	q := make([]int8, len(w.Int64))
	for i, v := range w.Int64 {
		q[i] = int8(v)
	}
	return &Int8Columns{In: in, Out: out, W: q, Scale: scale.Float}, nil
}
