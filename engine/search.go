package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/fusion"
	"github.com/anna-search/anna/index/dense"
	"github.com/anna-search/anna/storage"
)

// Mode selects the retrieval pipeline.
type Mode string

const (
	ModeLexical Mode = "lexical" // BM25 only
	ModeDense   Mode = "dense"   // HNSW over embeddings only
	ModeHybrid  Mode = "hybrid"  // BM25 and dense fused by RRF
	ModeRerank  Mode = "rerank"  // hybrid, then the top candidates rescored by the cross-encoder
)

// ParseMode accepts the mode names and their common aliases.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "lexical", "bm25":
		return ModeLexical, nil
	case "dense", "vector", "semantic":
		return ModeDense, nil
	case "hybrid", "":
		return ModeHybrid, nil
	case "rerank", "hybrid+rerank":
		return ModeRerank, nil
	}
	return "", fmt.Errorf("unknown search mode %q (want lexical, dense, hybrid or rerank)", s)
}

// SearchOptions configure one search. Zero values take the defaults.
type SearchOptions struct {
	Mode  Mode // default ModeHybrid
	K     int  // results to return; default 10
	Depth int  // candidates taken from each list before fusion; default max(100, K)
	// RerankDepth is how many fused candidates the cross-encoder rescores;
	// default max(50, K).
	RerankDepth int
	// RerankOf picks the candidate list ModeRerank rescores: ModeHybrid
	// (default), ModeLexical (the classic BM25 + cross-encoder setup) or
	// ModeDense.
	RerankOf Mode
	// EfSearch overrides the HNSW beam width for this search (0: index default).
	EfSearch int
	// Prompt is applied to the query on the dense side (instruction-tuned models).
	Prompt encoder.Prompt
	// RRFK is the RRF constant; default 60.
	RRFK int
	// Weights optionally weight the fused lists by name ("lexical", "dense").
	Weights map[string]float64
}

// Result is one hit. Explain lists the hit's rank and score in every list
// that contributed to it (lexical, dense, rerank).
type Result struct {
	ID      string
	Score   float64 // the final list's score: BM25, cosine, RRF or cross-encoder logit
	Title   string
	Text    string
	Meta    map[string]string
	Explain []fusion.Contribution
}

// Search runs query through the pipeline chosen by opts.Mode.
func (e *Engine) Search(ctx context.Context, query string, opts SearchOptions) ([]Result, error) {
	if opts.Mode == "" {
		opts.Mode = ModeHybrid
	}
	if opts.K <= 0 {
		opts.K = 10
	}
	if opts.Depth <= 0 {
		opts.Depth = max(100, opts.K)
	}
	if opts.RerankDepth <= 0 {
		opts.RerankDepth = max(50, opts.K)
	}
	if e.store == nil {
		return nil, errClosed
	}
	if opts.Mode == ModeRerank && e.rr == nil {
		return nil, fmt.Errorf("engine: rerank mode needs a reranker (Options.Reranker)")
	}
	if opts.Mode == ModeRerank && opts.RerankOf != "" && opts.RerankOf != ModeHybrid {
		if opts.RerankOf == ModeRerank {
			return nil, fmt.Errorf("engine: RerankOf cannot be %q", ModeRerank)
		}
		base := opts
		base.Mode, base.K = opts.RerankOf, max(opts.K, opts.RerankDepth)
		return e.searchThenRerank(ctx, query, base, opts)
	}
	var lists []fusion.List
	switch opts.Mode {
	case ModeLexical:
		l, err := e.lexicalList(ctx, query, opts.K)
		if err != nil {
			return nil, err
		}
		lists = []fusion.List{l}
	case ModeDense:
		l, err := e.denseList(ctx, query, opts.K, opts)
		if err != nil {
			return nil, err
		}
		lists = []fusion.List{l}
	case ModeHybrid, ModeRerank:
		// The two retrievals are independent: run the lexical one while the
		// query is being encoded.
		type res struct {
			l   fusion.List
			err error
		}
		ch := make(chan res, 1)
		go func() {
			l, err := e.lexicalList(ctx, query, opts.Depth)
			ch <- res{l, err}
		}()
		dl, derr := e.denseList(ctx, query, opts.Depth, opts)
		lr := <-ch
		if derr != nil {
			return nil, derr
		}
		if lr.err != nil {
			return nil, lr.err
		}
		lists = []fusion.List{lr.l, dl}
	default:
		return nil, fmt.Errorf("engine: unknown mode %q", opts.Mode)
	}
	for i := range lists {
		if w, ok := opts.Weights[lists[i].Name]; ok {
			lists[i].Weight = w
		}
	}
	fused := fusion.RRF(lists, opts.RRFK)
	if len(lists) == 1 {
		// A single list keeps its own scores: RRF would only rename them.
		fused = single(lists[0])
	}
	if opts.Mode == ModeRerank {
		var err error
		if fused, err = e.rerank(ctx, query, fused, opts.RerankDepth); err != nil {
			return nil, err
		}
	}
	if len(fused) > opts.K {
		fused = fused[:opts.K]
	}
	return e.hydrate(fused)
}

// searchThenRerank reranks the results of a lexical or dense search.
func (e *Engine) searchThenRerank(ctx context.Context, query string, base, opts SearchOptions) ([]Result, error) {
	cands, err := e.Search(ctx, query, base)
	if err != nil {
		return nil, err
	}
	fused := make([]fusion.Result, len(cands))
	for i, c := range cands {
		fused[i] = fusion.Result{ID: c.ID, Score: c.Score, Contributions: c.Explain}
	}
	if fused, err = e.rerank(ctx, query, fused, opts.RerankDepth); err != nil {
		return nil, err
	}
	if len(fused) > opts.K {
		fused = fused[:opts.K]
	}
	return e.hydrate(fused)
}

