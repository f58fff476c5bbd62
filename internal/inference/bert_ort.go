//go:build cgo && !annapure

package inference

import (
	"fmt"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/model"
)

// ortRunner runs model.onnx in an ONNX Runtime session.
type ortRunner struct {
	sess   *ortgo.DynamicAdvancedSession
	output string // the graph output read
	dim    int    // its last dimension: hidden size, embedding dim or labels
	ctxDim int    // a Causal2Vec graph's context width (0: none)
}

// newORTRunner creates m's ONNX Runtime session.
func newORTRunner(m *Model) (runner, error) {
	inputs := []string{model.InputIDs, model.InputMask, model.InputTypeIDs}
	if m.context > 0 {
		inputs = append(inputs, model.InputContext)
	}
	sess, err := ort.NewSession(m.dir.ONNXPath, inputs, []string{m.output},
		ort.Options{IntraOpThreads: m.threads.intra, InterOpThreads: m.threads.inter})
	if err != nil {
		return nil, err
	}
	r := &ortRunner{sess: sess, output: m.output, dim: m.dir.Manifest.Dim, ctxDim: m.context}
	if m.output == model.OutputLogits {
		r.dim = m.dir.Manifest.NumLabels
	}
	return r, nil
}

func (r *ortRunner) close() error { return r.sess.Destroy() }

// run feeds one [b, seq] batch (then a Causal2Vec graph's context) to the
// session and returns its single output.
func (r *ortRunner) run(ids, mask, types []int64, b, seq int, ctxRows []float32) ([]float32, error) {
	shape := ortgo.NewShape(int64(b), int64(seq))
	outShape := ortgo.NewShape(int64(b), int64(r.dim))
	if r.output == model.OutputHidden {
		outShape = ortgo.NewShape(int64(b), int64(seq), int64(r.dim))
	}
	in := make([]ortgo.Value, 0, 4)
	defer func() {
		for _, v := range in {
			v.Destroy()
		}
	}()
	for _, t := range []struct {
		name string
		data []int64
	}{{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}} {
		v, err := ortgo.NewTensor(shape, t.data)
		if err != nil {
			return nil, fmt.Errorf("%s tensor: %w", t.name, err)
		}
		in = append(in, v)
	}
	if r.ctxDim > 0 {
		v, err := ortgo.NewTensor(ortgo.NewShape(int64(b), int64(r.ctxDim)), ctxRows)
		if err != nil {
			return nil, fmt.Errorf("context tensor: %w", err)
		}
		in = append(in, v)
	}
	out, err := ortgo.NewEmptyTensor[float32](outShape)
	if err != nil {
		return nil, fmt.Errorf("output tensor %v: %w", outShape, err)
	}
	defer out.Destroy()
	if err := r.sess.Run(in, []ortgo.Value{out}); err != nil {
		return nil, err
	}
	// out's memory is freed by Destroy: copy what the caller keeps.
	return append([]float32(nil), out.GetData()...), nil
}
