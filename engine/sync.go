package engine

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// DeleteBatch is how many documents DeleteExcept removes per committed
// batch when given 0.
const DeleteBatch = 1024

// DeleteExcept removes every stored document whose ID keep does not hold,
// and returns how many it removed: what makes a directory hold exactly the
// documents of a collection once they have been added (annactl index
// --sync). keep must not be nil.
//
// It lists the IDs to remove first, then deletes them in batches of batch
// IDs (0: DeleteBatch), each one Delete: committed with its index updates
// before the next begins. Killed at any point, the directory loses only
// documents keep does not hold, and a second call removes the rest.
// Interrupted through ctx, it stops between batches and returns the
// context's error with the count so far. A document another writer adds
// during the call may or may not be removed.
func (t Teacher) DeleteExcept(ctx context.Context, keep func(id string) bool, batch int) (n int, err error) {
	e := t.e
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return 0, err
	}
	e.leave() // each Delete enters again
	if keep == nil {
		return 0, fmt.Errorf("engine: delete except: %w: keep is nil", ErrInvalidOption)
	}
	if batch < 0 {
		return 0, fmt.Errorf("engine: delete except: %w: batch %d < 0", ErrInvalidOption, batch)
	}
	if batch == 0 {
		batch = DeleteBatch
	}
	gone, err := e.idsNotKept(ctx, keep)
	if err != nil {
		return 0, err
	}
	for len(gone) > 0 {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		b := gone[:min(batch, len(gone))]
		gone = gone[len(b):]
		d, err := e.Delete(ctx, b)
		n += d
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// idsNotKept lists the stored IDs keep does not hold, in byte order.
func (e *Engine) idsNotKept(ctx context.Context, keep func(string) bool) ([]string, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if e.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	var gone []string
	if e.via != nil {
		ids, err := e.via.ids(ctx)
		for _, id := range ids {
			if !keep(id) {
				gone = append(gone, id)
			}
		}
		return gone, err
	}
	err := e.store.ForEachID(ctx, func(id string) error {
		if !keep(id) {
			gone = append(gone, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: listing documents: %w", err)
	}
	return gone, nil
}

// IDs lists the IDs of every stored document, in byte order. An engine that
// reads through another process's writer (Stats.WriterPID) cannot list them
// and says so; one that writes through it (Options.WriteThrough) lists
// them there.
func (t Teacher) IDs(ctx context.Context) (_ []string, err error) {
	e := t.e
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if e.via != nil && !e.opts.ReadOnly {
		return e.via.ids(ctx)
	}
	if e.via != nil {
		return nil, fmt.Errorf("engine: listing IDs: this engine reads through the process that has %s open for writing; list them there, or once it has closed", e.dir)
	}
	var ids []string
	err = e.store.ForEachID(ctx, func(id string) error {
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: listing documents: %w", err)
	}
	return ids, nil
}

// Documents calls fn with every stored document, in ID byte order: what a
// folder's sync compares the files with. It reads in chunks of short read
// transactions and calls fn outside them, so a document written during the
// scan may or may not be seen. An error of fn stops it and is returned.
// Like IDs, a read-only engine needs the store itself (not a writer in
// another process); one that writes through a writer (Options.WriteThrough)
// lists them there, its IDs and then their documents a chunk at a time.
func (e *Engine) Documents(ctx context.Context, fn func(Document) error) (err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if e.via != nil && !e.opts.ReadOnly {
		return e.via.documents(ctx, fn)
	}
	if e.via != nil {
		return fmt.Errorf("engine: listing documents: this engine reads through the process that has %s open for writing; list them there, or once it has closed", e.dir)
	}
	return e.store.ForEachDoc(ctx, func(d storage.Doc) error { return fn(Document(d)) })
}
