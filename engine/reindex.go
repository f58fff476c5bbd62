package engine

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// ReindexOptions configure Reindex.
type ReindexOptions struct {
	// Model is the new model's directory: loaded when Encoder is nil,
	// recorded as the directory's model either way.
	Model string
	// Encoder, when set, embeds instead of a model loaded from Model.
	Encoder encoder.Encoder
	// BatchSize is the number of documents embedded per batch (0: 256).
	BatchSize int
	// Chunking, when set, is the chunking to embed with from now on
	// (default: the directory's).
	Chunking *Chunking
	// Progress, when set, is called after each batch.
	Progress func(done, total int)
}

// Reindex re-encodes every stored document with a new model, builds a new
// dense graph, and swaps model and graph in one step. Searches keep working
// during the rebuild and see either the old model and graph or the new ones,
// never a mix. The BM25 index is untouched. Writers wait until it finishes.
//
// It is resumable: vectors already stored for the new model (and no older
// than their document) are kept, so an interrupted Reindex started again
// only embeds what is missing; run again once it has finished, it does
// nothing. Until the swap the directory stays on the old
// model; the swap (fingerprint, dimension, model directory and name) is one
// transaction. With Options.KeepModel the new model is first kept under
// $ANNA_HOME/models (see KeepModel).
func (e *Engine) Reindex(ctx context.Context, opts ReindexOptions) (err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if opts.BatchSize < 0 {
		return optErr("ReindexOptions.BatchSize", opts.BatchSize, "must be 0 (the default, 256) or positive")
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = 256
	}
	if opts.Encoder == nil && opts.Model == "" {
		return optErr("ReindexOptions.Model", `""`, "a model directory (or an Encoder) is required")
	}
	if opts.Chunking != nil {
		if err := opts.Chunking.validate(); err != nil {
			return err
		}
	}
	if e.opts.ReadOnly {
		return ErrReadOnly
	}
	if e.via != nil {
		if err := e.via.writerOnly("reindex it"); err != nil {
			return err
		}
		// The writing process has gone: this engine holds the directory
		// for adds and deletes, not a model to swap (it returned nil and
		// reindexed nothing).
		return fmt.Errorf("engine: reindex: %w: this engine was opened to write through another process, which has since closed the directory; open it again to reindex", ErrLocked)
	}
	enc := opts.Encoder
	if enc == nil {
		loaded, closer, err := openEncoder(ctx, opts.Model)
		if err != nil {
			return fmt.Errorf("engine: reindex: %w", err)
		}
		enc = loaded
		// Kept open until Close: a search may still hold the old snapshot,
		// and the new model becomes the engine's.
		e.mu.Lock()
		e.closers = append(e.closers, closer)
		e.mu.Unlock()
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	e.mu.RLock()
	old, ch := e.cur.model, e.cur.chunking
	e.mu.RUnlock()
	if opts.Chunking != nil {
		ch = *opts.Chunking
	}
	next := Model{Fingerprint: enc.Fingerprint(), Dir: opts.Model, Dim: enc.Dim()}
	next.Name = modelName(enc, next.Dir, next.Fingerprint)
	oldKey, nextKey := vectorKey(old.Fingerprint, e.Chunking()), vectorKey(next.Fingerprint, ch)
	if nextKey == oldKey {
		// Already on it (a reindex run again after it finished, or after a
		// crash past its switch): Open has already rebuilt what was not.
		e.logf("reindex: the directory is already on model %s", old.Label())
		return nil
	}
	if e.opts.KeepModel {
		// Before any work, so that a failure to keep it costs none.
		if kerr := e.keepModel(ctx, next); kerr != nil {
			return fmt.Errorf("engine: reindex: %w", kerr)
		}
	}
	if err := e.store.SetState(stateReindexTarget, []byte(nextKey)); err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	// Collect IDs first: a bbolt read transaction must not stay open while
	// vectors are written.
	var ids []string
	if err := e.store.ForEachDoc(ctx, func(d storage.Doc) error {
		ids = append(ids, d.ID)
		return nil
	}); err != nil {
		return fmt.Errorf("engine: reindex: listing documents: %w", err)
	}
	for start := 0; start < len(ids); start += opts.BatchSize {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("engine: reindex interrupted after %d of %d documents (run it again to resume): %w", start, len(ids), err)
		}
		batch := ids[start:min(start+opts.BatchSize, len(ids))]
		todo, err := e.store.NeedVectors(nextKey, batch)
		if err != nil {
			return fmt.Errorf("engine: reindex: %w", err)
		}
		if len(todo) > 0 {
			docs, err := e.store.GetMany(todo)
			if err != nil {
				return fmt.Errorf("engine: reindex: %w", err)
			}
			got := make([]string, len(docs))
			for i, d := range docs {
				got[i] = d.ID
			}
			embs, err := e.embedDocs(ctx, enc, ch, docs)
			if err != nil {
				return fmt.Errorf("engine: reindex: %w", err)
			}
			if _, err := e.store.PutVectors(nextKey, got, embs); err != nil {
				return fmt.Errorf("engine: reindex: storing vectors: %w", err)
			}
		}
		if opts.Progress != nil {
			opts.Progress(start+len(batch), len(ids))
		}
	}
	if r, ok := e.be.(*remote); ok {
		return e.reindexRemote(ctx, r, enc, next, ch, oldKey, nextKey)
	}
	// The vectors' change entries touch no text: the BM25 index records
	// them as applied without reindexing anything.
	l := e.local()
	if err := l.catchUpLexical(ctx); err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	ix, applied, err := e.buildDense(ctx, next, ch)
	if err != nil {
		return err
	}
	// The switch is one transaction: model fingerprint, dimension and
	// directory, and the end of the reindex.
	state := e.modelState(next, ch)
	state[stateReindexTarget] = nil
	if err := e.store.SetStates(state); err != nil {
		return fmt.Errorf("engine: reindex: recording the new model: %w", err)
	}
	e.mu.Lock()
	e.cur.enc, e.cur.model, e.cur.chunking, e.cur.bound = enc, next, ch, true
	l.dense, l.denseApplied, l.denseSaved, l.dirty = ix, applied, 0, true
	e.mu.Unlock()
	if err := e.flushLocked(); err != nil {
		return err
	}
	if err := e.store.DeleteVectors(oldKey); err != nil {
		return fmt.Errorf("engine: reindex: dropping the old model's vectors (the next open retries): %w", err)
	}
	return nil
}

