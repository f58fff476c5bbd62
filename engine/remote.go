package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/index/weaviate"
	"github.com/anna-search/anna/internal/storage"
)

// Weaviate points an engine's retrieval at a Weaviate cluster
// (Options.Weaviate): the BM25 and dense lists come from a collection
// there instead of the directory's Bleve index and HNSW graph. The
// directory keeps anna.db, the source of truth; the collection is derived
// from it like the local indexes (rebuilt when built from another store,
// replayed when behind). anna embeds every document and query itself and
// fuses, reranks and explains as with the local indexes.
type Weaviate struct {
	// URLs of the cluster's nodes; requests go to the first that answers.
	URLs []string
	// APIKey is sent with every request (the CLI reads it from
	// ANNA_WEAVIATE_API_KEY).
	APIKey string
	// Alias names the collection (default "Anna"); collections are
	// Alias_g1, Alias_g2, ... and Reindex moves the alias. One alias
	// belongs to one engine directory.
	Alias string
	// Replication is the replication factor of the collections the engine
	// creates (0: the cluster's default).
	Replication int
}

// ErrBackend is wrapped by errors of a Weaviate backend: a node that does
// not answer, a refused API key (then ErrUnauthorized is wrapped too), a
// batch not stored. The documents are in anna.db by then: the next write or
// Open applies what the collection missed.
var ErrBackend = errors.New("engine: the Weaviate backend failed")

// ErrUnauthorized is wrapped (beside ErrBackend) when the Weaviate cluster
// refuses the API key (Weaviate.APIKey).
var ErrUnauthorized = weaviate.ErrUnauthorized

// remote is the backend of an engine whose lists come from Weaviate.
type remote struct {
	e       *Engine
	cl      *weaviate.Client
	coll    *weaviate.Collection // current collection; guarded by e.mu (Reindex swaps it)
	applied uint64               // last store change in coll; written under writeMu and e.mu, read under either
	stale   string               // read-only: why coll cannot answer ("" when in step)
}

func backendErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrBackend, err)
}

// openRemote connects to the cluster and brings the alias's collection in
// step with the store: adopting a collection in step or behind (replaying
// what it missed), else building a new generation from the store and
// moving the alias to it. Read-only, it only records why it cannot answer.
func (e *Engine) openRemote(ctx context.Context, w Weaviate) error {
	cl, err := weaviate.New(weaviate.Config{URLs: append([]string(nil), w.URLs...), APIKey: w.APIKey, Alias: w.Alias, Replication: w.Replication})
	if err != nil {
		return optErr("Options.Weaviate", w.URLs, err.Error())
	}
	r := &remote{e: e, cl: cl}
	e.be = r
	seq, err := e.store.Seq()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	key := e.vecKey()
	cur, ok, err := cl.Resolve(ctx)
	if err != nil {
		return backendErr(err)
	}
	reason := fmt.Sprintf("does not exist in the cluster (alias %s)", cl.Alias())
	if ok {
		st, has, err := cur.State(ctx)
		if err != nil {
			return backendErr(err)
		}
		reason = r.unfit(cur, st, has, key, seq)
		if has && st.StoreID != e.store.ID() {
			// Not this directory's: rebuilding it would destroy another
			// directory's collection.
			return optErr("Options.Weaviate.Alias", w.Alias, fmt.Sprintf("alias %s is taken: collection %s; one alias belongs to one anna directory, so choose another alias, or drop that collection", cl.Alias(), reason))
		}
		if reason == "" {
			r.coll, r.applied = cur, st.Seq
			if st.Seq < seq {
				if e.opts.ReadOnly {
					r.stale = fmt.Sprintf("is %d changes behind anna.db (an interrupted write)", seq-st.Seq)
					return nil
				}
				return backendErr(r.catchUp(ctx))
			}
			return nil
		}
	}
	if e.opts.ReadOnly {
		r.stale = reason
		return nil
	}
	// A generation in step from an interrupted Reindex or rebuild (the
	// store switched, the alias not yet moved) is adopted.
	gens, err := cl.Generations(ctx)
	if err != nil {
		return backendErr(err)
	}
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if cur != nil && g.Name() == cur.Name() {
			continue
		}
		st, has, err := g.State(ctx)
		if err != nil {
			return backendErr(err)
		}
		if r.unfit(g, st, has, key, seq) == "" {
			e.logf("Weaviate: adopting collection %s (in step with anna.db) for alias %s", g.Name(), cl.Alias())
			r.coll, r.applied = g, st.Seq
			if err := r.catchUp(ctx); err != nil {
				return backendErr(err)
			}
			return backendErr(r.pointAndPrune(ctx, g))
		}
	}
	if ok || seq > 0 {
		e.warn("the Weaviate collection %s: building a new one from anna.db", reason)
	}
	g, applied, err := r.build(ctx, key)
	if err != nil {
		return err
	}
	r.coll, r.applied = g, applied
	return backendErr(r.pointAndPrune(ctx, g))
}

