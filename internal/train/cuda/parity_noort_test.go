//go:build !cgo || annapure

package cuda_test

import "github.com/anna-search/anna/internal/ort"

// ortHidden: this build has no ONNX Runtime.
func ortHidden(string, []int64, []int64, int, int, int) ([]float32, error) {
	return nil, ort.ErrNotBuilt
}
