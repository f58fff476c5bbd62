// Package ingest feeds a corpus into an engine: documents in batches, each
// batch one engine.Add (one commit), with progress after each. It is the
// one loop behind `annactl index`, eval's and mine-negatives' indexing, the
// reranker recipe's and the benchmarks'.
//
// Invariants:
//   - Documents with neither title nor text (engine.IsEmpty) are skipped and
//     counted, never sent (the engine refuses them).
//   - Documents reach the engine in input order, at most Options.Batch per
//     Add; a batch is counted in Stats only once it is committed (or Add
//     reported no error).
//   - An interrupt (ctx done) stops before the next document: the batches
//     already added stay committed, the one being gathered is not added, and
//     the error returned wraps ctx.Err(). Since the engine skips documents
//     stored unchanged, running the same ingest again resumes it.
//   - Read stops at a malformed line (unless Options.OnBad skips it) after
//     adding the documents before it.
//   - A folder (Dir, Watch) is read through package files, the one place
//     that knows formats: a document per part of a file, a file's
//     documents and the IDs it no longer has committed together
//     (engine.Apply), so a file is never half old and half new. The
//     engine's documents are the record of what was read: a file whose
//     size and modification time are those its documents carry is not
//     read again. A file that fails to read keeps its documents.
//   - A folder's files are read ahead of the commits, on up to four
//     goroutines and at most twice that many files ahead, so that parsing
//     overlaps the model's run; everything else (what is committed, the
//     failures noted, the progress) goes in the listing's order, and an
//     interrupt drops the files read ahead and not yet committed.
//   - The one other record is of the files that failed to read (their
//     size, time and reason, and the readers they failed with), kept in
//     the engine beside the documents (engine.SetState): a file is not
//     read again while its stamps and the readers are those it failed
//     with. A file's record is dropped before its new documents are
//     committed, so it never hides a file that has since been read.
//
// Crash behaviour: what a crash leaves is the engine's (each Add, Apply
// and SetState is atomic); the record of failed files is written apart
// from the documents, before a file that failed is committed and at the
// end of a sync: a crash loses at most failures noted since, and those
// files are read again. A folder synced again after a crash (Dir, or
// Watch's first sync) catches up.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/safe"
)

// DefaultBatch is the batch size when Options.Batch is 0.
const DefaultBatch = 256

// Adder is what ingest adds to: *engine.Engine.
type Adder interface {
	Add(ctx context.Context, docs []engine.Document) (engine.AddResult, error)
}

// Options shape an ingest. The zero value adds DefaultBatch documents per
// commit and reports nothing.
type Options struct {
	// Batch is how many documents each Add gets (DefaultBatch when 0;
	// negative is an error).
	Batch int
	// Progress, when set, is called once before the first batch (with
	// nothing done yet) and after each committed batch, from the caller's
	// goroutine.
	Progress func(Progress)
	// Accept, when set, sees each non-empty document as it is read, before
	// it joins a batch: line is its line in Read's input (1-based), or its
	// index in Slice's plus one.
	Accept func(line int, d engine.Document)
	// OnBad and OnUnknownField are Read's: see beir.CorpusOptions.
	OnBad          func(line int, err error) error
	OnUnknownField func(line int, field, warning string)
}

// Progress is where an ingest stands.
type Progress struct {
	Total int // Slice: the non-empty documents to add; Read: 0 (unknown)
	Stats     // what was read, and what the committed batches did
}

// Stats count what an ingest did. Added, Updated and Unchanged count the
// documents of committed batches.
type Stats struct {
	Read      int // the last line read (Read) or entries read (Slice)
	Documents int // documents in committed batches
	Empty     int // documents with neither title nor text, skipped
	Added     int // new documents
	Updated   int // documents whose content changed
	Unchanged int // documents stored unchanged (not re-embedded)
	Reused    int // added or updated documents that kept the vectors of the text they replaced (folders)
	Deleted   int // documents removed (folders: the parts a file lost, the files gone)
}

// Doc is a document type Slice takes.
type Doc interface{ engine.Document | beir.Doc }

// batcher gathers documents and adds them a batch at a time.
type batcher struct {
	eng     Adder
	opt     Options
	st      Stats
	total   int
	pending []engine.Document
	dels    []string // IDs to remove with the pending documents (Apply)
	onFlush func()   // called after each committed batch
}

