package encoder

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/model"
)

// graphForms imports MiniLM from its source weights (sourceDir, kept by
// `make setup`) once per form: the fused float32 graph (anna's default),
// the unfused float32 graph anna wrote before it, and the int8 one.
var (
	formsOnce sync.Once
	formDirs  map[string]string
	formsErr  error
)

const (
	formFused   = "fused"
	formUnfused = "unfused"
	formInt8    = "int8"
)

func graphForms(t *testing.T) map[string]string {
	t.Helper()
	formsOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(sourceDir(), "config.json")); err != nil {
			formsErr = err
			return
		}
		tmp, err := os.MkdirTemp("", "anna-encoder-forms")
		if err != nil {
			formsErr = err
			return
		}
		quantTmp = tmp
		yes := true
		formDirs = map[string]string{}
		for _, f := range []struct {
			name string
			o    onnx.BuildOptions
		}{{formFused, onnx.BuildOptions{}}, {formUnfused, onnx.BuildOptions{Unfused: true}}, {formInt8, onnx.BuildOptions{Quantize: model.QuantizeInt8}}} {
			dir := filepath.Join(tmp, f.name)
			s := onnx.Settings{Pooling: "mean", MaxLength: 256, Normalize: &yes, Name: "all-MiniLM-L6-v2", Quantize: f.o.Quantize, Unfused: f.o.Unfused}
			if _, formsErr = onnx.Import(context.Background(), sourceDir(), dir, s); formsErr != nil {
				return
			}
			formDirs[f.name] = dir
		}
	})
	if errors.Is(formsErr, os.ErrNotExist) {
		t.Skipf("no MiniLM source weights at %s (run `make setup`): %v", sourceDir(), formsErr)
	}
	if formsErr != nil {
		t.Fatal(formsErr)
	}
	return formDirs
}

// quantTmp holds graphForms' models; TestMain removes it.
var quantTmp string

// sciFactTexts is the first n SciFact abstracts (title and text), real
// text of the length documents have.
func sciFactTexts(t *testing.T, n int) []string {
	t.Helper()
	path := filepath.Join(sharedDir(t), "datasets", "scifact", "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("SciFact absent: %v", err)
	}
	defer f.Close()
	var texts []string
	stop := errors.New("enough")
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
		texts = append(texts, strings.TrimSpace(d.Title+" "+d.Text))
		if len(texts) == n {
			return stop
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		t.Fatal(err)
	}
	return texts
}

func embedWith(t *testing.T, dir string, texts []string) (*Model, [][]float32) {
	t.Helper()
	e, err := Load(context.Background(), dir, Options{IntraOpThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	v, err := e.EmbedDocuments(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	return e, v
}

// TestFusedMatchesUnfused: MiniLM's fused graph (Attention,
// SkipLayerNormalization, BiasGelu) gives the vectors of the graph anna
// wrote before it, within the golden files' 1e-5, on the golden texts and
// 40 SciFact abstracts; the fingerprints differ (the bytes do).
func TestFusedMatchesUnfused(t *testing.T) {
	forms := graphForms(t)
	texts := append(append([]string(nil), goldenTexts...), sciFactTexts(t, 40)...)
	fe, fused := embedWith(t, forms[formFused], texts)
	ue, unfused := embedWith(t, forms[formUnfused], texts)
	worst := 0.0
	for i := range fused {
		worst = math.Max(worst, maxAbsDiff(fused[i], unfused[i]))
	}
	t.Logf("fused vs unfused MiniLM, %d texts: max abs diff %.2g", len(texts), worst)
	if worst > 1e-5 {
		t.Errorf("fused and unfused vectors differ by %g (want ≤ 1e-5)", worst)
	}
	if fe.Fingerprint() == ue.Fingerprint() {
		t.Error("fused and unfused graphs share a fingerprint")
	}
}

// TestQuantizedMiniLM: the int8 MiniLM (imported with Quantize int8) is
// recorded as such in its manifest, has its own fingerprint, and embeds 48
// SciFact abstracts each with cosine ≥ 0.99 to the float32 vector, the
// golden texts (empty, blank, one word, ...) with ≥ 0.95, and all of them
// with mean cosine ≥ 0.994 (0.9955 with every product's input quantized
// per row; 0.9959 with the Q/K/V input per batch, the others per row;
// 0.9922 when all were quantized per batch).
func TestQuantizedMiniLM(t *testing.T) {
	needORT(t)
	forms := graphForms(t)
	texts := append(append([]string(nil), goldenTexts...), sciFactTexts(t, 48)...)
	fe, f32 := embedWith(t, forms[formFused], texts)
	qe, i8 := embedWith(t, forms[formInt8], texts)
	if q := qe.Manifest().Quantization; q != model.QuantizeInt8 {
		t.Errorf("int8 model's manifest says quantization %q", q)
	}
	if q := fe.Manifest().Quantization; q != "" {
		t.Errorf("float32 model's manifest says quantization %q", q)
	}
	if fe.Fingerprint() == qe.Fingerprint() {
		t.Error("int8 and float32 models share a fingerprint: their vectors would mix in stores and caches")
	}
	lowest, sum := 1.0, 0.0
	for i := range texts {
		c := dot(f32[i], i8[i])
		sum += c
		lowest = min(lowest, c)
		want := 0.99
		if i < len(goldenTexts) {
			// Empty, blank and one-word texts pool a few tokens: a little
			// quantization noise is a larger share of their vectors.
			want = 0.95
		}
		if c < want {
			t.Errorf("text %d (%.40q): int8 vs float32 cosine %.4f < %g", i, texts[i], c, want)
		}
	}
	mean := sum / float64(len(texts))
	t.Logf("int8 vs float32 MiniLM, %d texts: cosine mean %.5f, min %.5f", len(texts), mean, lowest)
	if mean < 0.994 {
		t.Errorf("mean cosine %.4f < 0.994", mean)
	}
}
