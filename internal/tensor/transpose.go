package tensor

// Transposed returns the [cols, rows] transpose of a row-major [rows, cols]
// matrix d (a new slice): a Linear weight [out, in] as an ONNX MatMul's
// [in, out], and back.
func Transposed(d []float32, rows, cols int) []float32 {
	t := make([]float32, len(d))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			t[c*rows+r] = d[r*cols+c]
		}
	}
	return t
}
