package benchmarks

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
)

// BenchmarkEncoderBackends embeds the first 200 SciFact abstracts with the
// default model through ONNX Runtime and through the pure-Go backend
// (encoder.Options.Backend "go", what a CGO_ENABLED=0 build runs), with
// the same options, alternating the two within each iteration so that
// load from other processes falls on both. It reports each one's docs/s,
// the Go backend's speed as a share of ONNX Runtime's, and the largest
// difference between their vectors' components.
//
//	go test ./benchmarks -run '^$' -bench EncoderBackends -benchtime 3x
func BenchmarkEncoderBackends(b *testing.B) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	texts := encSciFactTexts(b)[:200]
	ctx := context.Background()
	backends := []string{encoder.BackendORT, encoder.BackendGo}
	encs := make([]*encoder.ORTEncoder, len(backends))
	for i, be := range backends {
		if encs[i], err = encoder.Load(ctx, dir, encoder.Options{Backend: be}); err != nil {
			b.Fatal(err)
		}
		defer encs[i].Close()
		if _, err := encs[i].EmbedDocuments(ctx, texts[:8]); err != nil { // warm-up: the session, first-run allocations
			b.Fatal(err)
		}
	}
	spent := make([]time.Duration, len(backends))
	vecs := make([][][]float32, len(backends))
	b.ResetTimer()
	for range b.N {
		for i, e := range encs {
			start := time.Now()
			if vecs[i], err = e.EmbedDocuments(ctx, texts); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
		}
	}
	b.StopTimer()
	docs := float64(b.N * len(texts))
	b.ReportMetric(docs/spent[0].Seconds(), "ort-docs/s")
	b.ReportMetric(docs/spent[1].Seconds(), "go-docs/s")
	b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), "go/ort")
	var worst float64
	for i := range vecs[0] {
		for j := range vecs[0][i] {
			worst = max(worst, math.Abs(float64(vecs[0][i][j]-vecs[1][i][j])))
		}
	}
	b.ReportMetric(worst, "maxdiff")
}