func newBatcher(eng Adder, opt Options) (*batcher, error) {
	if eng == nil {
		return nil, errors.New("ingest: no engine")
	}
	if opt.Batch < 0 {
		return nil, fmt.Errorf("ingest: batch %d: want at least 1", opt.Batch)
	}
	if opt.Batch == 0 {
		opt.Batch = DefaultBatch
	}
	return &batcher{eng: eng, opt: opt, pending: make([]engine.Document, 0, opt.Batch)}, nil
}

// take queues d (line: its position), adding the batch once full.
func (b *batcher) take(ctx context.Context, line int, d engine.Document) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.st.Read = line
	if engine.IsEmpty(d) {
		b.st.Empty++
		return nil
	}
	if b.opt.Accept != nil {
		b.opt.Accept(line, d)
	}
	b.pending = append(b.pending, d)
	if len(b.pending) >= b.opt.Batch {
		return b.flush(ctx)
	}
	return nil
}

// takeFile queues a file's documents and the IDs it no longer has (n: its
// position), adding the batch once full: a file's documents are never
// split between two commits.
func (b *batcher) takeFile(ctx context.Context, n int, docs []engine.Document, dels []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.st.Read = n
	for _, d := range docs {
		if b.opt.Accept != nil {
			b.opt.Accept(n, d)
		}
	}
	b.pending = append(b.pending, docs...)
	b.dels = append(b.dels, dels...)
	if len(b.pending)+len(b.dels) >= b.opt.Batch {
		return b.flush(ctx)
	}
	return nil
}

// flush adds the pending documents (and removes the pending IDs).
func (b *batcher) flush(ctx context.Context) error {
	if len(b.pending) == 0 && len(b.dels) == 0 {
		return nil
	}
	var res engine.AddResult
	var err error
	if ap, ok := b.eng.(interface {
		Apply(context.Context, []engine.Document, []string) (engine.AddResult, error)
	}); ok && len(b.dels) > 0 {
		res, err = ap.Apply(ctx, b.pending, b.dels)
	} else if len(b.dels) > 0 {
		err = errors.New("ingest: removing documents needs an engine with Apply")
	} else {
		res, err = b.eng.Add(ctx, b.pending)
	}
	if res.Committed || err == nil {
		b.st.Documents += len(b.pending)
		b.st.Added += res.Added
		b.st.Updated += res.Updated
		b.st.Unchanged += res.Unchanged
		b.st.Reused += res.Reused
		b.st.Deleted += res.Deleted
		if b.onFlush != nil {
			b.onFlush()
		}
	}
	b.pending, b.dels = b.pending[:0], b.dels[:0]
	b.report()
	return err
}

// finishFolder is finish for a folder's sync.
func (b *batcher) finishFolder(ctx context.Context, fs FolderStats, err error) (FolderStats, error) {
	st, err := b.finish(ctx, err)
	unread := fs.Unchanged // the documents of files not read
	fs.Stats = st
	fs.Unchanged += unread
	return fs, err
}

func (b *batcher) report() {
	if b.opt.Progress != nil {
		b.opt.Progress(Progress{Total: b.total, Stats: b.st})
	}
}

// finish adds what is pending unless the ingest was interrupted, and
// returns the stats with err (and the last add's error).
func (b *batcher) finish(ctx context.Context, err error) (Stats, error) {
	if err == nil || (!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		// Done, or a bad line or a failed add: commit what came before.
		if ferr := b.flush(ctx); err == nil {
			err = ferr
		} else if ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return b.st, err
}

// Slice adds docs to eng in batches.
func Slice[D Doc](ctx context.Context, eng Adder, docs []D, opt Options) (Stats, error) {
	ctx = safe.Ctx(ctx)
	b, err := newBatcher(eng, opt)
	if err != nil {
		return Stats{}, err
	}
	for _, d := range docs {
		if !engine.IsEmpty(engine.Document(d)) {
			b.total++
		}
	}
	b.report()
	for i, d := range docs {
		if err = b.take(ctx, i+1, engine.Document(d)); err != nil {
			break
		}
	}
	return b.finish(ctx, err)
}

// Read adds the documents of r, JSON lines as beir.ReadCorpus reads them
// (name names r in errors: name:line), to eng in batches.
func Read(ctx context.Context, eng Adder, r io.Reader, name string, opt Options) (Stats, error) {
	ctx = safe.Ctx(ctx)
	b, err := newBatcher(eng, opt)
	if err != nil {
		return Stats{}, err
	}
	b.report()
	copts := beir.CorpusOptions{OnBad: opt.OnBad, OnUnknownField: opt.OnUnknownField}
	err = beir.ReadCorpusWith(r, name, copts, func(line int, d beir.Doc) error {
		return b.take(ctx, line, engine.Document(d))
	})
	return b.finish(ctx, err)
}
