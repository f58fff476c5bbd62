package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/index/lexical"
	"github.com/anna-search/anna/internal/storage"
)

// local is the backend of an engine directory: its Bleve index and HNSW
// graph, with what each has applied of the store (below). The
// engine reaches it as e.be, or e.local() where only the local indexes
// serve (nil with another backend, or reading through another process).
type local struct {
	e *Engine

	// lex and lexApplied are guarded by e.writeMu (Open sets them before
	// any call); lexStale is set by Open only.
	lex        *lexical.Index
	lexApplied uint64 // last store seq applied to lex
	lexStale   string // read-only: why lex cannot answer ("" when in step)

	// The graph and its bookkeeping are guarded by e.mu, together with the
	// engine's model (Reindex swaps both).
	dense        *dense.Index
	denseApplied uint64 // last store seq the graph reflects
	denseSaved   uint64 // the store seq its saved file reflects (0: none saved of this graph)
	dirty        bool   // graph changed since the last save
}

// local is the engine's local backend, nil when its lists come from
// another backend (Weaviate) or through another process.
func (e *Engine) local() *local {
	l, _ := e.be.(*local)
	return l
}

func (l *local) lexical(ctx context.Context, query string, k int, f Filter) ([]fusion.Hit, error) {
	if l.lexStale != "" {
		return nil, &RecoveryError{Dir: l.e.dir, Index: "BM25", Reason: l.lexStale}
	}
	hits, err := l.lex.SearchFilter(ctx, query, k, f)
	if err != nil {
		return nil, fmt.Errorf("engine: lexical search: %w", err)
	}
	out := make([]fusion.Hit, len(hits))
	for i, h := range hits {
		out[i] = fusion.Hit{ID: h.ID, Score: h.Score}
	}
	return out, nil
}

// lexicalScores is LexicalScores over the BM25 index.
func (l *local) lexicalScores(ctx context.Context, query string, docs []Document) ([]float64, error) {
	if l.lexStale != "" {
		return nil, &RecoveryError{Dir: l.e.dir, Index: "BM25", Reason: l.lexStale}
	}
	fs := make([]lexical.Fields, len(docs))
	for i, d := range docs {
		fs[i] = lexical.Fields{Title: d.Title, Text: d.Text, Language: d.Language}
	}
	s, err := l.lex.ScoreTexts(ctx, query, fs)
	if err != nil {
		return nil, fmt.Errorf("engine: lexical scores: %w", err)
	}
	return s, nil
}

// coverage is how much of query the BM25 index can match
// (lexical.Index.Coverage), for weighing its list in hybrid search.
func (l *local) coverage(ctx context.Context, query string) (float64, error) {
	if l.lexStale != "" {
		return 1, nil
	}
	return l.lex.Coverage(ctx, query)
}

// languages counts the BM25 index's documents by language (nil, false
// when there is none to ask: another backend, or reading through another
// process).
func (l *local) languages() (map[string]uint64, bool) {
	if l == nil || l.lex == nil {
		return nil, false
	}
	langs, err := l.lex.Languages()
	if err != nil {
		return nil, false
	}
	return langs, true
}

// graph is the current dense graph (nil before one is built).
func (l *local) graph() *dense.Index {
	l.e.mu.RLock()
	defer l.e.mu.RUnlock()
	return l.dense
}

