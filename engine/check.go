package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/index/lexical"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// Parts of a directory, as Problem.Part names them.
const (
	PartStore = "anna.db"
	PartBM25  = "BM25"
	PartHNSW  = "HNSW"
)

// Problem is one inconsistency found by Check, with the documents involved.
type Problem struct {
	Part string   // PartStore, PartBM25 or PartHNSW
	What string   // what is wrong, in words
	IDs  []string // documents involved, at most 20 listed
	N    int      // documents involved in all (0 when the problem names none)
}

func (p Problem) String() string {
	s := p.Part + ": " + p.What
	if p.N > 0 {
		s += fmt.Sprintf(": %d document(s) %q", p.N, p.IDs)
		if p.N > len(p.IDs) {
			s += fmt.Sprintf(" and %d more", p.N-len(p.IDs))
		}
	}
	return s
}

// Report is what Check found.
type Report struct {
	Dir       string
	Readable  bool   // the store could be opened
	Documents int    // in the store (0 when it could not be read)
	Seq       uint64 // the store's last change
	Model     string // the recorded model fingerprint ("" when none)
	Problems  []Problem
	// WriterPID is the process that had the directory open for writing
	// and ran the check on its open store and indexes (this process's own
	// when it is the writer); 0 when the check read the files itself.
	WriterPID int
}

// OK reports whether Check found nothing wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

const maxIDs = storage.MaxIDs

// problems collects Problems, grouping the documents of each kind.
type problems struct {
	list  []Problem
	index map[string]int
}

func (ps *problems) add(part, format string, args ...any) {
	ps.list = append(ps.list, Problem{Part: part, What: fmt.Sprintf(format, args...)})
}

func (ps *problems) addID(part, what, id string) {
	if ps.index == nil {
		ps.index = map[string]int{}
	}
	key := part + "\x00" + what
	i, ok := ps.index[key]
	if !ok {
		i = len(ps.list)
		ps.index[key] = i
		ps.list = append(ps.list, Problem{Part: part, What: what})
	}
	p := &ps.list[i]
	p.N++
	if len(p.IDs) < maxIDs {
		p.IDs = append(p.IDs, id)
	}
}

// Check verifies an engine directory without changing it, in the manner of
// bbolt's tx.Check, and reports every problem with the documents involved:
//
//   - anna.db: present, not empty, readable, both bbolt meta pages valid,
//     bbolt's page check clean, every record's checksum, and the store's own
//     invariants (storage.Store.Check): every document has one change-log
//     entry and a vector for the recorded model no older than its text, the
//     counters agree;
//   - BM25: built from this store, applied exactly the store's changes
//     (neither behind nor ahead), holds exactly the store's documents, and
//     its field statistics equal the sum of its documents' lengths;
//   - HNSW: the saved graph loads (its checksum), was built from this store
//     and model, applied exactly the store's changes, holds exactly the
//     store's documents with their stored vectors, and its invariants hold
//     (see dense.Index.Check: bounded, non-dangling neighbour lists, sound
//     tombstones, every live node reachable from the entry point).
//
// It opens everything read-only and may run beside other readers. Beside
// a writer it runs in the writer (Report.WriterPID): in this process on
// its engine, in another through the socket it answers readers on, there
// on its open store and its indexes as they are in memory (the graph's
// unsaved changes included), with its writes held back meanwhile. A writer
// that does not share (Options.NoShare) keeps it out: ErrLocked. The error
// is for a check that could not run (no such directory, a cancelled
// context); damage is in the Report.
func Check(ctx context.Context, dir string) (_ *Report, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if w := writerHere(dir); w != nil {
		return w.checkLive(ctx)
	}
	c := &checker{dir: dir, rep: &Report{Dir: dir}}
	if err := c.run(ctx); err != nil {
		if !errors.Is(err, errCheckLocked) {
			return nil, err
		}
		return checkThroughWriter(ctx, dir, err)
	}
	c.rep.Problems = c.ps.list
	return c.rep, nil
}

// errCheckLocked: anna.db's lock is held (a writer has it, or waits for
// it): the check goes through the writer.
var errCheckLocked = errors.New("locked")

