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

// installedQuantizedDecoders lists the installed int8 and int4 decoder
// embedders (`annactl models install smollm2-135m-instruct --quantize
// int8`), each with the paired encoder it needs absent.
func installedQuantizedDecoders() []string {
	entries, _ := os.ReadDir(home.ModelsDir())
	var dirs []string
	for _, e := range entries {
		dir := filepath.Join(home.ModelsDir(), e.Name())
		md, err := model.OpenDir(dir)
		if err != nil || !md.Config.IsDecoder() || md.Manifest.Task != model.TaskEmbed || md.Manifest.Quantization == "" || md.Manifest.Context != nil {
			continue
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// TestGoBackendQuantizedDecoders: every installed int8 or int4 decoder
// embedder (a real SmolLM2) embeds documents and instructed queries
// through the Go backend as through ONNX Runtime: int4 within 1e-4 per
// component (the same dequantized weights, float32 products), int8 with
// cosine ≥ 0.985 per vector. The integer sums are exact, but an
// activation near a quantization step's boundary may round one step away
// from ONNX Runtime's (after float32 ops rounded a little differently),
// and over SmolLM2's 30 layers these add up: on 2026-11-27 its int8
// vectors of four texts had cosine 0.993–0.997 between the backends, and
// 0.986–0.991 (Go) and 0.984–0.991 (ONNX Runtime) with the float32
// model's.
func TestGoBackendQuantizedDecoders(t *testing.T) {
	needORT(t)
	dirs := installedQuantizedDecoders()
	if len(dirs) == 0 {
		t.Skipf("no quantized decoder embedder installed in %s (annactl models install smollm2-135m-instruct --quantize int8)", home.ModelsDir())
	}
	ctx := context.Background()
	texts := []string{"", "what do ribosomes do?", strings.Repeat("Ribosomes translate messenger RNA into protein. ", 12),
		"Mitochondria produce most of the cell's ATP through oxidative phosphorylation."}
	for _, dir := range dirs {
		md, err := model.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var vecs [2][][]float32
		for i, be := range []string{BackendORT, BackendGo} {
			enc, err := Load(ctx, dir, Options{Backend: be, BatchSize: 3, Workers: 1})
			if err != nil {
				t.Fatalf("%s, backend %s: %v", dir, be, err)
			}
			docs, err := enc.EmbedDocuments(ctx, texts)
			if err == nil {
				var qs [][]float32
				qs, err = enc.EmbedQueries(ctx, texts[1:3], Prompt{Instruction: "Find the passage"})
				docs = append(docs, qs...)
			}
			enc.Close()
			if err != nil {
				t.Fatalf("%s, backend %s: %v", dir, be, err)
			}
			vecs[i] = docs
		}
		worst, cos := 0.0, 1.0
		for i := range vecs[0] {
			var ab, aa, bb float64
			for j, a := range vecs[0][i] {
				b := vecs[1][i][j]
				worst = max(worst, math.Abs(float64(a-b)))
				ab, aa, bb = ab+float64(a)*float64(b), aa+float64(a)*float64(a), bb+float64(b)*float64(b)
			}
			cos = min(cos, ab/math.Sqrt(aa*bb))
		}
		t.Logf("%s: %d vectors, largest component difference %.2e, smallest cosine %.6f", filepath.Base(dir), len(vecs[0]), worst, cos)
		if md.Manifest.Quantization == model.QuantizeInt4 && worst > 1e-4 || cos < 0.985 {
			t.Errorf("%s: the Go backend's vectors differ from ONNX Runtime's by up to %.2e, cosine %.6f", dir, worst, cos)
		}
	}
}

// BenchmarkQuantizedDecoderBackends is BenchmarkDecoderBackends for the
// installed int8 and int4 decoder embedders: the first 40 SciFact
// abstracts through ONNX Runtime and through the Go backend, the sides in
// turn, each side's docs/s.
func BenchmarkQuantizedDecoderBackends(b *testing.B) {
	if DefaultBackend() != BackendORT {
		b.Skip("needs ONNX Runtime, which this build lacks")
	}
	dirs := installedQuantizedDecoders()
	if len(dirs) == 0 {
		b.Skip("no quantized decoder embedder installed")
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
		encs := map[string]*ORTEncoder{}
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
