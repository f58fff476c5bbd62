package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// TestForwardMatchesONNXRuntime runs real models on a few sentences in Go
// (the trainer's forward over the checkpoint it trains) and in ONNX Runtime
// (the installed model.onnx) and compares last_hidden_state at every real
// token: all-MiniLM-L6-v2 from its safetensors, and bge-small-en-v1.5 from
// the checkpoint its ONNX graph's weights were read back into
// (catalog.TrainingSource), when installed.
func TestForwardMatchesONNXRuntime(t *testing.T) {
	t.Run("all-MiniLM-L6-v2", func(t *testing.T) {
		dir := home.DefaultModel()
		if _, err := os.Stat(filepath.Join(dir, onnx.ModelFile)); err != nil {
			t.Skipf("skipping: default model not installed at %s (run `make setup`)", dir)
		}
		man, err := model.LoadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(man.Source, "config.json")); err != nil {
			t.Skipf("skipping: the model's source checkpoint %q is not installed (run `make setup`)", man.Source)
		}
		forwardMatchesORT(t, dir, man.Source)
	})
	t.Run("bge-small-en-v1.5", func(t *testing.T) {
		e, err := catalog.Lookup("bge-small-en-v1.5")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(home.ModelsDir(), e.Name)
		if _, err := os.Stat(filepath.Join(dir, onnx.ModelFile)); err != nil {
			t.Skipf("skipping: %s not installed (annactl models install %s; make test-models)", dir, e.Name)
		}
		if _, err := os.Stat(filepath.Join(home.DownloadsDir(), filepath.Base(e.URL))); err != nil {
			t.Skipf("skipping: its archive is not in %s", home.DownloadsDir())
		}
		src, ok, err := catalog.TrainingSource(context.Background(), e, catalog.Options{ModelsDir: home.ModelsDir(), DownloadsDir: home.DownloadsDir()})
		if err != nil || !ok {
			t.Fatalf("training source: %v, %v", ok, err)
		}
		st, err := model.ReadSentenceTransformers(src)
		if err != nil || st.Pooling != model.PoolingCLS || !st.Normalize || st.QueryPrefix == "" {
			t.Errorf("%s serves as %+v, %v; want CLS pooling, normalised, with its query instruction", src, st, err)
		}
		forwardMatchesORT(t, dir, src)
	})
}

func forwardMatchesORT(t *testing.T, dir, src string) {
	man, err := model.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bert.LoadModel(src, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, onnx.TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	texts := []string{
		"A man is playing a guitar.",
		"The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
		"What is the capital of France?",
		"Gradient descent",
		"Transformers use self-attention to mix information across tokens in a sequence.",
	}
	ids, types, mask, T := tokenizer.Pad(tok.EncodeBatch(texts, man.MaxLength), tok.PadID())
	N := len(texts)
	b := bert.PaddedBatch(ids, types, mask, T)
	a, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}

	C := m.Cfg.HiddenSize
	want := ortHidden(t, filepath.Join(dir, onnx.ModelFile), ids, types, mask, N, T, C)
	var maxDiff float64
	for i := 0; i < N*T; i++ {
		if b.Mask[i] == 0 {
			continue
		}
		for c := 0; c < C; c++ {
			maxDiff = math.Max(maxDiff, math.Abs(float64(a.Hidden[i*C+c]-want[i*C+c])))
		}
	}
	t.Logf("%d sentences, %d tokens padded to %d: max |Go − ONNX Runtime| over last_hidden_state = %.3g", N, T, T, maxDiff)
	if maxDiff > 1e-4 {
		t.Errorf("Go forward differs from ONNX Runtime by %.3g (> 1e-4)", maxDiff)
	}
}

// ortHidden runs model.onnx in ONNX Runtime and returns last_hidden_state.
func ortHidden(t *testing.T, path string, ids, types, mask []int64, N, T, C int) []float32 {
	t.Helper()
	return ortRun(t, path, onnx.OutputHidden, ids, types, mask, ortgo.NewShape(int64(N), int64(T)), ortgo.NewShape(int64(N), int64(T), int64(C)))
}

// ortLogits runs a rerank model.onnx and returns its [N,1] logits.
func ortLogits(t *testing.T, path string, ids, types, mask []int64, N, T int) []float32 {
	t.Helper()
	return ortRun(t, path, onnx.OutputLogits, ids, types, mask, ortgo.NewShape(int64(N), int64(T)), ortgo.NewShape(int64(N), 1))
}

// ortRun runs model.onnx over one batch (ids, mask and token types of
// shape in) and returns its output named output, of shape out.
func ortRun(t *testing.T, path, output string, ids, types, mask []int64, in, out ortgo.Shape) []float32 {
	t.Helper()
	if err := ort.Init(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	sess, err := ort.NewSession(path, []string{onnx.InputIDs, onnx.InputMask, onnx.InputTypeIDs}, []string{output}, ort.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	tIDs, _ := ortgo.NewTensor(in, ids)
	defer tIDs.Destroy()
	tMask, _ := ortgo.NewTensor(in, mask)
	defer tMask.Destroy()
	tTypes, _ := ortgo.NewTensor(in, types)
	defer tTypes.Destroy()
	res, err := ortgo.NewEmptyTensor[float32](out)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Destroy()
	if err := sess.Run([]ortgo.Value{tIDs, tMask, tTypes}, []ortgo.Value{res}); err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), res.GetData()...)
}
