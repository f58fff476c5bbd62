// Package engine is anna's public Go API: one directory on disk holding a
// document store (bbolt, the source of truth), a BM25 index (Bleve) and an
// HNSW graph of embeddings computed in-process, searched lexically, densely,
// or both fused with reciprocal rank fusion, optionally reranked by a
// cross-encoder.
//
// Layout of an engine directory:
//
//	anna.db              bbolt: documents, vectors per model fingerprint, state
//	lexical/             Bleve index (derived; rebuilt from anna.db if lost)
//	dense.hnsw           HNSW graph (derived; rebuilt from anna.db if lost or stale)
//
// Invariants:
//   - A batch is committed when its bbolt transaction commits. Documents and
//     their vectors commit together, so a committed document always has its
//     vector for the engine's model.
//   - Each derived index records the storage change-log sequence it has
//     applied. On Open the engine replays every later change, so a crash
//     between the bbolt commit and an index update heals itself.
//   - An engine directory belongs to one embedding model (its fingerprint is
//     kept in anna.db). Opening it with another model is refused; Reindex is
//     the way to change models.
//   - Any number of searches may run concurrently with one writer. Writers
//     (Add, Delete, Reindex) are serialised.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/index/dense"
	"github.com/anna-search/anna/index/lexical"
	"github.com/anna-search/anna/rerank"
	"github.com/anna-search/anna/storage"
)

// State keys kept in anna.db.
const (
	stateFingerprint = "model.fingerprint"
	stateDim         = "model.dim"
)

// Options configure Open. The zero value is usable: it loads the default
// model installed by `make setup`.
type Options struct {
	// Encoder embeds documents and queries. When nil, the engine loads
	// ModelDir, else the model recorded in the directory, else the default
	// model installed by `make setup`.
	Encoder encoder.Encoder
	// ModelDir is a model directory (see `annactl models import`). It is
	// loaded when Encoder is nil, and recorded in a new directory either way
	// (so pass it with Encoder when Encoder was loaded from it).
	ModelDir string
	// Reranker, when set, enables ModeRerank.
	Reranker rerank.Reranker
	// Dense configures the HNSW graph (zero fields take the dense package's
	// defaults).
	Dense dense.Config
	// Logf, when set, receives progress messages from long operations
	// (reconciliation on open, rebuilds).
	Logf func(format string, args ...any)
}

// Engine is an open anna directory. It is safe for concurrent use.
type Engine struct {
	dir   string
	store *storage.Store
	lex   *lexical.Index
	logf  func(string, ...any)
	rr    rerank.Reranker
	dcfg  dense.Config
	owned encoder.Encoder // closed on Close when Open loaded it

	writeMu sync.Mutex // one writer at a time

	mu    sync.RWMutex // guards the model snapshot below (swapped by Reindex)
	enc   encoder.Encoder
	fp    string
	dense *dense.Index
	dirty bool // dense graph changed since the last save
}

// Open opens (creating if needed) the engine directory dir.
func Open(ctx context.Context, dir string, opts Options) (*Engine, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: creating %s: %w", dir, err)
	}
	e := &Engine{dir: dir, rr: opts.Reranker, dcfg: opts.Dense, logf: opts.Logf}
	if e.logf == nil {
		e.logf = func(string, ...any) {}
	}
	ok := false
	defer func() {
		if !ok {
			e.closeAll()
		}
	}()
	var err error
	if e.store, err = storage.Open(filepath.Join(dir, "anna.db")); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.enc = opts.Encoder
	if e.enc == nil {
		modelDir := opts.ModelDir
		if modelDir == "" {
			recorded, err := e.store.State(stateModelDir)
			if err != nil {
				return nil, fmt.Errorf("engine: %w", err)
			}
			modelDir = string(recorded)
		}
		var enc *encoder.ORTEncoder
		if modelDir == "" {
			enc, err = encoder.Default(ctx)
		} else {
			enc, err = encoder.Load(ctx, modelDir, encoder.Options{})
		}
		if err != nil {
			return nil, fmt.Errorf("engine: loading the model: %w", err)
		}
		e.enc, e.owned = enc, enc
	}
	e.fp = e.enc.Fingerprint()
	if e.dcfg.Dim == 0 {
		e.dcfg.Dim = e.enc.Dim()
	}
	if err := e.checkModel(opts.ModelDir); err != nil {
		return nil, err
	}
	if err := e.openLexical(ctx); err != nil {
		return nil, err
	}
	if err := e.openDense(ctx); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// checkModel refuses a directory built with another model, and records the
