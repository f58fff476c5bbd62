package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/anna-search/anna/index/dense"
	"github.com/anna-search/anna/index/lexical"
	"github.com/anna-search/anna/storage"
)

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
func (e *Engine) openLexical(ctx context.Context) error {
	path := filepath.Join(e.dir, lexicalDir)
	seq, err := e.store.Seq()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if e.readOnly {
		lex, err := lexical.Open(path, lexical.Options{ReadOnly: true, SearchWorkers: e.searchWorkers, Language: e.language})
		if err != nil {
			if errors.Is(err, lexical.ErrNotExist) {
				e.lexStale = "is missing"
			} else {
				e.lexStale = fmt.Sprintf("cannot be read (%v)", err)
			}
			return nil
		}
		e.lex = lex
		reason, behind, err := e.lexicalStaleness(ctx, seq)
		if err != nil {
			return err
		}
		if reason != "" && !behind {
			e.warn("the BM25 index %s", reason)
		}
		e.lexStale = reason
		return nil
	}
	lex, err := lexical.Open(path, lexical.Options{StoreID: e.store.ID(), SearchWorkers: e.searchWorkers, Language: e.language})
	if err != nil {
		e.warn("the BM25 index at %s cannot be read (%v): rebuilding it from anna.db", path, err)
		if lex, err = e.recreateLexical(path); err != nil {
			return err
		}
	}
	e.lex = lex
	reason, behind, err := e.lexicalStaleness(ctx, seq)
	if err != nil {
		return err
	}
	if reason != "" && !behind {
		e.warn("the BM25 index %s: rebuilding it from anna.db", reason)
		if e.lex, err = e.recreateLexical(path); err != nil {
			return err
		}
	}
	if e.lexApplied, err = e.lex.AppliedSeq(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return e.catchUpLexical(ctx)
}

// lexicalStaleness compares the BM25 index with the store. Changes that
// only wrote vectors for text it already has do not put it behind.
func (e *Engine) lexicalStaleness(ctx context.Context, seq uint64) (string, bool, error) {
	id, err := e.lex.StoreID()
	if err != nil {
		return "", false, fmt.Errorf("engine: %w", err)
	}
	applied, err := e.lex.AppliedSeq()
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

func (e *Engine) recreateLexical(path string) (*lexical.Index, error) {
	if e.lex != nil {
		e.lex.Close()
		e.lex = nil
	}
	if err := os.RemoveAll(path); err != nil {
		return nil, fmt.Errorf("engine: removing the BM25 index: %w", err)
	}
	lex, err := lexical.Open(path, lexical.Options{StoreID: e.store.ID(), SearchWorkers: e.searchWorkers, Language: e.language})
	if err != nil {
		return nil, fmt.Errorf("engine: creating the BM25 index: %w", err)
	}
	return lex, nil
}

// catchUpLexical applies to the BM25 index every change after lexApplied.
// Changes that only wrote vectors are skipped unless the index has not seen
// their text. Callers hold writeMu (or are Open).
func (e *Engine) catchUpLexical(ctx context.Context) error {
	applied := e.lexApplied
	n := 0
	err := e.replay(ctx, applied, func(c storage.Change) bool {
		return c.Op != storage.OpVectors || c.TextSeq > applied
	}, func(upserts []storage.Doc, deletes []string, seq uint64) error {
		if len(deletes) > 0 {
			if err := e.lex.Delete(ctx, deletes, seq); err != nil {
				return err
			}
		}
		if err := e.lex.Index(ctx, upserts, seq); err != nil {
			return err
		}
		e.lexApplied = seq
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
				Fix: fmt.Sprintf("run `annactl check --index %s` to see which, and `--repair`", e.dir)}
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
func (e *Engine) openDense(ctx context.Context) error {
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
			e.dense, e.denseApplied, e.denseSaved = ix, meta.AppliedSeq, meta.AppliedSeq
			return e.catchUpDense(ctx)
		}
		e.warn("the dense graph %s: rebuilding it from anna.db", reason)
	}
	ix, applied, err := e.buildDense(ctx, e.model, e.chunking)
	if err != nil {
		return err
	}
	e.dense, e.denseApplied, e.denseSaved, e.dirty = ix, applied, 0, true
	return nil
}

// catchUpDense applies to the graph every change after denseApplied.
// Callers hold writeMu (or are Open).
func (e *Engine) catchUpDense(ctx context.Context) error {
	e.mu.RLock()
	ix, fp := e.dense, vectorKey(e.model.Fingerprint, e.chunking)
	e.mu.RUnlock()
	n := 0
	err := e.replay(ctx, e.denseApplied, func(storage.Change) bool { return true }, func(upserts []storage.Doc, deletes []string, seq uint64) error {
		if err := ix.Delete(deletes); err != nil {
			return err
		}
		if err := e.addStoredVectors(ctx, ix, fp, upserts); err != nil {
			return err
		}
		e.mu.Lock()
		e.denseApplied, e.dirty = seq, true
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
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	embs, err := e.store.Vectors(fp, ids)
	if err != nil {
		return err
	}
	for i, emb := range embs {
		if len(emb.Vectors) == 0 {
			return &DamageError{Dir: e.dir, What: fmt.Sprintf("document %q has no vector for model %s", ids[i], fp),
				Fix: fmt.Sprintf("run `annactl check --index %s --repair` to embed what is missing", e.dir)}
		}
	}
	return addDense(ctx, ix, docs, embs)
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
	ix := dense.New(e.hnsw.config(m.Dim))
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
