package encoder

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// referenceTexts are the sentences of the published MiniLM cosines
// (../shared/reference), or nil when the file is absent.
func referenceTexts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sharedDir(t), "reference", "all-MiniLM-L6-v2-cosines.json"))
	if err != nil {
		return nil
	}
	var ref struct{ Pairs []struct{ A, B string } }
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ref.Pairs {
		out = append(out, p.A, p.B)
	}
	return out
}

// TestGoBackendMatchesORT: the pure-Go backend's vectors equal ONNX
// Runtime's within 1e-5 per component on the reference sentences and the
// golden texts (empty, invalid UTF-8, truncated, batches of mixed
// lengths), documents and few-shot queries alike.
func TestGoBackendMatchesORT(t *testing.T) {
	if DefaultBackend() != BackendORT {
		t.Skip("this build has no ONNX Runtime to compare with (the reference cosines check the Go backend here)")
	}
	ctx := context.Background()
	dir := testModel(t)
	texts := append(referenceTexts(t), goldenTexts...)
	vecs := map[string][][]float32{}
	for _, be := range []string{BackendORT, BackendGo} {
		enc, err := Load(ctx, dir, Options{Backend: be, BatchSize: 5, Workers: 2})
		if err != nil {
			t.Fatalf("backend %s: %v", be, err)
		}
		docs, err := enc.EmbedDocuments(ctx, texts)
		if err != nil {
			t.Fatalf("backend %s: %v", be, err)
		}
		qs, err := enc.EmbedQueries(ctx, texts[:4], Prompt{Instruction: "Find the sentence", Examples: []Example{{Query: "a", Response: "b"}}})
		if err != nil {
			t.Fatalf("backend %s: %v", be, err)
		}
		if got := enc.m.Backend(); got != be {
			t.Errorf("encoder loaded with backend %s runs %s", be, got)
		}
		enc.Close()
		vecs[be] = append(docs, qs...)
	}
	var worst float64
	for i := range vecs[BackendORT] {
		a, b := vecs[BackendORT][i], vecs[BackendGo][i]
		if len(a) != len(b) {
			t.Fatalf("vector %d: %d vs %d dimensions", i, len(a), len(b))
		}
		for j := range a {
			worst = max(worst, math.Abs(float64(a[j]-b[j])))
		}
	}
	t.Logf("%d vectors, largest component difference %.2e", len(vecs[BackendGo]), worst)
	if worst > 1e-5 {
		t.Errorf("the Go backend's vectors differ from ONNX Runtime's by up to %.2e (want ≤ 1e-5)", worst)
	}
}

// TestGoBackendBGESmall: the same for bge-small-en-v1.5 (CLS pooling, a
// 512-token window, 12 layers), when installed (make test-models).
func TestGoBackendBGESmall(t *testing.T) {
	needORT(t)
	dir := filepath.Join(home.ModelsDir(), "bge-small-en-v1.5")
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		t.Skipf("bge-small-en-v1.5 not installed (make test-models): %v", err)
	}
	ctx := context.Background()
	texts := []string{"", "what do ribosomes do?", strings.Repeat("Ribosomes translate messenger RNA into protein. ", 80),
		"Mitochondria produce most of the cell's ATP through oxidative phosphorylation."}
	var vecs [2][][]float32
	for i, be := range []string{BackendORT, BackendGo} {
		enc, err := Load(ctx, dir, Options{Backend: be})
		if err != nil {
			t.Fatalf("backend %s: %v", be, err)
		}
		vecs[i], err = enc.EmbedDocuments(ctx, texts)
		enc.Close()
		if err != nil {
			t.Fatalf("backend %s: %v", be, err)
		}
	}
	var worst float64
	for i := range vecs[0] {
		for j := range vecs[0][i] {
			worst = max(worst, math.Abs(float64(vecs[0][i][j]-vecs[1][i][j])))
		}
	}
	t.Logf("bge-small: largest component difference %.2e", worst)
	if worst > 1e-5 {
		t.Errorf("the Go backend's bge-small vectors differ from ONNX Runtime's by up to %.2e (want ≤ 1e-5)", worst)
	}
}

// TestBackendChoice: an unknown backend is refused at Load, naming the
// choices; "onnxruntime" loads where the build has it and is refused with
// the build named where it does not.
func TestBackendChoice(t *testing.T) {
	ctx := context.Background()
	dir := testModel(t)
	if _, err := Load(ctx, dir, Options{Backend: "tpu"}); err == nil || !strings.Contains(err.Error(), `unknown backend "tpu"`) {
		t.Errorf("backend tpu: %v, want an unknown-backend error", err)
	}
	enc, err := Load(ctx, dir, Options{Backend: BackendORT})
	if DefaultBackend() == BackendORT {
		if err != nil {
			t.Fatal(err)
		}
		enc.Close()
	} else if err == nil || !strings.Contains(err.Error(), "built without ONNX Runtime (CGO_ENABLED=0 or -tags annapure)") {
		t.Errorf("backend onnxruntime in a build without it: %v, want the build named", err)
	}
	enc, err = Load(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if got := enc.m.Backend(); got != DefaultBackend() {
		t.Errorf("default backend %s, want %s", got, DefaultBackend())
	}
}

// needORT skips a test of what only ONNX Runtime runs (quantized graphs,
// graphs that pool) in a build without it.
func needORT(t *testing.T) {
	t.Helper()
	if DefaultBackend() != BackendORT {
		t.Skip("needs ONNX Runtime, which this build lacks (CGO_ENABLED=0 or -tags annapure)")
	}
}