// checkThroughWriter asks the process writing dir to check it; locked is
// the error of reading it here.
func checkThroughWriter(ctx context.Context, dir string, locked error) (*Report, error) {
	dctx, cancel := context.WithTimeout(ctx, readerWait+writerWait)
	defer cancel()
	for {
		c, err := dial(dctx, dir, func(string, ...any) {})
		if err == nil {
			defer c.close()
			var rep Report
			if err := c.call(ctx, "check", struct{}{}, &rep); err != nil {
				return nil, fmt.Errorf("engine: check %s through process %d, which has it open for writing: %w", dir, c.hello.PID, err)
			}
			rep.WriterPID = c.hello.PID
			return &rep, nil
		}
		if !errors.Is(err, errGone) || dctx.Err() != nil {
			return nil, fmt.Errorf("engine: check %s: %w: it is open for writing by a process that does not answer on %s (opened with Options.NoShare?)", dir, ErrLocked, sockFile)
		}
		// No writer answers yet: one may be opening, or waiting for the
		// lock; or the lock may be free again.
		c2 := &checker{dir: dir, rep: &Report{Dir: dir}}
		if err := c2.run(ctx); !errors.Is(err, errCheckLocked) {
			if err != nil {
				return nil, err
			}
			c2.rep.Problems = c2.ps.list
			return c2.rep, nil
		}
		select {
		case <-dctx.Done():
		case <-time.After(lockPoll):
		}
	}
}

// checkLive checks e, open for writing in this process, on its open
// store and indexes, its writes held back meanwhile.
func (e *Engine) checkLive(ctx context.Context) (*Report, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	c := &checker{dir: e.dir, rep: &Report{Dir: e.dir, WriterPID: os.Getpid()}, live: e}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	c.rep.Problems = c.ps.list
	return c.rep, nil
}

type checker struct {
	dir     string
	rep     *Report
	ps      problems
	st      *storage.Store
	vecKey  string          // where the recorded model's vectors are kept
	ids     map[string]bool // the store's documents (nil when unreadable)
	deleted map[string]bool // IDs whose last change is a delete
	live    *Engine         // set: check this engine's open store and indexes (checkLive)
}

func (c *checker) run(ctx context.Context) error {
	fi, err := os.Stat(c.dir)
	if err != nil {
		return fmt.Errorf("engine: check: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("engine: check: %s is not a directory", c.dir)
	}
	if err := c.checkStore(ctx); err != nil {
		return err
	}
	if c.st != nil && c.live == nil {
		defer c.st.Close()
	}
	if err := c.checkBM25(ctx); err != nil {
		return err
	}
	return c.checkHNSW(ctx)
}

func (c *checker) checkStore(ctx context.Context) error {
	path := filepath.Join(c.dir, storeFile)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e := &Engine{dir: c.dir}
		if len(e.derivedPresent()) == 0 {
			return fmt.Errorf("engine: check: %s is %w (no anna.db, no indexes)", c.dir, ErrNotIndex)
		}
		c.ps.add(PartStore, "anna.db is missing, but indexes derived from it are present: the documents are gone")
		return nil
	case err != nil:
		return fmt.Errorf("engine: check: %w", err)
	case fi.Size() == 0:
		c.ps.add(PartStore, "anna.db is empty (0 bytes): the document store was lost")
		return nil
	}
	st := c.liveStore()
	if st == nil {
		var err error
		st, err = openShared(c.dir, path, 0)
		if errors.Is(err, storage.ErrLocked) {
			return fmt.Errorf("engine: check %s: %w: %w", c.dir, errCheckLocked, err)
		}
		if err != nil {
			c.ps.add(PartStore, "cannot be opened: %v", err)
			return nil
		}
	}
	c.st = st
	c.rep.Readable = true
	m, err := recordedModel(st)
	if err != nil {
		c.ps.add(PartStore, "the recorded model cannot be read: %v", err)
	}
	c.rep.Model = m.Fingerprint
	c.vecKey = m.Fingerprint
	if m.Fingerprint != "" {
		ch := Chunking{Off: true}
		if raw, err := st.State(stateChunking); err != nil {
			c.ps.add(PartStore, "the recorded chunking cannot be read: %v", err)
		} else if raw != nil {
			if ch, err = parseChunking(string(raw)); err != nil {
				c.ps.add(PartStore, "%v", err)
			}
		}
		c.vecKey = vectorKey(m.Fingerprint, ch)
	}
	if c.rep.Documents, err = st.Count(); err != nil {
		c.ps.add(PartStore, "the document count cannot be read: %v", err)
	}
	if c.rep.Seq, err = st.Seq(); err != nil {
		c.ps.add(PartStore, "the change seq cannot be read: %v", err)
	}
	sps, err := st.Check(ctx, storage.CheckOptions{Fingerprint: c.vecKey})
	if err != nil {
		return fmt.Errorf("engine: check: %w", err)
	}
	for _, p := range sps {
		c.ps.list = append(c.ps.list, Problem{Part: PartStore, What: p.What, IDs: p.IDs, N: p.N})
	}
	ids := map[string]bool{}
	if err := st.ForEachID(ctx, func(id string) error { ids[id] = true; return nil }); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.ps.add(PartStore, "the document IDs cannot be listed: %v", err)
		return nil
	}
	c.ids = ids
	c.deleted = map[string]bool{}
	if err := st.ChangesSince(ctx, 0, func(ch storage.Change) error {
		if ch.Op == storage.OpDelete {
			c.deleted[ch.ID] = true
		}
		return nil
	}); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// compareIDs reports the store's documents missing from an index and the
