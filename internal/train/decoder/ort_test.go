package decoder

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/tokenizer"
)

// TestSmolLM2ForwardMatchesONNXRuntime runs SmolLM2-135M-Instruct, loaded
// from its GGUF file, in the trainer and in ONNX Runtime (the model.onnx
// the GGUF import writes), on a right-padded batch of texts tokenized by the
// imported tokenizer (EOS appended), and compares the last hidden state at
// every real token. Needs the file (annactl models download
// smollm2-135m-instruct) and ONNX Runtime (make setup).
func TestSmolLM2ForwardMatchesONNXRuntime(t *testing.T) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	if err := ort.Init(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := gguftest.SmolLM2(t, dir)
	mdir := filepath.Join(dir, "model")
	if _, err := onnx.ImportGGUF(context.Background(), path, mdir, onnx.Settings{MaxLength: 512}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(mdir, onnx.TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	texts := []string{
		"What is the capital of France?",
		"Instruct: Given a question, retrieve passages that answer it\nQuery: how do tides work",
		"The mitochondria is the powerhouse of the cell.",
		"a",
		"Transformers use self-attention to mix information across tokens in a sequence; decoders attend causally.",
	}
	ids, _, mask, T := tokenizer.Pad(tok.EncodeBatch(texts, 0), tok.PadID())
	N, C := len(texts), m.Cfg.HiddenSize
	b := &Batch{N: N, T: T, IDs: make([]int32, N*T), Mask: make([]float32, N*T)}
	for i := range ids {
		b.IDs[i], b.Mask[i] = int32(ids[i]), float32(mask[i])
	}
	a, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}

	want := runHidden(t, filepath.Join(mdir, onnx.ModelFile), ids, mask, N, T, C)
	var maxDiff, maxAbs float64
	real := 0
	for i := 0; i < N*T; i++ {
		if b.Mask[i] == 0 {
			continue
		}
		real++
		for c := 0; c < C; c++ {
			maxDiff = math.Max(maxDiff, math.Abs(float64(a.Hidden[i*C+c]-want[i*C+c])))
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[i*C+c])))
		}
	}
	t.Logf("SmolLM2, %d texts (%d real tokens, padded to %d): max |trainer − ONNX Runtime| = %.3g (largest |value| %.3g)", N, real, T, maxDiff, maxAbs)
	if maxDiff > 1e-3 {
		t.Errorf("trainer forward differs from ONNX Runtime by %.3g (> 1e-3)", maxDiff)
	}
}

// runHidden runs a model.onnx and returns its last_hidden_state.
func runHidden(t *testing.T, path string, ids, mask []int64, N, T, C int) []float32 {
	t.Helper()
	sess, err := ort.NewSession(path, []string{onnx.InputIDs, onnx.InputMask, onnx.InputTypeIDs}, []string{onnx.OutputHidden}, ort.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	shape := ortgo.NewShape(int64(N), int64(T))
	in := make([]ortgo.Value, 3)
	for i, v := range [][]int64{ids, mask, make([]int64, N*T)} {
		x, err := ortgo.NewTensor(shape, v)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Destroy()
		in[i] = x
	}
	out, err := ortgo.NewEmptyTensor[float32](ortgo.NewShape(int64(N), int64(T), int64(C)))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Destroy()
	if err := sess.Run(in, []ortgo.Value{out}); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out.GetData())
}