// model of a new one.
func (e *Engine) checkModel(modelDir string) error {
	have, err := e.store.State(stateFingerprint)
	if err != nil {
		return fmt.Errorf("engine: reading model fingerprint: %w", err)
	}
	if have == nil {
		if err := e.store.SetState(stateFingerprint, []byte(e.fp)); err != nil {
			return fmt.Errorf("engine: recording model fingerprint: %w", err)
		}
		if err := e.store.SetState(stateModelDir, []byte(modelDir)); err != nil {
			return fmt.Errorf("engine: recording model dir: %w", err)
		}
		return e.store.SetState(stateDim, []byte(fmt.Sprint(e.enc.Dim())))
	}
	if string(have) != e.fp {
		return &ModelMismatchError{Dir: e.dir, Index: string(have), Model: e.fp}
	}
	return nil
}

// ModelMismatchError reports an index opened with a model other than the one
// that built it.
type ModelMismatchError struct{ Dir, Index, Model string }

func (m *ModelMismatchError) Error() string {
	return fmt.Sprintf("engine: %s was indexed with model %s but is being opened with model %s; open it with the original model, or run `annactl reindex` to move it to the new one", m.Dir, m.Index, m.Model)
}

// openLexical opens the Bleve index, rebuilding it from storage when it
// cannot be opened, then replays the changes it has not applied.
func (e *Engine) openLexical(ctx context.Context) error {
	path := filepath.Join(e.dir, "lexical")
	lex, err := lexical.Open(path)
	if err != nil {
		e.logf("lexical index at %s unreadable (%v): rebuilding from storage", path, err)
		if rerr := os.RemoveAll(path); rerr != nil {
			return fmt.Errorf("engine: removing broken lexical index: %w", rerr)
		}
		if lex, err = lexical.Open(path); err != nil {
			return fmt.Errorf("engine: creating lexical index: %w", err)
		}
	}
	e.lex = lex
	applied, err := lex.AppliedSeq()
	if err != nil {
		return fmt.Errorf("engine: reading lexical applied seq: %w", err)
	}
	return e.replay(ctx, applied, "lexical", func(upserts []storage.Doc, deletes []string, seq uint64) error {
		if len(deletes) > 0 {
			if err := e.lex.Delete(ctx, deletes, seq); err != nil {
				return err
			}
		}
		return e.lex.Index(ctx, upserts, seq)
	})
}

