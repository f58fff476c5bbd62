package engine

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/fusion"
	"github.com/anna-search/anna/index/dense"
	"github.com/anna-search/anna/storage"
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

// local is the backend of an engine directory: its Bleve index and HNSW
// graph, whose state lives in the Engine (lex, lexApplied, dense,
// denseApplied; see derived.go).
type local struct{ e *Engine }

func (l local) lexical(ctx context.Context, query string, k int, f Filter) ([]fusion.Hit, error) {
	e := l.e
	if e.lexStale != "" {
		return nil, &RecoveryError{Dir: e.dir, Index: "BM25", Reason: e.lexStale}
	}
	hits, err := e.lex.SearchFilter(ctx, query, k, f)
	if err != nil {
		return nil, fmt.Errorf("engine: lexical search: %w", err)
	}
	out := make([]fusion.Hit, len(hits))
	for i, h := range hits {
		out[i] = fusion.Hit{ID: h.ID, Score: h.Score}
	}
	return out, nil
}

// coverage is how much of query the BM25 index can match
// (lexical.Index.Coverage), for weighing its list in hybrid search.
func (l local) coverage(ctx context.Context, query string) (float64, error) {
	e := l.e
	if e.lexStale != "" {
		return 1, nil
	}
	return e.lex.Coverage(ctx, query)
}

func (l local) denseSearch() denseFunc {
	ix := l.e.dense
	return func(ctx context.Context, q []float32, k int, opts SearchOptions) ([]fusion.Hit, map[string]int, error) {
		dopts := dense.SearchOptions{Ef: opts.EfSearch}
		if !opts.Filter.IsZero() {
			dopts.Filter = opts.Filter
		}
		hits, err := ix.Search(ctx, q, k, dopts)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: dense search: %w", err)
		}
		out := make([]fusion.Hit, len(hits))
		passage := make(map[string]int, len(hits))
		for i, h := range hits {
			out[i] = fusion.Hit{ID: h.ID, Score: float64(h.Score)}
			passage[h.ID] = h.Passage
		}
		return out, passage, nil
	}
}

func (l local) apply(ctx context.Context, prev, seq uint64, upserts []storage.Doc, embs []storage.Embedding, deletes []string) error {
	e := l.e
	var err error
	if e.lexApplied == prev {
		if len(deletes) > 0 {
			err = e.lex.Delete(ctx, deletes, seq)
		}
		if err == nil && len(upserts) > 0 {
			err = e.lex.Index(ctx, upserts, seq)
		}
		if err == nil {
			e.lexApplied = seq
		}
	} else {
		err = e.catchUpLexical(ctx)
	}
	if err != nil {
		return fmt.Errorf("updating the BM25 index failed (the next write or open repairs it): %w", err)
	}
	if err := e.applyDense(ctx, prev, seq, upserts, embs, deletes); err != nil {
		return fmt.Errorf("updating the dense graph failed (the next write or open repairs it): %w", err)
	}
	e.checkpointLocked()
	return nil
}

func (l local) stats(ctx context.Context, st *Stats) error {
	e := l.e
	var err error
	if e.lex != nil {
		if st.LexicalDocs, err = e.lex.Count(); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		if st.LexicalSeq, err = e.lex.AppliedSeq(); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	st.DenseSeq = e.denseApplied
	st.DenseDocs, st.DensePassages = e.dense.Len(), e.dense.Passages()
	return nil
}
