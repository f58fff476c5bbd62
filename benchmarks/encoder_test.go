package benchmarks

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/shareddata"
)

// encSciFactTexts reads the SciFact corpus as the dense side embeds it:
// title and text joined by a space (engine.EmbedText, as BEIR's
// sentence-transformers evaluation of all-MiniLM-L6-v2 does), truncated by
// the encoder to 256 tokens.
func encSciFactTexts(b *testing.B) []string {
	b.Helper()
	path := shareddata.Path(b, "datasets", "scifact", "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var texts []string
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
		switch {
		case d.Title == "":
			texts = append(texts, d.Text)
		case d.Text == "":
			texts = append(texts, d.Title)
		default:
			texts = append(texts, d.Title+" "+d.Text)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return texts
}

// encMatMulGFLOPs times C = A·B (n×n×n, fp32) through ONNX Runtime with the
// same thread settings, best of reps: the GEMM rate this machine reaches
// right now, the ceiling for a BERT forward.
func encMatMulGFLOPs(b *testing.B, n, reps int) float64 {
	b.Helper()
	var buf bytes.Buffer
	if _, err := onnx.MatMulGraph().WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	sess, err := ort.NewSessionFromBytes(buf.Bytes(), []string{"a", "b"}, []string{"c"}, ort.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Destroy()
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, n*n)
	for i := range data {
		data[i] = r.Float32() - 0.5
	}
	shape := ortgo.NewShape(int64(n), int64(n))
	a, _ := ortgo.NewTensor(shape, data)
	bb, _ := ortgo.NewTensor(shape, data)
	c, _ := ortgo.NewEmptyTensor[float32](shape)
	defer a.Destroy()
	defer bb.Destroy()
	defer c.Destroy()
	best := time.Duration(1 << 62)
	for range reps {
		t0 := time.Now()
		if err := sess.Run([]ortgo.Value{a, bb}, []ortgo.Value{c}); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	return 2 * float64(n) * float64(n) * float64(n) / best.Seconds() / 1e9
}

// BenchmarkEncoderSciFact embeds every SciFact abstract (5,183; -short: the
// first 100) with the default model through ONNX Runtime, uncached, and
// reports docs/s, tokens/s, the share of wall time spent outside ONNX
// Runtime's Run (tokenising, sorting, padding, pooling; goal ≤ 10%), and the
// achieved GFLOP/s of the BERT forward (matrix products on the padded
// shapes run) next to a 2048³ fp32 MatMul through ONNX Runtime measured in
// the same run. Afterwards it stores the vectors in the embedding cache
// (outside the timing), so evaluations need not embed SciFact again.
//
//	go test ./benchmarks -run '^$' -bench EncoderSciFact -benchtime 1x -timeout 30m
func BenchmarkEncoderSciFact(b *testing.B) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	texts := encSciFactTexts(b)
	if testing.Short() {
		texts = texts[:100]
	}
	ctx := context.Background()
	enc, err := encoder.Load(ctx, dir, encoder.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	if _, err := enc.EmbedDocuments(ctx, texts[:8]); err != nil { // warm-up: first-run allocations
		b.Fatal(err)
	}
	// The MatMul is timed before and after the corpus and averaged, so load
	// from other processes that changes during the run affects both sides.
	mmBefore := encMatMulGFLOPs(b, 2048, 3)
	before := enc.Stats()
	var vecs [][]float32
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if vecs, err = enc.EmbedDocuments(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	wall := time.Since(start)
	b.StopTimer()
	st := enc.Stats()
	mmAfter := encMatMulGFLOPs(b, 2048, 3)
	mm := (mmBefore + mmAfter) / 2
	runs := float64(b.N)
	run := (st.RunTime - before.RunTime).Seconds()
	flops := st.FLOPs - before.FLOPs
	tokens := float64(st.Tokens - before.Tokens)
	padded := float64(st.PaddedTokens - before.PaddedTokens)
	gflops := flops / wall.Seconds() / 1e9
	b.ReportMetric(runs*float64(len(texts))/wall.Seconds(), "docs/s")
	b.ReportMetric(tokens/wall.Seconds(), "tokens/s")
	b.ReportMetric(100*(1-run/wall.Seconds()), "%outside-ort")
	b.ReportMetric(100*(padded/tokens-1), "%padding")
	b.ReportMetric(gflops, "bert-GFLOP/s")
	b.ReportMetric(flops/run/1e9, "bert-in-run-GFLOP/s")
	b.ReportMetric(mm, "matmul2048-GFLOP/s")
	b.ReportMetric(gflops/mm, "bert/matmul")
	b.Logf("%d docs, %.0f tokens (%.1f/doc), %.1f TFLOP, wall %s, in Run %.1fs; MatMul 2048³ %.1f GFLOP/s before, %.1f after",
		len(texts), tokens/runs, tokens/runs/float64(len(texts)), flops/1e12, wall.Round(time.Millisecond), run, mmBefore, mmAfter)

	cache, err := encoder.NewCache(enc, "")
	if err != nil {
		b.Fatal(err)
	}
	if err := cache.PutDocuments(texts, vecs); err != nil {
		b.Fatal(err)
	}
}