// index's documents the store does not hold.
func (c *checker) compareIDs(part string, have map[string]bool) {
	if c.ids == nil {
		return
	}
	missing := make([]string, 0)
	for id := range c.ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	for _, id := range missing {
		c.ps.addID(part, "document in anna.db but not in the index", id)
	}
	extra := make([]string, 0)
	for id := range have {
		if !c.ids[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	for _, id := range extra {
		c.ps.addID(part, "document in the index but not in anna.db", id)
	}
}

// liveStore is the live engine's store, nil when the check reads files.
func (c *checker) liveStore() *storage.Store {
	if c.live == nil {
		return nil
	}
	return c.live.store
}

func (c *checker) checkBM25(ctx context.Context) error {
	if c.live != nil {
		l := c.live.local()
		if l == nil || l.lex == nil {
			return nil // another backend (Weaviate): Check looks at local indexes only
		}
		return c.inspectBM25(ctx, l.lex)
	}
	lex, err := lexical.Open(filepath.Join(c.dir, lexicalDir), lexical.Options{ReadOnly: true})
	if errors.Is(err, lexical.ErrNotExist) {
		c.ps.add(PartBM25, "the index is missing (lexical/)")
		return nil
	}
	if err != nil {
		c.ps.add(PartBM25, "cannot be opened: %v", err)
		return nil
	}
	defer lex.Close()
	return c.inspectBM25(ctx, lex)
}

// inspectBM25 checks an open BM25 index against the store.
func (c *checker) inspectBM25(ctx context.Context, lex *lexical.Index) error {
	inStep := c.st == nil
	if c.st != nil {
		id, err1 := lex.StoreID()
		applied, err2 := lex.AppliedSeq()
		if err := errors.Join(err1, err2); err != nil {
			c.ps.add(PartBM25, "%v", err)
		} else if reason, _ := staleness(c.st.ID(), c.rep.Seq, id, applied); reason != "" {
			c.ps.add(PartBM25, "the index %s", reason)
		} else {
			inStep = true
		}
	}
	msgs, err := lex.Check(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.ps.add(PartBM25, "%v", err)
	}
	for _, m := range msgs {
		c.ps.add(PartBM25, "%s", m)
	}
	have := map[string]bool{}
	if err := lex.ForEachID(ctx, func(id string) error { have[id] = true; return nil }); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.ps.add(PartBM25, "the document IDs cannot be listed: %v", err)
		return nil
	}
	if inStep {
		c.compareIDs(PartBM25, have)
	}
	return nil
}

func (c *checker) checkHNSW(ctx context.Context) error {
	if c.live != nil {
		e := c.live
		l := e.local()
		if l == nil {
			return nil // another backend (Weaviate): Check looks at local indexes only
		}
		e.mu.RLock()
		ix, meta := l.dense, dense.Meta{StoreID: e.store.ID(), Fingerprint: vectorKey(e.cur.model.Fingerprint, e.cur.chunking), AppliedSeq: l.denseApplied}
		e.mu.RUnlock()
		if ix == nil {
			if c.rep.Documents > 0 {
				c.ps.add(PartHNSW, "the graph is missing")
			}
			return nil
		}
		return c.inspectHNSW(ctx, ix, meta)
	}
	path := filepath.Join(c.dir, denseFile)
	ix, meta, err := dense.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if c.rep.Documents > 0 {
			c.ps.add(PartHNSW, "the graph is missing (dense.hnsw)")
		}
		return nil
	case err != nil:
		c.ps.add(PartHNSW, "cannot be loaded: %v", err)
		return nil
	}
	return c.inspectHNSW(ctx, ix, meta)
}

