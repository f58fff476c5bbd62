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

// installedDecoders lists the installed float32 decoder embedders (a
// SmolLM2 imported with `annactl models import --pooling lasttoken
// smollm2.gguf …`), each with the paired encoder it needs absent.
func installedDecoders() []string {
	entries, _ := os.ReadDir(home.ModelsDir())
	var dirs []string
	for _, e := range entries {
		dir := filepath.Join(home.ModelsDir(), e.Name())
		md, err := model.OpenDir(dir)
		if err != nil || !md.Config.IsDecoder() || md.Manifest.Task != model.TaskEmbed || md.Manifest.Quantization != "" || md.Manifest.Context != nil {
			continue
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// TestGoBackendDecoders: every installed float32 decoder embedder (a real
// SmolLM2) embeds documents and instructed queries through the Go backend
// as through ONNX Runtime, within 1e-5 per component.
func TestGoBackendDecoders(t *testing.T) {
	needORT(t)
	dirs := installedDecoders()
	if len(dirs) == 0 {
		t.Skipf("no float32 decoder embedder installed in %s (annactl models import --pooling lasttoken smollm2.gguf DIR)", home.ModelsDir())
	}
	ctx := context.Background()
	texts := []string{"", "what do ribosomes do?", strings.Repeat("Ribosomes translate messenger RNA into protein. ", 12),
		"Mitochondria produce most of the cell's ATP through oxidative phosphorylation."}
	for _, dir := range dirs {
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
	if DefaultBackend() != BackendORT {
		b.Skip("needs ONNX Runtime, which this build lacks")
	}
	dirs := installedDecoders()
	if len(dirs) == 0 {
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
			b.ReportMetric(float64(b.N*len(texts))/d.Seconds(), filepath.Base(dir)+"-"+be+"-docs/s")
		}
	}
}