func single(l fusion.List) []fusion.Result {
	out := make([]fusion.Result, len(l.Hits))
	for i, h := range l.Hits {
		out[i] = fusion.Result{ID: h.ID, Score: h.Score, Contributions: []fusion.Contribution{{List: l.Name, Rank: i + 1, Score: h.Score}}}
	}
	return out
}

func (e *Engine) lexicalList(ctx context.Context, query string, k int) (fusion.List, error) {
	hits, err := e.lex.Search(ctx, query, k)
	if err != nil {
		return fusion.List{}, fmt.Errorf("engine: lexical search: %w", err)
	}
	l := fusion.List{Name: "lexical", Hits: make([]fusion.Hit, len(hits))}
	for i, h := range hits {
		l.Hits[i] = fusion.Hit{ID: h.ID, Score: h.Score}
	}
	return l, nil
}

func (e *Engine) denseList(ctx context.Context, query string, k int, opts SearchOptions) (fusion.List, error) {
	// One consistent (model, graph) snapshot: during a Reindex a search sees
	// either the old pair or the new one, never a mix.
	e.mu.RLock()
	enc, ix := e.enc, e.dense
	e.mu.RUnlock()
	qv, err := enc.EmbedQueries(ctx, []string{query}, opts.Prompt)
	if err != nil {
		return fusion.List{}, fmt.Errorf("engine: embedding the query: %w", err)
	}
	var hits []dense.Hit
	if opts.EfSearch > 0 {
		hits, err = ix.SearchEf(ctx, qv[0], k, opts.EfSearch)
	} else {
		hits, err = ix.Search(ctx, qv[0], k)
	}
	if err != nil {
		return fusion.List{}, fmt.Errorf("engine: dense search: %w", err)
	}
	l := fusion.List{Name: "dense", Hits: make([]fusion.Hit, len(hits))}
	for i, h := range hits {
		l.Hits[i] = fusion.Hit{ID: h.ID, Score: float64(h.Score)}
	}
	return l, nil
}

// rerank rescores the first depth results with the cross-encoder and sorts
// them by that score; the results past depth follow in their old order, so
// recall at larger cut-offs is kept.
func (e *Engine) rerank(ctx context.Context, query string, all []fusion.Result, depth int) ([]fusion.Result, error) {
	fused, tail := all, []fusion.Result(nil)
	if len(all) > depth {
		fused, tail = all[:depth], all[depth:]
	}
	ids := resultIDs(fused)
	docs, err := e.docsByID(ids)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(fused))
	for i, id := range ids {
		texts[i] = EmbedText(docs[id])
	}
	scores, err := e.rr.Score(ctx, query, texts)
	if err != nil {
		return nil, fmt.Errorf("engine: reranking %d candidates: %w", len(texts), err)
	}
	out := make([]fusion.Result, len(fused))
	copy(out, fused)
	for i := range out {
		out[i].Score = float64(scores[i])
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Score > out[b].Score })
	for i := range out {
		out[i].Contributions = append(append([]fusion.Contribution(nil), out[i].Contributions...),
			fusion.Contribution{List: "rerank", Rank: i + 1, Score: out[i].Score})
	}
	return append(out, tail...), nil
}

func resultIDs(rs []fusion.Result) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func (e *Engine) docsByID(ids []string) (map[string]storage.Doc, error) {
	docs, err := e.store.GetMany(ids)
	if err != nil {
		return nil, fmt.Errorf("engine: reading documents: %w", err)
	}
	m := make(map[string]storage.Doc, len(docs))
	for _, d := range docs {
		m[d.ID] = d
	}
	return m, nil
}

// hydrate attaches stored documents to fused results. A hit whose document
// is gone (deleted between the index read and now) is dropped.
func (e *Engine) hydrate(fused []fusion.Result) ([]Result, error) {
	docs, err := e.docsByID(resultIDs(fused))
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(fused))
	for _, r := range fused {
		d, ok := docs[r.ID]
		if !ok {
			continue
		}
		out = append(out, Result{ID: r.ID, Score: r.Score, Title: d.Title, Text: d.Text, Meta: d.Meta, Explain: r.Contributions})
	}
	return out, nil
}

// Stats describe an engine directory.
type Stats struct {
	Dir          string `json:"dir"`
	Documents    int    `json:"documents"`
	Seq          uint64 `json:"seq"`
	Model        string `json:"model_fingerprint"`
	Dim          int    `json:"dim"`
	LexicalDocs  uint64 `json:"lexical_docs"`
	DenseVectors int    `json:"dense_vectors"`
	Reranker     bool   `json:"reranker"`
}

// Stats reports counts from storage and both indexes.
func (e *Engine) Stats() (Stats, error) {
	if e.store == nil {
		return Stats{}, errClosed
	}
	n, err := e.store.Count()
	if err != nil {
		return Stats{}, fmt.Errorf("engine: %w", err)
	}
	seq, err := e.store.Seq()
	if err != nil {
		return Stats{}, fmt.Errorf("engine: %w", err)
	}
	lc, err := e.lex.Count()
	if err != nil {
		return Stats{}, fmt.Errorf("engine: %w", err)
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return Stats{Dir: e.dir, Documents: n, Seq: seq, Model: e.fp, Dim: e.enc.Dim(), LexicalDocs: lc, DenseVectors: e.dense.Len(), Reranker: e.rr != nil}, nil
}
