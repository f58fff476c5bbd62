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
//
// Crash behaviour: what a crash leaves is the engine's (each Add is atomic);
// ingest keeps no state of its own.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/format/textdir"
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

// flush adds the pending documents.
func (b *batcher) flush(ctx context.Context) error {
	if len(b.pending) == 0 {
		return nil
	}
	res, err := b.eng.Add(ctx, b.pending)
	if res.Committed || err == nil {
		b.st.Documents += len(b.pending)
		b.st.Added += res.Added
		b.st.Updated += res.Updated
		b.st.Unchanged += res.Unchanged
	}
	b.pending = b.pending[:0]
	b.report()
	return err
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

// Dir adds the text files under root (package textdir: Markdown, plain
// text, reStructuredText; the ID is the path relative to root, metadata
// "path" and "ext") to eng in batches. Progress's Total is the number of
// files listed; Read counts the files taken, skipped ones included.
func Dir(ctx context.Context, eng Adder, root string, topt textdir.Options, opt Options) (Stats, error) {
	ctx = safe.Ctx(ctx)
	b, err := newBatcher(eng, opt)
	if err != nil {
		return Stats{}, err
	}
	files, err := textdir.Files(ctx, root, topt)
	if err != nil {
		return Stats{}, err
	}
	b.total = len(files)
	b.report()
	err = textdir.Walk(ctx, root, files, topt, func(n int, d textdir.Doc) error {
		return b.take(ctx, n, engine.Document{ID: d.ID, Title: d.Title, Text: d.Text, Meta: map[string]string{"path": d.ID, "ext": d.Ext}})
	})
	return b.finish(ctx, err)
}
