package decoder

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
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

// TestTinyDecodersMatchONNXRuntime builds anna's ONNX graph (onnx.BuildLlama,
// what the import path writes) of tiny random Llama, Qwen2 and Qwen3 models
// and runs it in ONNX Runtime against the trainer's forward (itself checked
// against PyTorch): Qwen2's q/k/v biases, Qwen3's per-head q/k norms
// with a head width other than hidden/heads, and bidirectional attention
// (config anna_attention).
func TestTinyDecodersMatchONNXRuntime(t *testing.T) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	if err := ort.Init(); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen2-bidirectional"} {
		t.Run(arch, func(t *testing.T) {
			typ, attention, _ := strings.Cut(arch, "-")
			cfg := testmodels.Decoder(typ)
			cfg.Attention = attention
			tensors := RandomTensors(cfg, 0.2, 7)
			g, err := onnx.BuildLlama(cfg, tensors, model.TaskEmbed)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "model.onnx")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.WriteTo(f); err != nil {
				t.Fatal(err)
			}
			f.Close()
			m, err := New(cfg, RandomTensors(cfg, 0.2, 7))
			if err != nil {
				t.Fatal(err)
			}
			if m.Causal != (attention == "") {
				t.Fatalf("config anna_attention %q: model causal %v", attention, m.Causal)
			}
			const N, T = 3, 9
			b := randomBatch(rand.New(rand.NewPCG(1, 2)), N, T, cfg.VocabSize)
			a, err := m.Forward(b)
			if err != nil {
				t.Fatal(err)
			}
			ids, mask := make([]int64, N*T), make([]int64, N*T)
			for i := range ids {
				ids[i], mask[i] = int64(b.IDs[i]), int64(b.Mask[i])
			}
			want := runHidden(t, path, ids, mask, N, T, cfg.HiddenSize)
			var maxDiff float64
			for i := 0; i < N*T; i++ {
				if b.Mask[i] == 0 {
					continue
				}
				for c := 0; c < cfg.HiddenSize; c++ {
					maxDiff = math.Max(maxDiff, math.Abs(float64(a.Hidden[i*cfg.HiddenSize+c]-want[i*cfg.HiddenSize+c])))
				}
			}
			t.Logf("%s: max |trainer − ONNX Runtime| = %.3g", arch, maxDiff)
			if maxDiff > 1e-4 {
				t.Errorf("%s: the ONNX graph differs from the trainer by %.3g", arch, maxDiff)
			}
		})
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
