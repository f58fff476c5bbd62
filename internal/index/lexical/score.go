package lexical

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2/index/scorch"
	bindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"

	"github.com/anna-search/anna/internal/parallel"
	zap "github.com/anna-search/anna/internal/third_party/zapx"
)

// Query-time BM25, computed from the postings of the scorch segments behind
// one index snapshot. Reading the segments directly, rather than through
// Bleve's TermFieldReader, skips a per-posting doc-ID encoding and interface
// hop that cost about as much as the scoring itself
// (BenchmarkLexicalSearch100k).

// snapshot is one consistent view of the index: its segments, each with its
// deleted documents, and a global numbering of their documents by running
// offsets (the numbering scorch itself uses; valid for this snapshot only).
type snapshot struct {
	segs    []*scorch.SegmentSnapshot
	offsets []uint64 // global number of each segment's first document
	live    uint64   // documents not deleted
}

func newSnapshot(reader bindex.IndexReader) (*snapshot, error) {
	is, ok := reader.(*scorch.IndexSnapshot)
	if !ok {
		return nil, fmt.Errorf("index reader is a %T, not a scorch snapshot", reader)
	}
	s := &snapshot{segs: is.Segments()}
	var next uint64
	for _, ss := range s.segs {
		s.offsets = append(s.offsets, next)
		next += ss.Segment().Count()
		s.live += ss.Count()
	}
	return s, nil
}

// externalID returns the ID of global document doc.
func (s *snapshot) externalID(doc uint64) (string, error) {
	i := sort.Search(len(s.offsets), func(x int) bool { return s.offsets[x] > doc }) - 1
	if i < 0 {
		return "", fmt.Errorf("document number %d out of range", doc)
	}
	id, err := s.segs[i].DocID(doc - s.offsets[i])
	if err != nil {
		return "", err
	}
	if id == nil {
		return "", fmt.Errorf("document number %d not found", doc)
	}
	return string(id), nil
}

// fieldScores holds each field's BM25 score of one document.
type fieldScores [len(fields)]float64

// lengthPosting is implemented by zap's postings, whose norm is the field
// length itself (Norm derives 1/sqrt(length) from it).
type lengthPosting interface{ NormUint64() uint64 }

// postingLength returns the length of the posting's field in its document.
func postingLength(p segment.Posting) float64 {
	if lp, ok := p.(lengthPosting); ok {
		return float64(lp.NormUint64())
	}
	n := p.Norm() // 1/sqrt(length) as float32; rounding undoes its error
	if n <= 0 {
		return 0
	}
	return math.Round(1 / (n * n))
}

// termField is one query term in one field, with its postings in every
// segment and, while a segment is scored, its iterator there.
type termField struct {
	f      int
	w      float64 // qtf * idf * (K1+1)
	kb, kl float64 // BM25's denominator is tf + kb + kl*dl
	ub     float64 // strict upper bound of the term's score in any document
	df     uint64
	term   string
	pls    []segment.PostingsList
	bb     []*blockBounds // per segment, nil where it has none (blockCache)

	wub float64 // the term's bound over the window being scored (merger.window)

	it  segment.PostingsIterator // over the segment being scored
	cur segment.Posting          // it's current posting, nil once exhausted
	doc uint64                   // cur's document number, noDoc once exhausted
}

const noDoc = math.MaxUint64

func (t *termField) score(p segment.Posting) float64 {
	// postingTFDL written out: the call it would add per posting made a
	// search 2-5 % slower (one worker at 1M)
	var tf, dl float64
	if zp, ok := p.(*zap.Posting); ok {
		// the segments' own type: no interface calls per posting
		tf, dl = float64(zp.Frequency()), float64(zp.NormUint64())
	} else {
		tf, dl = float64(p.Frequency()), postingLength(p)
	}
	return t.bm25(tf, dl)
}