// inspectHNSW checks a graph and what it records (meta) against the store.
func (c *checker) inspectHNSW(ctx context.Context, ix *dense.Index, meta dense.Meta) error {
	for _, is := range ix.Check() {
		c.ps.list = append(c.ps.list, Problem{Part: PartHNSW, What: is.What, IDs: is.IDs, N: is.N})
	}
	if c.st == nil {
		return nil
	}
	reason, _ := staleness(c.st.ID(), c.rep.Seq, meta.StoreID, meta.AppliedSeq)
	switch {
	case meta.Fingerprint != c.vecKey && c.vecKey != "":
		c.ps.add(PartHNSW, "the graph holds vectors of model %s, the directory's model is %s", meta.Fingerprint, c.vecKey)
		return nil
	case reason != "":
		c.ps.add(PartHNSW, "the graph %s", reason)
		return nil
	}
	have := map[string]bool{}
	for _, id := range ix.IDs() {
		have[id] = true
	}
	c.compareIDs(PartHNSW, have)
	// Every vector in the graph is the stored one (normalised).
	ids := ix.IDs()
	sort.Strings(ids)
	for start := 0; start < len(ids); start += replayBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := ids[start:min(start+replayBatch, len(ids))]
		stored, err := c.st.Vectors(meta.Fingerprint, batch)
		if err != nil {
			c.ps.add(PartHNSW, "the stored vectors cannot be read: %v", err)
			return nil
		}
		for i, id := range batch {
			got, _ := ix.Vectors(id)
			if !samePassages(got, stored[i].Vectors) {
				c.ps.addID(PartHNSW, "the graph's vector differs from the stored one", id)
			}
		}
	}
	return nil
}

// samePassages reports whether the graph's passages of a document are the
// stored ones, normalised, one for one.
func samePassages(got, stored [][]float32) bool {
	if len(got) != len(stored) {
		return false
	}
	for i := range got {
		if !sameDirection(got[i], stored[i]) {
			return false
		}
	}
	return true
}

// sameDirection reports whether a (unit length) is b normalised, to float32
// rounding.
func sameDirection(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	var nb float64
	for _, x := range b {
		nb += float64(x) * float64(x)
	}
	inv := 1 / math.Sqrt(nb)
	for i := range a {
		if math.Abs(float64(a[i])-float64(b[i])*inv) > 1e-5 {
			return false
		}
	}
	return true
}

// RepairOptions configure Repair.
type RepairOptions struct {
	// Model is the model directory to embed with when the store records
	// none ("" uses the recorded one, else the default model).
	Model string
	// Encoder, when set, embeds instead (tests).
	Encoder encoder.Encoder
	// Logf receives progress messages.
	Logf func(format string, args ...any)
}

// RepairReport says what Repair found and did.
type RepairReport struct {
	Before  *Report  // Check before the repair
	Actions []string // what was done, in order
	// Lost lists documents the indexes held that the repaired store does
	// not: index them again. Older and Unconfirmed list documents a salvage
	// restored at an older version, or without the change-log entry that
	// would confirm their last state (see storage.Salvage).
	Lost        []string
	Older       []string
	Unconfirmed []string
	After       *Report // Check after the repair
}