// replay feeds every storage change after seq to apply, in batches.
func (e *Engine) replay(ctx context.Context, after uint64, what string, apply func([]storage.Doc, []string, uint64) error) error {
	const batch = 1000
	var ids, deletes []string
	var last uint64
	n := 0
	flush := func() error {
		if len(ids) == 0 && len(deletes) == 0 {
			return nil
		}
		docs, err := e.store.GetMany(ids)
		if err != nil {
			return err
		}
		if err := apply(docs, deletes, last); err != nil {
			return err
		}
		n += len(ids) + len(deletes)
		ids, deletes = ids[:0], deletes[:0]
		return nil
	}
	err := e.store.ChangesSince(ctx, after, func(seq uint64, id string, deleted bool) error {
		last = seq
		if deleted {
			deletes = append(deletes, id)
		} else {
			ids = append(ids, id)
		}
		if len(ids)+len(deletes) >= batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("engine: bringing the %s index up to date: %w", what, err)
	}
	if n > 0 {
		e.logf("%s index: applied %d changes missed before the last close", what, n)
	}
	return nil
}

func (e *Engine) densePath() string { return filepath.Join(e.dir, "dense.hnsw") }

// openDense loads the saved graph, or rebuilds it from the stored vectors
// when it is missing, unreadable or belongs to another model; then replays
// the changes it has not applied.
func (e *Engine) openDense(ctx context.Context) error {
	ix, meta, err := dense.Load(e.densePath())
	switch {
	case err == nil && meta.Fingerprint == e.fp:
		e.dense = ix
		applied := meta.AppliedSeq
		err := e.replay(ctx, applied, "dense", func(upserts []storage.Doc, deletes []string, _ uint64) error {
			if err := ix.Delete(deletes); err != nil {
				return err
			}
			return e.addStoredVectors(ctx, ix, e.fp, upserts)
		})
		if err != nil {
			return err
		}
		seq, err := e.store.Seq()
		e.dirty = err == nil && seq != applied
		return err
	case err == nil:
		e.logf("dense graph was built for model %s, engine uses %s: rebuilding", meta.Fingerprint, e.fp)
	case errors.Is(err, fs.ErrNotExist):
	default:
		e.logf("dense graph unreadable (%v): rebuilding from storage", err)
	}
	ix, err = e.buildDense(ctx, e.fp)
	if err != nil {
		return err
	}
	e.dense = ix
	e.dirty = true
	return nil
}

// addStoredVectors adds the stored vectors of docs to ix.
func (e *Engine) addStoredVectors(ctx context.Context, ix *dense.Index, fp string, docs []storage.Doc) error {
	ids := make([]string, 0, len(docs))
	vecs := make([][]float32, 0, len(docs))
	for _, d := range docs {
		v, ok, err := e.store.Vector(fp, d.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("document %q has no vector for model %s", d.ID, fp)
		}
		ids = append(ids, d.ID)
		vecs = append(vecs, v)
	}
	return ix.Add(ctx, ids, vecs)
}

// buildDense builds a graph from every stored vector of model fp.
func (e *Engine) buildDense(ctx context.Context, fp string) (*dense.Index, error) {
	ix := dense.New(e.dcfg)
	start := time.Now()
	var ids []string
	var vecs [][]float32
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		err := ix.Add(ctx, ids, vecs)
		ids, vecs = ids[:0], vecs[:0]
		return err
	}
	err := e.store.ForEachVector(ctx, fp, func(id string, v []float32) error {
		ids = append(ids, id)
		vecs = append(vecs, v)
		if len(ids) >= 1000 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("engine: building the dense graph: %w", err)
	}
	if ix.Len() > 0 {
		e.logf("dense graph: built %d vectors in %s", ix.Len(), time.Since(start).Round(time.Millisecond))
	}
	return ix, nil
}

// Flush saves the dense graph if it changed. Documents are durable as soon
// as Add returns; Flush only saves the rebuild/replay work on next Open.
func (e *Engine) Flush() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	return e.flushLocked()
}

func (e *Engine) flushLocked() error {
	e.mu.RLock()
	ix, fp, dirty := e.dense, e.fp, e.dirty
	e.mu.RUnlock()
	if !dirty || ix == nil {
		return nil
	}
	seq, err := e.store.Seq()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := ix.Save(e.densePath(), dense.Meta{Fingerprint: fp, AppliedSeq: seq}); err != nil {
		return fmt.Errorf("engine: saving the dense graph: %w", err)
	}
	e.mu.Lock()
	e.dirty = false
	e.mu.Unlock()
	return nil
}

// Close saves the dense graph and closes everything. The engine must not be
// used afterwards.
func (e *Engine) Close() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	err := e.flushLocked()
	if cerr := e.closeAll(); err == nil {
		err = cerr
	}
	return err
}

func (e *Engine) closeAll() error {
	var errs []error
	if e.lex != nil {
		errs = append(errs, e.lex.Close())
		e.lex = nil
	}
	if e.store != nil {
		errs = append(errs, e.store.Close())
		e.store = nil
	}
	if c, ok := e.owned.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
		e.owned = nil
	}
	return errors.Join(errs...)
}

// Dir is the engine's directory.
func (e *Engine) Dir() string { return e.dir }

// Encoder is the model the engine currently embeds with.
func (e *Engine) Encoder() encoder.Encoder {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.enc
}

// Store exposes the underlying document store for read access (mining,
// evaluation). Writes must go through the engine.
func (e *Engine) Store() *storage.Store { return e.store }