// bm25 is the term's score in a document where it occurs tf times in a
// field of length dl: the one formula scoring and block maxima share, so
// that a block's bound for a document's own pair is its score exactly.
func (t *termField) bm25(tf, dl float64) float64 { return t.w * tf / (tf + t.kb + t.kl*dl) }

// postingTFDL returns the posting's term frequency and field length.
func postingTFDL(p segment.Posting) (tf, dl uint64) {
	if zp, ok := p.(*zap.Posting); ok {
		return zp.Frequency(), zp.NormUint64()
	}
	return p.Frequency(), uint64(postingLength(p))
}

// start points the term at its postings in segment i.
func (t *termField) start(i int) error {
	t.it = t.pls[i].Iterator(true, true, false, t.it)
	return t.set(t.it.Next())
}

func (t *termField) next() error { return t.set(t.it.Next()) }

// advance moves to the first posting at or after document d.
func (t *termField) advance(d uint64) error { return t.set(t.it.Advance(d)) }

func (t *termField) set(p segment.Posting, err error) error {
	if err != nil {
		return fmt.Errorf("postings of %s: %w", fields[t.f], err)
	}
	t.cur, t.doc = p, noDoc
	if p != nil {
		t.doc = p.Number()
	}
	return nil
}

// collector receives the documents scoreFields scores in full.
type collector interface {
	// threshold is the score a document must reach to matter: one whose
	// score is certainly below it may be skipped. 0 keeps every document.
	threshold() float64
	collect(doc uint64, fs *fieldScores)
}

// termFields looks up the query terms in every field and segment of snap,
// with st the field statistics of the same snapshot: one termField per
// (field, term) that some live document holds.
func termFields(snap *snapshot, st stats, terms []queryTerm) ([]*termField, error) {
	N := float64(snap.live)
	var tfs []*termField
	for f, field := range fields {
		avgdl := float64(st.Len[f]) / N
		if avgdl == 0 {
			continue // field empty everywhere: no postings
		}
		dicts := make([]segment.TermDictionary, len(snap.segs))
		for i, ss := range snap.segs {
			d, err := ss.Segment().Dictionary(field)
			if err != nil {
				return nil, fmt.Errorf("field %s dictionary: %w", field, err)
			}
			dicts[i] = d
		}
		for _, qt := range terms {
			t := &termField{f: f, term: qt.term, kb: K1 * (1 - B), kl: K1 * B / avgdl, pls: make([]segment.PostingsList, len(snap.segs))}
			for i, ss := range snap.segs {
				pl, err := dicts[i].PostingsList([]byte(qt.term), ss.Deleted(), nil)
				if err != nil {
					return nil, fmt.Errorf("postings of %q in %s: %w", qt.term, field, err)
				}
				t.pls[i] = pl
				t.df += pl.Count()
			}
			if t.df == 0 {
				continue
			}
			df, n := float64(t.df), N
			if qt.docs > 0 {
				n = max(float64(qt.docs), df)
			}
			t.w = qt.qtf * math.Log(1+(n-df+0.5)/(df+0.5)) * (K1 + 1)
			t.ub = t.w / (1 + t.kl)
			tfs = append(tfs, t)
		}
	}
	return tfs, nil
}

