package engine

import (
	"context"

	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/storage"
)

// backend is the seam between the engine and where its two candidate
// lists come from: the local indexes (Bleve BM25 and the HNSW graph, in
// the directory) or a Weaviate collection (remote.go). Everything else —
// the store, embedding, prompts, fusion, reranking, explanations,
// snippets — is the engine's whichever backend answers.
//
// Both keep the derived-index contract of the package doc: they record the
// store they were built from and the last change applied, and apply moves
// that only once a batch is wholly in.
type backend interface {
	// lexical returns the k best documents for query by BM25, among those
	// f matches.
	lexical(ctx context.Context, query string, k int, f Filter) ([]fusion.Hit, error)
	// denseSearch returns the dense search over the backend's current
	// index. Reindex swaps that index together with the encoder under
	// e.mu, so callers take both under e.mu.RLock: a search never mixes
	// one model's query with another's vectors.
	denseSearch() denseFunc
	// apply brings the backend from store change prev to seq: the batch
	// that did it (documents upserted with their embeddings, IDs deleted),
	// or, when the backend is not at prev (an earlier apply failed), every
	// change it missed, read from the store. Callers hold writeMu.
	apply(ctx context.Context, prev, seq uint64, upserts []storage.Doc, embs []storage.Embedding, deletes []string) error
	// stats fills the index fields of Stats.
	stats(ctx context.Context, st *Stats) error
}

// denseFunc searches one index snapshot: the k documents nearest to q
// (their best passage), with each one's passage.
type denseFunc func(ctx context.Context, q []float32, k int, opts SearchOptions) ([]fusion.Hit, map[string]int, error)
