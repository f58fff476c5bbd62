package server

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/inference/inferencetest"
	"github.com/anna-search/anna/rerank"
)

// BenchmarkRerankBatching measures /v1/rerank with a MiniLM-L6
// cross-encoder (the MiniLM weights with a random one-logit head: the
// compute of ms-marco-MiniLM-L-6-v2, not its scores): every request its
// own query with 4 documents of 24 words, 1, 8 and 32 concurrent clients,
// with the batcher on (different queries coalesced into one ScorePairs
// call) and off (BatchTexts 1: each request its own model call), for
// ANNA_BATCH_SECONDS (default 10) each: requests per second, p50, p99.
//
//	ANNA_BATCH_SECONDS=5 go test ./server -run '^$' -bench RerankBatching -benchtime 1x
func BenchmarkRerankBatching(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "ce")
	inferencetest.WriteCrossEncoder(b, dir, 0)
	rr, err := rerank.Load(ctx, dir, rerank.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rr.Close()
	eng, err := engine.Open(ctx, filepath.Join(b.TempDir(), "idx"), engine.Options{Encoder: &encodertest.Hashing{D: 32, FP: "bench"}, NoShare: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	batchingBench(b, eng, Options{Reranker: rr, RerankerName: "ce"}, "/v1/rerank", func(k int) any {
		docs := []string{loadText(k, 24), loadText(k+1, 24), loadText(k+2, 24), loadText(k+3, 24)}
		return map[string]any{"query": loadText(k, 6), "documents": docs}
	})
}