// scoreFields scores the documents of snap matching any query term, one
// task (a segment, or a range of one: par.plan) after another and, in each,
// one document after another (in document order, merging the terms'
// postings), and hands each document whose score may reach c's threshold
// to c with its field scores; st are the field statistics of the same
// snapshot. It returns how many term-fields were read only by skipping
// (summed over windows, see below), which is 0 when the threshold never
// rose high enough to skip anything.
//
// With par.workers > 1 the tasks are shared among that many goroutines,
// each with its own iterators, and c is shared under a lock
// (syncCollector): the threshold one worker raises prunes the others'
// documents too. Still exact: the shared threshold is the k-th best score
// among documents collected so far, whichever worker scored them, which is
// never above the final k-th best.
//
// Pruning is MaxScore's (Turtle and Flood 1995, as Lucene and PISA run it),
// and exact. The terms are ordered by their score's upper bound, lowest
// first; those whose bounds sum below the threshold are non-essential: a
// document holding only them cannot reach it. Documents are enumerated
// from the essential terms' postings alone; for each, the non-essential
// terms are added from the highest bound down, each reached by Advance
// (zap skips whole chunks of postings), and the document is dropped as
// soon as its score so far plus the bounds still to come falls below the
// threshold. As the threshold rises, more terms turn non-essential, and
// the common terms, which hold most postings, are then read only at the
// documents rarer terms matched. Nothing accumulates per document, so the
// cost grows with the postings read, not with a score array the size of
// the index (BenchmarkLexicalSearch100k: over a million documents, 1.3-1.5x
// faster at top 100 and 1.6-2x at top 10 than the term-at-a-time scorer
// with a dense accumulator it replaced).
//
// With blocks (not nil) the bounds are block maxima (blockmax.go): a task
// is scored window by window, a window being the task's documents in one
// block of blocks.size, and in each window a term's bound is its block's
// maximum where the segment has block maxima for it, 0 when its next
// posting lies past the window, else its bound over the whole index. A
// window whose bounds sum below the threshold is skipped whole, and in the
// others the terms are ordered and split by their window bounds, so a
// common term is non-essential wherever its block holds no strong posting.
// Without blocks a task is one window with the whole-index bounds.
//
// A term's score w*tf/(tf+kb+kl*dl) is below w/(1+kl) since dl >= tf, and
// best_fields (max + TieBreaker*(sum-max)) grows by at most the sum of what
// its fields gain, so the bounds are safe; a document whose score may tie
// the threshold is never skipped (c decides ties).
//
// allow, when not nil, restricts scoring to the documents a filter matches
// (see docSet): a document outside allow[i] is stepped over, never scored
// nor collected. A term's df, and so its idf and bounds, stay those of the
// whole index, so a document scores the same with or without a filter,
// and the pruning stays exact: the bounds are still upper bounds of any
// document's score, and c's threshold is one among allowed documents.
func scoreFields(ctx context.Context, snap *snapshot, st stats, terms []queryTerm, allow []docSet, c collector, par parallelism, blocks *blockCache) (int, error) {
	if snap.live == 0 {
		return 0, nil
	}
	tfs, err := termFields(snap, st, terms)
	if err != nil {
		return 0, err
	}
	var size uint64 // window size, 0: one window a task
	if blocks != nil {
		blocks.active.Add(1)
		defer blocks.active.Add(-1)
		size = blocks.size
		if err := blockMaxima(ctx, snap, tfs, blocks, par.workers); err != nil {
			return 0, err
		}
	}
	tasks, workers := par.plan(snap, allow)
	if workers <= 1 {
		m := &merger{tfs: tfs, snap: snap, allow: allow, c: c, block: size}
		for _, tk := range tasks {
			if err := m.score(ctx, tk); err != nil {
				return 0, err
			}
		}
		return m.skipped, nil
	}
	// Each worker merges its own iterators over the tasks it takes; the
	// collector, and so the threshold, is shared.
	shared := &syncCollector{c: c}
	shared.theta.Store(math.Float64bits(c.threshold()))
	ms := make([]*merger, workers)
	free := make(chan *merger, workers) // at most workers tasks run at once
	for w := range ms {
		own := make([]*termField, len(tfs))
		for j, t := range tfs {
			cp := *t
			cp.it, cp.cur = nil, nil
			own[j] = &cp
		}
		ms[w] = &merger{tfs: own, snap: snap, allow: allow, c: shared, block: size}
		free <- ms[w]
	}
	err = parallel.Each(ctx, len(tasks), workers, func(i int) error {
		m := <-free
		defer func() { free <- m }()
		return m.score(ctx, tasks[i])
	})
	if err != nil {
		return 0, err
	}
	skipped := 0
	for _, m := range ms {
		skipped += m.skipped
	}
	return skipped, nil
}