// unfit says why collection co (whose state is st, has) cannot serve the
// store at seq with vectors key, "" when it can (it may be behind).
func (r *remote) unfit(co *weaviate.Collection, st weaviate.State, has bool, key string, seq uint64) string {
	name := co.Name()
	switch {
	case !has:
		return fmt.Sprintf("%s has no anna state (not built by anna, or its build was interrupted)", name)
	case st.VectorKey != key:
		return fmt.Sprintf("%s holds vectors of %s, the engine embeds with %s", name, st.VectorKey, key)
	}
	if st.StoreID != r.e.store.ID() {
		return fmt.Sprintf("%s was built from another anna directory (store %s; this one is %s)", name, st.StoreID, r.e.store.ID())
	}
	reason, behind := staleness(r.e.store.ID(), seq, st.StoreID, st.Seq)
	if reason != "" && !behind {
		return name + " " + reason
	}
	return ""
}

// build fills a new generation with every stored document and its
// vectors for key, records its state, and returns it with the store seq
// it reflects (taken before the scan; writers wait for the caller). The
// alias is not moved.
func (r *remote) build(ctx context.Context, key string) (*weaviate.Collection, uint64, error) {
	e := r.e
	seq, err := e.store.Seq()
	if err != nil {
		return nil, 0, fmt.Errorf("engine: %w", err)
	}
	g, err := r.cl.Create(ctx)
	if err != nil {
		return nil, 0, backendErr(err)
	}
	start := time.Now()
	var ids []string
	var embs []storage.Embedding
	n := 0
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		docs, err := e.store.GetMany(ids)
		if err != nil {
			return err
		}
		if len(docs) != len(ids) {
			return &DamageError{Dir: e.dir, What: fmt.Sprintf("%d stored vectors belong to no document", len(ids)-len(docs)),
				Fix: "Repair rebuilds the collection from the store"}
		}
		if err := g.Upsert(ctx, docs, embs); err != nil {
			return backendErr(err)
		}
		n += len(ids)
		ids, embs = ids[:0], embs[:0]
		return nil
	}
	err = e.store.ForEachVector(ctx, key, func(id string, emb storage.Embedding) error {
		ids, embs = append(ids, id), append(embs, emb)
		if len(ids) >= replayBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = backendErr(g.SetState(ctx, weaviate.State{StoreID: e.store.ID(), Seq: seq, VectorKey: key}))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("engine: building Weaviate collection %s: %w", g.Name(), err)
	}
	if n > 0 {
		e.logf("Weaviate: built collection %s from %d documents in %s", g.Name(), n, time.Since(start).Round(time.Millisecond))
	}
	return g, seq, nil
}

// pointAndPrune moves the alias to g and drops the alias's other
// generations (older ones, and any left half-built by an interrupted run).
func (r *remote) pointAndPrune(ctx context.Context, g *weaviate.Collection) error {
	if err := r.cl.Point(ctx, g); err != nil {
		return err
	}
	gens, err := r.cl.Generations(ctx)
	if err != nil {
		return err
	}
	for _, old := range gens {
		if old.Name() == g.Name() {
			continue
		}
		r.e.logf("Weaviate: dropping collection %s (alias %s is on %s)", old.Name(), r.cl.Alias(), g.Name())
		if err := old.Drop(ctx); err != nil {
			return err
		}
	}
	return nil
}