func (l *local) denseSearch() denseFunc {
	ix := l.dense
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

func (l *local) apply(ctx context.Context, prev, seq uint64, upserts []storage.Doc, embs []storage.Embedding, deletes []string) error {
	var err error
	if l.lexApplied == prev {
		if len(deletes) > 0 {
			err = l.lex.Delete(ctx, deletes, seq)
		}
		if err == nil && len(upserts) > 0 {
			err = l.lex.Index(ctx, upserts, seq)
		}
		if err == nil {
			l.lexApplied = seq
		}
	} else {
		err = l.catchUpLexical(ctx)
	}
	if err != nil {
		return fmt.Errorf("updating the BM25 index failed (the next write or open repairs it): %w", err)
	}
	if err := l.applyDense(ctx, prev, seq, upserts, embs, deletes); err != nil {
		return fmt.Errorf("updating the dense graph failed (the next write or open repairs it): %w", err)
	}
	l.checkpoint()
	return nil
}

func (l *local) stats(ctx context.Context, st *Stats) error {
	st.LexicalStale = l.lexStale
	var err error
	if l.lex != nil {
		if st.LexicalDocs, err = l.lex.Count(); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		if st.LexicalSeq, err = l.lex.AppliedSeq(); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	l.e.mu.RLock()
	defer l.e.mu.RUnlock()
	st.DenseSeq = l.denseApplied
	st.DenseDocs, st.DensePassages = l.dense.Len(), l.dense.Passages()
	return nil
}

// close closes the BM25 index (the graph lives in memory).
func (l *local) close() error {
	if l.lex == nil {
		return nil
	}
	err := l.lex.Close()
	l.lex = nil
	return err
}

// flush saves the graph if it changed since the last save. Callers hold
// writeMu (or are Open).
func (l *local) flush() error {
	e := l.e
	if e.opts.ReadOnly {
		return nil
	}
	e.mu.RLock()
	ix, fp, applied, dirty := l.dense, vectorKey(e.cur.model.Fingerprint, e.cur.chunking), l.denseApplied, l.dirty
	e.mu.RUnlock()
	if !dirty || ix == nil {
		return nil
	}
	meta := dense.Meta{StoreID: e.store.ID(), Fingerprint: fp, AppliedSeq: applied}
	if err := ix.Save(filepath.Join(e.dir, denseFile), meta); err != nil {
		return fmt.Errorf("engine: saving the dense graph: %w", err)
	}
	e.mu.Lock()
	if l.dense == ix {
		l.dirty, l.denseSaved = l.denseApplied != applied, applied
	}
	e.mu.Unlock()
	return nil
}

// checkpoint saves the dense graph when its file lacks at least
// Options.CheckpointChanges changes, or an eighth of its documents if
// more: a crash then costs the next Open the replay of at most that many
// (see Options.CheckpointChanges). Saving the whole graph costs time in
// proportion to its size, so the eighth keeps the checkpoints' share of a
// long ingest's time bounded too. Callers hold writeMu (or are Open). A
// failed save is logged: the data is committed, only the bound is lost
// until the next checkpoint.
func (l *local) checkpoint() {
	e := l.e
	if e.opts.ReadOnly || e.opts.CheckpointChanges < 0 {
		return
	}
	e.mu.RLock()
	ix, dirty, unsaved := l.dense, l.dirty, l.denseApplied-l.denseSaved
	e.mu.RUnlock()
	every := e.opts.CheckpointChanges
	if every == 0 {
		every = DefaultCheckpointChanges
	}
	if ix == nil || !dirty || unsaved < uint64(max(every, ix.Len()/8)) {
		return
	}
	start := time.Now()
	if err := l.flush(); err != nil {
		e.logf("dense graph: checkpoint after %d changes failed (the next one retries): %v", unsaved, err)
		return
	}
	e.logf("dense graph: checkpoint after %d changes (%d documents) in %s", unsaved, ix.Len(), time.Since(start).Round(time.Millisecond))
}

// applyDense applies one committed batch (changes prev+1..seq) to the
// graph, or replays everything the graph missed when an earlier update
// failed. denseApplied moves only once the batch is wholly in the graph, so
// a graph saved after a failure replays the batch on the next Open.
func (l *local) applyDense(ctx context.Context, prev, seq uint64, upserts []storage.Doc, embs []storage.Embedding, deletes []string) error {
	e := l.e
	e.mu.RLock()
	ix, applied := l.dense, l.denseApplied
	e.mu.RUnlock()
	if applied != prev {
		return l.catchUpDense(ctx)
	}
	e.mu.Lock()
	l.dirty = true
	e.mu.Unlock()
	if err := ix.Delete(deletes); err != nil {
		return err
	}
	if len(upserts) > 0 {
		if err := addDense(ctx, ix, upserts, embs); err != nil {
			return err
		}
	}
	e.mu.Lock()
	l.denseApplied = seq
	e.mu.Unlock()
	return nil
}

// An index is in step with the store when it was built from this store (its
// recorded store id) and has applied exactly the store's changes (its
// applied seq). staleness says why an index is not, "" when it is.
func staleness(storeID string, seq uint64, indexStore string, applied uint64) (reason string, behind bool) {
	switch {
	case indexStore != storeID:
		if indexStore == "" {
			return "was built before indexes recorded their store", false
		}
		return fmt.Sprintf("was built from another store (id %s; anna.db is %s)", indexStore, storeID), false
	case applied > seq:
		return fmt.Sprintf("is ahead of anna.db: it applied changes up to %d, anna.db ends at %d, so anna.db has lost committed changes (restored from an older copy, or damaged)", applied, seq), false
	case applied < seq:
		return fmt.Sprintf("is %d changes behind anna.db (an interrupted write)", seq-applied), true
	}
	return "", false
}

// openLexical opens the BM25 index and brings it in step with the store:
// replaying the changes it missed, or rebuilding it when it is unreadable,
// from another store or ahead of this one. Read-only it only records why it
// cannot answer.
func (l *local) openLexical(ctx context.Context) error {
	e := l.e
	path := filepath.Join(e.dir, lexicalDir)
	seq, err := e.store.Seq()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if e.opts.ReadOnly {
		lex, err := lexical.Open(path, lexical.Options{ReadOnly: true, SearchWorkers: e.opts.SearchWorkers, Language: e.opts.Language})
		if err != nil {
			if errors.Is(err, lexical.ErrNotExist) {
				l.lexStale = "is missing"
			} else {
				l.lexStale = fmt.Sprintf("cannot be read (%v)", err)
			}
			return nil
		}
		l.lex = lex
		reason, behind, err := l.lexicalStaleness(ctx, seq)
		if err != nil {
			return err
		}
		if reason != "" && !behind {
			e.warn("the BM25 index %s", reason)
		}
		l.lexStale = reason
		return nil
	}
	lex, err := lexical.Open(path, lexical.Options{StoreID: e.store.ID(), SearchWorkers: e.opts.SearchWorkers, Language: e.opts.Language})
	if err != nil {
		e.warn("the BM25 index at %s cannot be read (%v): rebuilding it from anna.db", path, err)
		if lex, err = l.recreateLexical(path); err != nil {
			return err
		}
	}
	l.lex = lex
	reason, behind, err := l.lexicalStaleness(ctx, seq)
	if err != nil {
		return err
	}
	if reason != "" && !behind {
		e.warn("the BM25 index %s: rebuilding it from anna.db", reason)
		if l.lex, err = l.recreateLexical(path); err != nil {
			return err
		}
	}
	if l.lexApplied, err = l.lex.AppliedSeq(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return l.catchUpLexical(ctx)
}

// lexicalStaleness compares the BM25 index with the store. Changes that
// only wrote vectors for text it already has do not put it behind.
func (l *local) lexicalStaleness(ctx context.Context, seq uint64) (string, bool, error) {
	e := l.e
	id, err := l.lex.StoreID()
	if err != nil {
		return "", false, fmt.Errorf("engine: %w", err)
	}
	applied, err := l.lex.AppliedSeq()
	if err != nil {
		return "", false, fmt.Errorf("engine: %w", err)
	}
	reason, behind := staleness(e.store.ID(), seq, id, applied)
	if !behind {
		return reason, false, nil
	}
	missed := 0
	err = e.store.ChangesSince(ctx, applied, func(c storage.Change) error {
		if c.Op != storage.OpVectors || c.TextSeq > applied {
			missed++
		}
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("engine: %w", err)
	}
	if missed == 0 {
		return "", false, nil
	}
	return fmt.Sprintf("is %d documents behind anna.db (an interrupted write)", missed), true, nil
}

func (l *local) recreateLexical(path string) (*lexical.Index, error) {
	e := l.e
	if l.lex != nil {
		l.lex.Close()
		l.lex = nil
	}
	if err := os.RemoveAll(path); err != nil {
		return nil, fmt.Errorf("engine: removing the BM25 index: %w", err)
	}
	lex, err := lexical.Open(path, lexical.Options{StoreID: e.store.ID(), SearchWorkers: e.opts.SearchWorkers, Language: e.opts.Language})
	if err != nil {
		return nil, fmt.Errorf("engine: creating the BM25 index: %w", err)
	}
	return lex, nil
}

// catchUpLexical applies to the BM25 index every change after lexApplied.
// Changes that only wrote vectors are skipped unless the index has not seen
// their text. Callers hold writeMu (or are Open).
func (l *local) catchUpLexical(ctx context.Context) error {
	e := l.e
	applied := l.lexApplied
	n := 0
	err := e.replay(ctx, applied, func(c storage.Change) bool {
		return c.Op != storage.OpVectors || c.TextSeq > applied
	}, func(upserts []storage.Doc, deletes []string, seq uint64) error {
		if len(deletes) > 0 {
			if err := l.lex.Delete(ctx, deletes, seq); err != nil {
				return err
			}
		}
		if err := l.lex.Index(ctx, upserts, seq); err != nil {
			return err
		}
		l.lexApplied = seq
		n += len(upserts) + len(deletes)
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: bringing the BM25 index up to date: %w", err)
	}
	if n > 0 {
		e.logf("BM25 index: applied %d changes it had missed", n)
	}
	return nil
}

// replayBatch is how many changes replay hands over at a time.
const replayBatch = 1000

// replay feeds apply every change after seq that keep accepts, in batches
// of documents read from the store, each with the seq of the last change
// it covers; the last batch carries the store's last seq, so that skipped
// changes are recorded as applied too.
func (e *Engine) replay(ctx context.Context, after uint64, keep func(storage.Change) bool, apply func(upserts []storage.Doc, deletes []string, seq uint64) error) error {
	var ids, deletes []string
	var last uint64
	flush := func() error {
		docs, err := e.store.GetMany(ids)
		if err != nil {
			return err
		}
		if len(docs) != len(ids) {
			return &DamageError{Dir: e.dir, What: fmt.Sprintf("the change log names %d documents that anna.db does not hold", len(ids)-len(docs)),
				Fix: "Check names them, and Repair salvages the store"}
		}
		if err := apply(docs, deletes, last); err != nil {
			return err
		}
		ids, deletes = ids[:0], deletes[:0]
		return nil
	}
	pending := false
	err := e.store.ChangesSince(ctx, after, func(c storage.Change) error {
		last, pending = c.Seq, true
		if !keep(c) {
			return nil
		}
		if c.Op == storage.OpDelete {
			deletes = append(deletes, c.ID)
		} else {
			ids = append(ids, c.ID)
		}
		if len(ids)+len(deletes) >= replayBatch {
			pending = false
			return flush()
		}
		return nil
	})
	if err == nil && pending {
		err = flush()
	}
	return err
}

// openDense loads the saved graph and replays the changes it has not
// applied, or rebuilds it from the stored vectors when it is missing,
// unreadable, or from another store, model or a later state of the store.
// Read-only, all of that happens in memory and nothing is saved.
func (l *local) openDense(ctx context.Context) error {
	e := l.e
	path := filepath.Join(e.dir, denseFile)
	seq, err := e.store.Seq()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	ix, meta, err := dense.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if seq > 0 {
			e.logf("the dense graph is missing: building it from anna.db")
		}
	case err != nil:
		e.warn("the dense graph cannot be read (%v): rebuilding it from anna.db", err)
	case meta.Fingerprint != e.vecKey():
		e.logf("the dense graph was built for model %s, the engine uses %s: rebuilding it", meta.Fingerprint, e.vecKey())
	default:
		reason, behind := staleness(e.store.ID(), seq, meta.StoreID, meta.AppliedSeq)
		if reason == "" || behind {
			l.dense, l.denseApplied, l.denseSaved = ix, meta.AppliedSeq, meta.AppliedSeq
			return l.catchUpDense(ctx)
		}
		e.warn("the dense graph %s: rebuilding it from anna.db", reason)
	}
	ix, applied, err := e.buildDense(ctx, e.cur.model, e.cur.chunking)
	if err != nil {
		return err
	}
	l.dense, l.denseApplied, l.denseSaved, l.dirty = ix, applied, 0, true
	return nil
}

// catchUpDense applies to the graph every change after denseApplied.
// Callers hold writeMu (or are Open).
func (l *local) catchUpDense(ctx context.Context) error {
	e := l.e
	e.mu.RLock()
	ix, fp, applied := l.dense, vectorKey(e.cur.model.Fingerprint, e.cur.chunking), l.denseApplied
	e.mu.RUnlock()
	n := 0
	err := e.replay(ctx, applied, func(storage.Change) bool { return true }, func(upserts []storage.Doc, deletes []string, seq uint64) error {
		if err := ix.Delete(deletes); err != nil {
			return err
		}
		if err := e.addStoredVectors(ctx, ix, fp, upserts); err != nil {
			return err
		}
		e.mu.Lock()
		l.denseApplied, l.dirty = seq, true
		e.mu.Unlock()
		n += len(upserts) + len(deletes)
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: bringing the dense graph up to date: %w", err)
	}
	if n > 0 {
		e.logf("dense graph: applied %d changes it had missed", n)
	}
	return nil
}

// addStoredVectors adds the stored embeddings of docs to ix.
func (e *Engine) addStoredVectors(ctx context.Context, ix *dense.Index, fp string, docs []storage.Doc) error {
	embs, err := e.storedVectors(fp, docs)
	if err != nil {
		return err
	}
	return addDense(ctx, ix, docs, embs)
}

// storedVectors reads the stored embeddings of docs under vector key fp,
// for a derived index that replays them: a document without one is a
// DamageError (a committed document always has its vector).
func (e *Engine) storedVectors(fp string, docs []storage.Doc) ([]storage.Embedding, error) {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	embs, err := e.store.Vectors(fp, ids)
	if err != nil {
		return nil, err
	}
	for i, emb := range embs {
		if len(emb.Vectors) == 0 {
			return nil, &DamageError{Dir: e.dir, What: fmt.Sprintf("document %q has no vector for model %s", ids[i], fp),
				Fix: "Repair embeds what is missing"}
		}
	}
	return embs, nil
}

// addDense adds documents with their embeddings to the graph.
func addDense(ctx context.Context, ix *dense.Index, docs []storage.Doc, embs []storage.Embedding) error {
	dd := make([]dense.Doc, len(docs))
	for i, d := range docs {
		dd[i] = dense.Doc{ID: d.ID, Vectors: embs[i].Vectors, Meta: d.Meta, MetaValues: d.MetaValues}
	}
	return ix.Add(ctx, dd)
}

// buildDense builds a graph from every stored vector of model m embedded
// with chunking ch, and returns it with the store seq it reflects (taken
// before the scan; a writer would wait for the caller).
func (e *Engine) buildDense(ctx context.Context, m Model, ch Chunking) (*dense.Index, uint64, error) {
	key := vectorKey(m.Fingerprint, ch)
	seq, err := e.store.Seq()
	if err != nil {
		return nil, 0, fmt.Errorf("engine: %w", err)
	}
	ix := dense.New(e.opts.HNSW.config(m.Dim))
	start := time.Now()
	var docs []dense.Doc
	var ids []string
	flush := func() error {
		if len(docs) == 0 {
			return nil
		}
		// The documents' metadata, for the graph's filter postings.
		stored, err := e.store.GetMany(ids)
		if err != nil {
			return err
		}
		meta := make(map[string]storage.Doc, len(stored))
		for _, d := range stored {
			meta[d.ID] = d
		}
		for i := range docs {
			d := meta[docs[i].ID]
			docs[i].Meta, docs[i].MetaValues = d.Meta, d.MetaValues
		}
		err = ix.Add(ctx, docs)
		docs, ids = docs[:0], ids[:0]
		return err
	}
	err = e.store.ForEachVector(ctx, key, func(id string, emb storage.Embedding) error {
		docs = append(docs, dense.Doc{ID: id, Vectors: emb.Vectors})
		ids = append(ids, id)
		if len(docs) >= replayBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("engine: building the dense graph: %w", err)
	}
	if ix.Len() > 0 {
		e.logf("dense graph: built from %d documents (%d passages) in %s", ix.Len(), ix.Passages(), time.Since(start).Round(time.Millisecond))
	}
	return ix, seq, nil
}
