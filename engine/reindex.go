package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/storage"
)

// stateModelDir records where the engine's model lives, so that tools can
// reopen a directory with the right model after a Reindex.
const stateModelDir = "model.dir"

// ModelDir returns the model directory recorded for the engine directory,
// or "" when none was recorded (the default model was used).
func (e *Engine) ModelDir() (string, error) {
	b, err := e.store.State(stateModelDir)
	return string(b), err
}

// ReindexOptions configure Reindex.
type ReindexOptions struct {
	// ModelDir is recorded in the engine directory as the new model's home.
	ModelDir string
	// BatchSize is the number of documents embedded per batch (default 256).
	BatchSize int
	// Progress, when set, is called after each batch.
	Progress func(done, total int)
}

// Reindex re-encodes every stored document with enc, builds a new dense
// graph, and swaps model and graph in one step. Searches keep working during
// the rebuild and see either the old model and graph or the new ones, never
// a mix. The BM25 index is untouched. Writers wait until it finishes.
//
// It is resumable: vectors already stored for the new model are kept, so an
// interrupted Reindex started again only embeds what is missing. Until the
// swap the directory stays on the old model.
func (e *Engine) Reindex(ctx context.Context, enc encoder.Encoder, opts ReindexOptions) error {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.store == nil {
		return errClosed
	}
	e.mu.RLock()
	oldFP := e.fp
	e.mu.RUnlock()
	newFP := enc.Fingerprint()
	if newFP == oldFP {
		return fmt.Errorf("engine: reindex: the new model has the same fingerprint as the current one (%s)", oldFP)
	}
	// Collect ids first: a bbolt read transaction must not stay open while
	// we write vectors.
	var ids []string
	if err := e.store.ForEachDoc(ctx, func(d Document) error {
		ids = append(ids, d.ID)
		return nil
	}); err != nil {
		return fmt.Errorf("engine: reindex: listing documents: %w", err)
	}
	for start := 0; start < len(ids); start += opts.BatchSize {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("engine: reindex interrupted after %d of %d documents (run again to resume): %w", start, len(ids), err)
		}
		batch := ids[start:min(start+opts.BatchSize, len(ids))]
		var todo []string
		for _, id := range batch {
			_, ok, err := e.store.Vector(newFP, id)
			if err != nil {
				return fmt.Errorf("engine: reindex: %w", err)
			}
			if !ok {
				todo = append(todo, id)
			}
		}
		if len(todo) > 0 {
			docs, err := e.store.GetMany(todo)
			if err != nil {
				return fmt.Errorf("engine: reindex: %w", err)
			}
			texts := make([]string, len(docs))
			got := make([]string, len(docs))
			for i, d := range docs {
				texts[i], got[i] = EmbedText(d), d.ID
			}
			vecs, err := enc.EmbedDocuments(ctx, texts)
			if err != nil {
				return fmt.Errorf("engine: reindex: embedding: %w", err)
			}
			if _, err := e.store.PutVectors(newFP, got, vecs); err != nil {
				return fmt.Errorf("engine: reindex: storing vectors: %w", err)
			}
		}
		if opts.Progress != nil {
			opts.Progress(start+len(batch), len(ids))
		}
	}
	// PutVectors logged a change per document. They touch no text, so mark
	// them applied in the BM25 index rather than have the next Open replay
	// the whole corpus into it. (The lexical index was in sync: writers are
	// locked out.)
	seq, err := e.store.Seq()
	if err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	if err := e.lex.Index(ctx, nil, seq); err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	cfg := e.dcfg
	cfg.Dim = enc.Dim()
	saved := e.dcfg
	e.dcfg = cfg
	ix, err := e.buildDense(ctx, newFP)
	if err != nil {
		e.dcfg = saved
		return err
	}
	// The fingerprint in anna.db is the commit point of the switch.
	if err := e.store.SetState(stateFingerprint, []byte(newFP)); err != nil {
		e.dcfg = saved
		return fmt.Errorf("engine: reindex: recording the new model: %w", err)
	}
	if err := e.store.SetState(stateDim, []byte(fmt.Sprint(enc.Dim()))); err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	if err := e.store.SetState(stateModelDir, []byte(opts.ModelDir)); err != nil {
		return fmt.Errorf("engine: reindex: %w", err)
	}
	e.mu.Lock()
	e.enc, e.fp, e.dense, e.dirty = enc, newFP, ix, true
	e.mu.Unlock()
	if err := e.flushLocked(); err != nil {
		return err
	}
	if err := e.store.DeleteVectors(oldFP); err != nil {
		return fmt.Errorf("engine: reindex: dropping the old model's vectors: %w", err)
	}
	return nil
}

// RecordedModelDir returns the model directory recorded in the engine
// directory dir ("" when the default model built it, or dir is new), without
// loading any model: tools use it to pick the right model before Open.
func RecordedModelDir(dir string) (string, error) {
	path := filepath.Join(dir, "anna.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	st, err := storage.Open(path)
	if err != nil {
		return "", fmt.Errorf("engine: %w", err)
	}
	defer st.Close()
	b, err := st.State(stateModelDir)
	if err != nil {
		return "", fmt.Errorf("engine: reading the recorded model of %s: %w", dir, err)
	}
	return string(b), nil
}