// catchUp applies to the collection every change after r.applied, with
// the stored vectors. Callers hold writeMu (or are Open).
func (r *remote) catchUp(ctx context.Context) error {
	e := r.e
	e.mu.RLock()
	co, key := r.coll, vectorKey(e.cur.model.Fingerprint, e.cur.chunking)
	e.mu.RUnlock()
	n := 0
	err := e.replay(ctx, r.applied, func(storage.Change) bool { return true }, func(upserts []storage.Doc, deletes []string, seq uint64) error {
		if len(deletes) > 0 {
			if err := co.Delete(ctx, deletes); err != nil {
				return err
			}
		}
		if len(upserts) > 0 {
			embs, err := e.storedVectors(key, upserts)
			if err != nil {
				return err
			}
			if err := co.Upsert(ctx, upserts, embs); err != nil {
				return err
			}
		}
		if err := co.SetState(ctx, weaviate.State{StoreID: e.store.ID(), Seq: seq, VectorKey: key}); err != nil {
			return err
		}
		e.mu.Lock()
		r.applied = seq
		e.mu.Unlock()
		n += len(upserts) + len(deletes)
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: bringing Weaviate collection %s up to date: %w", co.Name(), err)
	}
	if n > 0 {
		e.logf("Weaviate: collection %s applied %d changes it had missed", co.Name(), n)
	}
	return nil
}

// lexicalScores scores the documents docs (by ID) against query with the
// collection's BM25; one it does not return (no query term) scores 0.
func (r *remote) lexicalScores(ctx context.Context, query string, docs []Document) ([]float64, error) {
	if r.stale != "" {
		return nil, &RecoveryError{Dir: r.e.dir, Index: "Weaviate", Reason: r.stale}
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		if d.ID == "" {
			return nil, fmt.Errorf("engine: lexical scores: document %d has no ID: %w (Weaviate scores only the documents it holds, by ID)", i, ErrUnsupported)
		}
		ids[i] = d.ID
	}
	r.e.mu.RLock()
	co := r.coll
	r.e.mu.RUnlock()
	scores, err := co.ScoreIDs(ctx, query, ids)
	if err != nil {
		return nil, fmt.Errorf("engine: lexical scores: %w", backendErr(err))
	}
	out := make([]float64, len(docs))
	for i, id := range ids {
		out[i] = scores[id]
	}
	return out, nil
}

func (r *remote) lexical(ctx context.Context, query string, k int, f Filter) ([]fusion.Hit, error) {
	if r.stale != "" {
		return nil, &RecoveryError{Dir: r.e.dir, Index: "Weaviate", Reason: r.stale}
	}
	r.e.mu.RLock()
	co := r.coll
	r.e.mu.RUnlock()
	hits, err := co.Lexical(ctx, query, k, f)
	if err != nil {
		return nil, fmt.Errorf("engine: lexical search: %w", backendErr(err))
	}
	out := make([]fusion.Hit, len(hits))
	for i, h := range hits {
		out[i] = fusion.Hit{ID: h.ID, Score: h.Score}
	}
	return out, nil
}

func (r *remote) denseSearch() denseFunc {
	co, stale, dir := r.coll, r.stale, r.e.dir
	return func(ctx context.Context, q []float32, k int, opts SearchOptions) ([]fusion.Hit, map[string]int, error) {
		if stale != "" {
			return nil, nil, &RecoveryError{Dir: dir, Index: "Weaviate", Reason: stale}
		}
		hits, err := co.Dense(ctx, q, k, opts.Filter)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: dense search: %w", backendErr(err))
		}
		out := make([]fusion.Hit, len(hits))
		passage := make(map[string]int, len(hits))
		for i, h := range hits {
			out[i] = fusion.Hit{ID: h.ID, Score: h.Score}
			passage[h.ID] = h.Passage
		}
		return out, passage, nil
	}
}

func (r *remote) apply(ctx context.Context, prev, seq uint64, upserts []storage.Doc, embs []storage.Embedding, deletes []string) error {
	e := r.e
	if r.applied != prev {
		if err := r.catchUp(ctx); err != nil {
			return fmt.Errorf("updating the Weaviate collection failed (the next write or open repairs it): %w", backendErr(err))
		}
		return nil
	}
	e.mu.RLock()
	co, key := r.coll, vectorKey(e.cur.model.Fingerprint, e.cur.chunking)
	e.mu.RUnlock()
	err := func() error {
		if len(deletes) > 0 {
			if err := co.Delete(ctx, deletes); err != nil {
				return err
			}
		}
		if len(upserts) > 0 {
			if err := co.Upsert(ctx, upserts, embs); err != nil {
				return err
			}
		}
		return co.SetState(ctx, weaviate.State{StoreID: e.store.ID(), Seq: seq, VectorKey: key})
	}()
	if err != nil {
		return fmt.Errorf("updating the Weaviate collection failed (the next write or open repairs it): %w", backendErr(err))
	}
	e.mu.Lock()
	r.applied = seq
	e.mu.Unlock()
	return nil
}

func (r *remote) stats(ctx context.Context, st *Stats) error {
	r.e.mu.RLock()
	co, applied := r.coll, r.applied
	r.e.mu.RUnlock()
	st.LexicalStale = r.stale
	st.Backend = "weaviate " + r.cl.Alias()
	if co == nil {
		return nil
	}
	st.Backend += " (" + co.Name() + ")"
	docs, passages, err := co.Count(ctx)
	if err != nil {
		return backendErr(err)
	}
	st.LexicalDocs, st.LexicalSeq = uint64(docs), applied
	st.DenseDocs, st.DensePassages, st.DenseSeq = docs, passages, applied
	return nil
}

// swap makes g the engine's collection (callers hold e.mu for writing).
func (r *remote) swap(g *weaviate.Collection, applied uint64) {
	r.coll, r.applied = g, applied
}