// blockMaxima sets each term's block maxima (termField.bb) in the segments
// where it has at least blocks.minDF postings, from blocks; those blocks
// lacks it asks for (blockCache.fill), or, without fill, computes into
// blocks on up to workers goroutines. They are computed from all of the
// segment's postings, deleted documents included, so that they hold for
// every snapshot of the segment.
func blockMaxima(ctx context.Context, snap *snapshot, tfs []*termField, blocks *blockCache, workers int) error {
	type job struct {
		t *termField
		i int
	}
	var jobs []job
	for _, t := range tfs {
		t.bb = make([]*blockBounds, len(snap.segs))
		for i, ss := range snap.segs {
			if t.pls[i] == nil || t.pls[i].Count() < max(blocks.minDF, 1) {
				continue
			}
			k := blockKey{ss.Id(), t.f, t.term}
			switch bb, ok := blocks.lookup(k); {
			case ok:
				t.bb[i] = bb
			case blocks.background():
				blocks.request(k) // this search does without
			default:
				jobs = append(jobs, job{t, i})
			}
		}
	}
	return parallel.Each(ctx, len(jobs), workers, func(j int) error {
		t, ss := jobs[j].t, snap.segs[jobs[j].i]
		bb, err := blocks.computeIn(ctx, ss.Segment(), blockKey{ss.Id(), t.f, t.term}, nil)
		t.bb[jobs[j].i] = bb
		return err
	})
}

// parallelism is how one search spreads over goroutines: up to workers of
// them, each taking ranges of a segment's documents of at least minPiece
// documents (an index smaller than two such pieces is scored on one).
type parallelism struct {
	workers  int
	minPiece uint64
}

// task is the documents [lo, hi) of segment seg, segment-local numbers.
type task struct {
	seg    int
	lo, hi uint64
}

// plan cuts snap's segments into tasks and says how many workers share
// them: one per segment, in order, for a single worker (and for an index
// under 2×minPiece documents); for several, one per segment too, largest first (so that
// the workers finish together and the first tasks raise the threshold
// quickly), except that a segment holding more than one worker's share of
// the documents (and more than minPiece) is cut into ranges of that share.
// Cutting finer does not pay: a range starts by advancing every term's
// postings to its first document, and zap's Advance steps through every
// posting before it (over a million documents on 2 cores, top-100 p50
// 9.0 ms with whole segments or halves, 10.1 ms with quarters of a share,
// 12.1 ms with eighths). Segments a filter leaves empty are left out.
func (p parallelism) plan(snap *snapshot, allow []docSet) ([]task, int) {
	var total uint64
	for _, ss := range snap.segs {
		total += ss.Segment().Count()
	}
	workers, piece := 1, uint64(math.MaxUint64)
	if p.workers > 1 && total >= 2*max(p.minPiece, 1) {
		workers, piece = p.workers, max(p.minPiece, total/uint64(p.workers), 1)
	}
	var ts []task
	for i, ss := range snap.segs {
		if allow != nil && allow[i] != nil && len(allow[i]) == 0 {
			continue // nothing to score in this segment
		}
		n := ss.Segment().Count()
		for lo := uint64(0); lo < n; lo += min(piece, n-lo) {
			ts = append(ts, task{i, lo, lo + min(piece, n-lo)})
		}
	}
	if workers > 1 {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].hi-ts[i].lo > ts[j].hi-ts[j].lo })
	}
	return ts, min(workers, len(ts))
}

// merger scores tasks with its own iterators (tfs, one per term-field),
// counting the term-fields it read only by skipping.
type merger struct {
	tfs      []*termField
	snap     *snapshot
	allow    []docSet
	c        collector
	block    uint64 // documents per block (blockCache.size); 0: a task is one window
	windowed bool   // whether the task being scored is cut into windows of a block each
	skipped  int
	n        int          // documents merged, for the cancellation check
	ord      []*termField // the window's terms, by bound ascending
	below    []float64    // below[j] bounds the score of a document holding only ord[:j]
	fs       fieldScores  // here, not on the stack: collect's pointer would move it to the heap per document
}

