//go:build cgo && !annapure

package cuda_test

import (
	"os"
	"slices"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/ort"
)

// ortHidden runs the graph at path in ONNX Runtime and returns its
// last_hidden_state (N×T×C), or why it cannot.
func ortHidden(path string, ids, mask []int64, N, T, C int) ([]float32, error) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		return nil, err
	}
	if err := ort.Init(); err != nil {
		return nil, err
	}
	sess, err := ort.NewSession(path, []string{onnx.InputIDs, onnx.InputMask, onnx.InputTypeIDs}, []string{onnx.OutputHidden}, ort.Options{})
	if err != nil {
		return nil, err
	}
	defer sess.Destroy()
	shape := ortgo.NewShape(int64(N), int64(T))
	in := make([]ortgo.Value, 3)
	for i, v := range [][]int64{ids, mask, make([]int64, N*T)} {
		x, err := ortgo.NewTensor(shape, v)
		if err != nil {
			return nil, err
		}
		defer x.Destroy()
		in[i] = x
	}
	out, err := ortgo.NewEmptyTensor[float32](ortgo.NewShape(int64(N), int64(T), int64(C)))
	if err != nil {
		return nil, err
	}
	defer out.Destroy()
	if err := sess.Run(in, []ortgo.Value{out}); err != nil {
		return nil, err
	}
	return slices.Clone(out.GetData()), nil
}