// reindexRemote ends a Reindex on the Weaviate backend: a new collection
// filled with the new vectors, the store's switch, then the engine's
// snapshot and the alias moved to it. Killed before the switch, the
// directory stays on the old model (the half-filled collection is dropped
// by a later build); killed after it, the next Open adopts the new
// collection and moves the alias.
func (e *Engine) reindexRemote(ctx context.Context, r *remote, enc encoder.Encoder, next Model, ch Chunking, oldKey, nextKey string) error {
	g, applied, err := r.build(ctx, nextKey)
	if err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	state := e.modelState(next, ch)
	state[stateReindexTarget] = nil
	if err := e.store.SetStates(state); err != nil {
		return fmt.Errorf("engine: reindex: recording the new model: %w", err)
	}
	e.mu.Lock()
	e.cur.enc, e.cur.model, e.cur.chunking, e.cur.bound = enc, next, ch, true
	r.swap(g, applied)
	e.mu.Unlock()
	if err := r.pointAndPrune(ctx, g); err != nil {
		return fmt.Errorf("engine: reindexed into Weaviate collection %s; moving alias %s to it failed (the next open moves it): %w", g.Name(), r.cl.Alias(), backendErr(err))
	}
	if err := e.store.DeleteVectors(oldKey); err != nil {
		return fmt.Errorf("engine: reindex: dropping the old model's vectors (the next open retries): %w", err)
	}
	return nil
}
