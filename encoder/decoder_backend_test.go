package encoder

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// installedDecoders lists the installed decoder embedders (a SmolLM2
// imported with `annactl models import --pooling lasttoken smollm2.gguf …`,
// or installed with --quantize int8 or int4): the float32 ones, or, when
// quantized, the int8 and int4 ones; each with the paired encoder it
// needs absent.
func installedDecoders(quantized bool) []string {
	entries, _ := os.ReadDir(home.ModelsDir())
	var dirs []string
	for _, e := range entries {
		dir := filepath.Join(home.ModelsDir(), e.Name())
		md, err := model.OpenDir(dir)
		if err != nil || !md.Config.IsDecoder() || md.Manifest.Task != model.TaskEmbed || (md.Manifest.Quantization != "") != quantized || md.Manifest.Context != nil {
			continue
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// decoderTexts are what the decoder backend tests embed: as documents,
// and the middle two as instructed queries.
var decoderTexts = []string{"", "what do ribosomes do?", strings.Repeat("Ribosomes translate messenger RNA into protein. ", 12),
	"Mitochondria produce most of the cell's ATP through oxidative phosphorylation."}

// embedOnBothBackends returns the model at dir's vectors of decoderTexts
// as documents, then of decoderTexts[1:3] as instructed queries, through
// ONNX Runtime ([0]) and through the Go backend ([1]).
func embedOnBothBackends(t *testing.T, ctx context.Context, dir string) [2][][]float32 {
	t.Helper()
	var vecs [2][][]float32
	for i, be := range []string{BackendORT, BackendGo} {
		enc, err := Load(ctx, dir, Options{Backend: be, BatchSize: 3, Workers: 1})
		if err != nil {
			t.Fatalf("%s, backend %s: %v", dir, be, err)
		}
		docs, err := enc.EmbedDocuments(ctx, decoderTexts)
		if err == nil {
			var qs [][]float32
			qs, err = enc.EmbedQueries(ctx, decoderTexts[1:3], Prompt{Instruction: "Find the passage"})
			docs = append(docs, qs...)
		}
		enc.Close()
		if err != nil {
			t.Fatalf("%s, backend %s: %v", dir, be, err)
		}
		vecs[i] = docs
	}
	return vecs
}

// TestGoBackendDecoders: every installed float32 decoder embedder (a real
// SmolLM2) embeds documents and instructed queries through the Go backend
// as through ONNX Runtime, within 1e-5 per component.
func TestGoBackendDecoders(t *testing.T) {
	needORT(t)
	dirs := installedDecoders(false)
	if len(dirs) == 0 {
		t.Skipf("no float32 decoder embedder installed in %s (annactl models import --pooling lasttoken smollm2.gguf DIR)", home.ModelsDir())
	}
	ctx := context.Background()
	for _, dir := range dirs {
		vecs := embedOnBothBackends(t, ctx, dir)
		var worst float64
		for i := range vecs[0] {
			for j := range vecs[0][i] {
				worst = max(worst, math.Abs(float64(vecs[0][i][j]-vecs[1][i][j])))
			}
		}
		t.Logf("%s: %d vectors, largest component difference %.2e", filepath.Base(dir), len(vecs[0]), worst)
		if worst > 1e-5 {
			t.Errorf("%s: the Go backend's vectors differ from ONNX Runtime's by up to %.2e (want ≤ 1e-5)", dir, worst)
		}
	}
}

// BenchmarkDecoderBackends embeds the first 40 SciFact abstracts with each
// installed float32 decoder embedder through ONNX Runtime and through the
// Go backend, the sides in turn, and reports each side's docs/s.
func BenchmarkDecoderBackends(b *testing.B) {
	benchDecoderBackends(b, false)
}

// benchDecoderBackends is BenchmarkDecoderBackends for the installed
// float32 decoder embedders, or, when quantized, the int8 and int4 ones.
func benchDecoderBackends(b *testing.B, quantized bool) {
	if DefaultBackend() != BackendORT {
		b.Skip("needs ONNX Runtime, which this build lacks")
	}
	dirs := installedDecoders(quantized)
	if len(dirs) == 0 {
		if quantized {
			b.Skip("no quantized decoder embedder installed")
		}
		b.Skip("no float32 decoder embedder installed")
	}
	f, err := os.Open(filepath.Join(sharedDir(b), "datasets", "scifact", "corpus.jsonl"))
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	var texts []string
	for sc := bufio.NewScanner(f); sc.Scan() && len(texts) < 40; {
		var d struct{ Title, Text string }
		if json.Unmarshal(sc.Bytes(), &d) == nil {
			texts = append(texts, d.Title+" "+d.Text)
		}
	}
	ctx := context.Background()
	rates := map[string]float64{} // reported at the end: ResetTimer drops the metrics reported before it
	for _, dir := range dirs {
		encs := map[string]*Model{}
		for _, be := range []string{BackendORT, BackendGo} {
			enc, err := Load(ctx, dir, Options{Backend: be})
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			if _, err := enc.EmbedDocuments(ctx, texts[:1]); err != nil { // the session
				b.Fatal(err)
			}
			encs[be] = enc
		}
		spent := map[string]time.Duration{}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, be := range []string{BackendORT, BackendGo} {
				start := time.Now()
				if _, err := encs[be].EmbedDocuments(ctx, texts); err != nil {
					b.Fatal(err)
				}
				spent[be] += time.Since(start)
			}
		}
		for be, d := range spent {
			rates[filepath.Base(dir)+"-"+be+"-docs/s"] = float64(b.N*len(texts)) / d.Seconds()
		}
	}
	for unit, r := range rates {
		b.ReportMetric(r, unit)
	}
}