// Repair makes dir pass Check again, losing nothing the store can still
// give. A store that is missing, empty or damaged is replaced: a damaged one
// by a salvage of every whole record it holds (storage.Salvage), and the
// damaged file is kept beside it as anna.db.damaged-<time>. The derived
// indexes are then rebuilt from the store, documents without a vector for
// the model are embedded, and Check runs again. Documents the old indexes
// held that the store no longer does are listed in Lost.
func Repair(ctx context.Context, dir string, opts RepairOptions) (_ *RepairReport, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	before, err := Check(ctx, dir)
	if err != nil {
		return nil, err
	}
	rep := &RepairReport{Before: before}
	if before.OK() {
		rep.After = before
		return rep, nil
	}
	if before.WriterPID != 0 {
		return nil, fmt.Errorf("engine: repair %s: %w: process %d has it open for writing; close it (stop that program or server) before repairing", dir, ErrLocked, before.WriterPID)
	}
	act := func(format string, args ...any) {
		rep.Actions = append(rep.Actions, fmt.Sprintf(format, args...))
	}
	indexed := indexedIDs(ctx, dir)
	storeBad := false
	for _, p := range before.Problems {
		storeBad = storeBad || p.Part == PartStore
	}
	path := filepath.Join(dir, storeFile)
	if storeBad {
		stamp := time.Now().UTC().Format("20060102T150405Z")
		aside := path + damagedMark + stamp
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			act("anna.db is missing: starting an empty store")
		case err != nil:
			return nil, fmt.Errorf("engine: repair: %w", err)
		case fi.Size() == 0:
			if err := os.Rename(path, aside); err != nil {
				return nil, fmt.Errorf("engine: repair: %w", err)
			}
			act("anna.db is empty: moved it to %s and started an empty store", filepath.Base(aside))
		default:
			tmp := path + ".salvage"
			os.Remove(tmp)
			sv, err := storage.Salvage(ctx, path, tmp)
			if err != nil {
				return nil, fmt.Errorf("engine: repair: %w", err)
			}
			if err := os.Rename(path, aside); err != nil {
				return nil, fmt.Errorf("engine: repair: %w", err)
			}
			if err := os.Rename(tmp, path); err != nil {
				return nil, fmt.Errorf("engine: repair: %w", err)
			}
			act("salvaged anna.db: read %d pages, kept %d documents and %d vectors (%d stale vectors dropped, to be embedded again), %d deletions; the damaged file is kept as %s",
				sv.Pages, sv.Docs, sv.Vectors, sv.Stale, sv.Deleted, filepath.Base(aside))
			if sv.MissingPages > 0 {
				act("%d of the %d pages anna.db had in use were missing (the file is truncated): a document stored only there is lost, and is named below only if an index still lists it", sv.MissingPages, sv.MissingPages+sv.Pages+2)
			}
			rep.Older, rep.Unconfirmed = sv.Older, sv.Unconfirmed
		}
	}
	for _, name := range []string{lexicalDir, denseFile} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("engine: repair: %w", err)
		}
	}
	act("removed the derived indexes (lexical/, dense.hnsw) to rebuild them from anna.db")
	e, err := Open(ctx, dir, Options{Model: opts.Model, Encoder: opts.Encoder, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("engine: repair: %w", err)
	}
	n, err := e.embedMissing(ctx)
	if err == nil && n > 0 {
		act("embedded %d documents that had no vector for model %s", n, e.cur.model.Fingerprint)
	}
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("engine: repair: %w", err)
	}
	act("rebuilt the BM25 index and the HNSW graph from anna.db")
	// What the indexes held that the store does not (and did not delete).
	st, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("engine: repair: %w", err)
	}
	deleted := map[string]bool{}
	st.ChangesSince(ctx, 0, func(ch storage.Change) error {
		if ch.Op == storage.OpDelete {
			deleted[ch.ID] = true
		}
		return nil
	})
	for _, id := range sortedKeys(indexed) {
		if deleted[id] {
			continue
		}
		if _, ok, err := st.Get(id); err == nil && !ok {
			rep.Lost = append(rep.Lost, id)
		}
	}
	st.Close()
	if len(rep.Lost) > 0 {
		act("%d documents the indexes held are not in the store: index them again", len(rep.Lost))
	}
	if rep.After, err = Check(ctx, dir); err != nil {
		return nil, err
	}
	return rep, nil
}

// indexedIDs lists the documents the derived indexes of dir hold, as far as
// they can be read (a graph file that fails its checksum is still read for
// its IDs: it is the only witness of what a damaged store held).
func indexedIDs(ctx context.Context, dir string) map[string]bool {
	out := map[string]bool{}
	if lex, err := lexical.Open(filepath.Join(dir, lexicalDir), lexical.Options{ReadOnly: true}); err == nil {
		lex.ForEachID(ctx, func(id string) error { out[id] = true; return nil })
		lex.Close()
	}
	if ids, err := dense.ReadIDs(filepath.Join(dir, denseFile)); err == nil {
		for _, id := range ids {
			out[id] = true
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// embedMissing embeds the documents that have no vector for the engine's
// model (or one older than their text) and brings the graph up to date; it
// binds an unbound store that holds documents to the model.
func (e *Engine) embedMissing(ctx context.Context) (int, error) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	var ids []string
	if err := e.store.ForEachID(ctx, func(id string) error { ids = append(ids, id); return nil }); err != nil {
		return 0, err
	}
	if len(ids) > 0 && !e.cur.bound {
		if err := e.store.SetStates(e.modelState(e.cur.model, e.cur.chunking)); err != nil {
			return 0, err
		}
		e.cur.bound = true
	}
	need, err := e.store.NeedVectors(e.vecKey(), ids)
	if err != nil {
		return 0, err
	}
	if len(need) > 0 {
		if err := e.ensureEncoder(ctx); err != nil { // the model, loaded on first use
			return 0, err
		}
	}
	for start := 0; start < len(need); start += 256 {
		batch := need[start:min(start+256, len(need))]
		docs, err := e.store.GetMany(batch)
		if err != nil {
			return 0, err
		}
		got := make([]string, len(docs))
		for i, d := range docs {
			got[i] = d.ID
		}
		embs, err := e.embedDocs(ctx, e.cur.enc, e.cur.chunking, docs)
		if err != nil {
			return 0, err
		}
		if _, err := e.store.PutVectors(e.vecKey(), got, embs); err != nil {
			return 0, err
		}
	}
	l := e.local()
	if err := l.catchUpLexical(ctx); err != nil {
		return 0, err
	}
	return len(need), l.catchUpDense(ctx)
}