// score merges the task's documents, window by window (see scoreFields).
func (m *merger) score(ctx context.Context, tk task) error {
	for _, t := range m.tfs {
		if err := t.start(tk.seg); err != nil {
			return err
		}
	}
	m.windowed = m.block > 0 && m.varies(tk)
	for lo := tk.lo; lo < tk.hi; {
		hi := tk.hi
		if m.windowed {
			hi = min(hi, (lo/m.block+1)*m.block)
		}
		if err := m.window(ctx, tk.seg, lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// varies reports whether some term's block maxima over the task's blocks
// that hold its postings differ by more than a tenth of their largest (a
// block without any is skipped without maxima: merger.bounds). When none
// do, the task is one window with the whole-index bounds: windows (each
// re-sorts the terms, and terms turning essential again are advanced to
// its start) bought nothing where every block holds a document as strong
// as any (BenchmarkLexicalSearch100k's interleaved variants: 3 % slower
// with windows).
func (m *merger) varies(tk task) bool {
	b0, b1 := tk.lo/m.block, (tk.hi-1)/m.block
	for _, t := range m.tfs {
		if t.bb == nil || t.bb[tk.seg] == nil {
			continue
		}
		lo, hi := math.Inf(1), 0.0
		for b := b0; b <= b1; b++ {
			if x := t.bb[tk.seg].bound(b, t); x > 0 {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
		if lo < 0.9*hi {
			return true
		}
	}
	return false
}

// bounds orders the terms that may score in documents [lo, hi) of segment
// i by their bound there (m.ord) and sums them (m.below). A term lags
// (its doc below lo) until the window needs it: every posting of a term
// at or after lo is at or after its doc.
func (m *merger) bounds(i int, lo, hi uint64) {
	ord := m.ord[:0]
	for _, t := range m.tfs {
		switch {
		case t.doc >= hi:
			continue // no posting in the window
		case m.windowed && t.bb != nil && t.bb[i] != nil:
			t.wub = t.bb[i].bound(lo/m.block, t)
		default:
			t.wub = t.ub
		}
		if t.wub > 0 {
			ord = append(ord, t)
		}
	}
	slices.SortStableFunc(ord, func(a, b *termField) int { return cmp.Compare(a.wub, b.wub) })
	// below[j] sums the bounds of ord[:j], with a margin for rounding, so
	// that a document holding only those terms scores below below[j].
	below := append(m.below[:0], 0)
	for j, t := range ord {
		below = append(below, below[j]+t.wub)
	}
	for j := range below {
		below[j] *= 1 + 1e-9
	}
	m.ord, m.below = ord, below
}

// window merges documents [lo, hi) of segment i (see scoreFields).
func (m *merger) window(ctx context.Context, i int, lo, hi uint64) error {
	c := m.c
	m.bounds(i, lo, hi)
	tfs, below := m.ord, m.below
	theta := c.threshold()
	if below[len(tfs)] < theta {
		m.skipped += len(tfs) // no document here can reach the threshold
		return nil
	}
	essential := func(e int, theta float64) int {
		for e < len(tfs) && below[e+1] < theta {
			e++
		}
		return e
	}
	e := essential(0, theta)
	defer func() { m.skipped += e }()
	for _, t := range tfs[e:] {
		if t.doc < lo {
			if err := t.advance(lo); err != nil {
				return err
			}
		}
	}
	var a docSet
	if m.allow != nil {
		a = m.allow[i]
	}
	off := m.snap.offsets[i]
	for ; ; m.n++ {
		if m.n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d := uint64(noDoc)
		for _, t := range tfs[e:] {
			d = min(d, t.doc)
		}
		if d >= hi {
			return nil // the essential terms are past the window (or exhausted)
		}
		if a != nil && !a.has(d) {
			// Skip to the next allowed document: a selective filter
			// then costs skips, not a merge of every posting.
			if d = a.next(d); d >= hi {
				return nil
			}
			for _, t := range tfs[e:] {
				if t.doc < d {
					if err := t.advance(d); err != nil {
						return err
					}
				}
			}
			continue
		}
		m.fs = fieldScores{}
		for _, t := range tfs[e:] {
			if t.doc == d {
				m.fs[t.f] += t.score(t.cur)
				if err := t.next(); err != nil {
					return err
				}
			}
		}
		theta := c.threshold()
		j, sc := e-1, combine(&m.fs)
		for ; j >= 0; j-- {
			if sc+below[j+1] < theta {
				break // cannot reach the threshold
			}
			t := tfs[j]
			if t.doc < d {
				if err := t.advance(d); err != nil {
					return err
				}
			}
			if t.doc == d {
				m.fs[t.f] += t.score(t.cur)
				sc = combine(&m.fs)
			}
		}
		if j >= 0 {
			continue
		}
		c.collect(off+d, &m.fs)
		e = essential(e, c.threshold())
	}
}

// syncCollector shares a collector between workers: collect under a lock,
// the threshold read without one (a stale threshold is a lower one, which
// prunes less but never wrongly: the collector only ever raises it).
type syncCollector struct {
	mu    sync.Mutex
	c     collector
	theta atomic.Uint64 // math.Float64bits of c.threshold()
}

func (s *syncCollector) threshold() float64 { return math.Float64frombits(s.theta.Load()) }

func (s *syncCollector) collect(doc uint64, fs *fieldScores) {
	s.mu.Lock()
	s.c.collect(doc, fs)
	s.theta.Store(math.Float64bits(s.c.threshold()))
	s.mu.Unlock()
}

// combine is best_fields with a tie breaker: the best field's score plus
// TieBreaker times the others.
func combine(fs *fieldScores) float64 {
	best, sum := 0.0, 0.0
	for _, s := range fs {
		sum += s
		best = max(best, s)
	}
	return best + TieBreaker*(sum-best)
}

type cand struct {
	doc   uint64
	score float64
}

// minHeap keeps the k best candidates, the worst at the root.
type minHeap []cand

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].score < h[j].score }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *minHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// topDocs collects the k best documents, and every document tied with the
// k-th best score, so that ties can be broken by external ID.
type topDocs struct {
	k    int
	best minHeap // the k best so far, the worst at the root
	ties []cand  // pushed out of best with the score of its root
}

func (c *topDocs) threshold() float64 {
	if len(c.best) < c.k {
		return 0
	}
	return c.best[0].score
}

func (c *topDocs) collect(doc uint64, fs *fieldScores) {
	s := combine(fs)
	switch {
	case len(c.best) < c.k:
		heap.Push(&c.best, cand{doc, s})
	case s == c.best[0].score:
		c.ties = append(c.ties, cand{doc, s})
	case s > c.best[0].score:
		out := c.best[0]
		c.best[0] = cand{doc, s}
		heap.Fix(&c.best, 0)
		if out.score == c.best[0].score {
			c.ties = append(c.ties, out)
		} else {
			c.ties = c.ties[:0] // all below the new root
		}
	}
}

// hits returns the k best hits, ties broken by external ID so results do
// not depend on segment layout: every document tied with the k-th score is
// resolved to its external ID before cutting.
func (c *topDocs) hits(snap *snapshot) ([]Hit, error) {
	hits := make([]Hit, 0, len(c.best)+len(c.ties))
	for _, x := range slices.Concat(c.best, c.ties) {
		id, err := snap.externalID(x.doc)
		if err != nil {
			return nil, fmt.Errorf("lexical: external id: %w", err)
		}
		hits = append(hits, Hit{ID: id, Score: x.score})
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	if len(hits) > c.k {
		hits = hits[:c.k]
	}
	return hits, nil
}
