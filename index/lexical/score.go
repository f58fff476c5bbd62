package lexical

import (
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
	zap "github.com/blevesearch/zapx/v17"

	"github.com/anna-search/anna/internal/parallel"
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
	pls    []segment.PostingsList

	it  segment.PostingsIterator // over the segment being scored
	cur segment.Posting          // it's current posting, nil once exhausted
	doc uint64                   // cur's document number, noDoc once exhausted
}

const noDoc = math.MaxUint64

func (t *termField) score(p segment.Posting) float64 {
	var tf, dl float64
	if zp, ok := p.(*zap.Posting); ok {
		// the segments' own type: no interface calls per posting
		tf, dl = float64(zp.Frequency()), float64(zp.NormUint64())
	} else {
		tf, dl = float64(p.Frequency()), postingLength(p)
	}
	return t.w * tf / (tf + t.kb + t.kl*dl)
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
			t := &termField{f: f, kb: K1 * (1 - B), kl: K1 * B / avgdl, pls: make([]segment.PostingsList, len(snap.segs))}
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
			df := float64(t.df)
			t.w = qt.qtf * math.Log(1+(N-df+0.5)/(df+0.5)) * (K1 + 1)
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
// (summed over tasks), which is 0 when the threshold never rose high
// enough to skip anything.
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
// with a dense accumulator it replaced). Per-segment term maxima, learnt
// from the searches that read a term's whole postings, were tried as
// tighter bounds and made it no faster there (p50 29.8 ms with them, 26.5
// without).
//
// A term's score w*tf/(tf+kb+kl*dl) is below w/(1+kl) since dl >= tf, and
// best_fields (max + TieBreaker*(sum-max)) grows by at most the sum of what
// its fields gain, so the bounds are safe; a document whose score may tie
// the threshold is never skipped (c decides ties).
//
// allow, when not nil, restricts scoring to the documents a filter matches
// (see docSet): a document outside allow[i] is stepped over, never scored
// nor collected. A term's df, and so its idf and bound, stay those of the
// whole index, so a document scores the same with or without a filter,
// and the pruning stays exact: the bounds are still upper bounds of any
// document's score, and c's threshold is one among allowed documents.
func scoreFields(ctx context.Context, snap *snapshot, st stats, terms []queryTerm, allow []docSet, c collector, par parallelism) (int, error) {
	if snap.live == 0 {
		return 0, nil
	}
	tfs, err := termFields(snap, st, terms)
	if err != nil {
		return 0, err
	}
	sort.SliceStable(tfs, func(i, j int) bool { return tfs[i].ub < tfs[j].ub })
	// below[j] sums the bounds of tfs[:j], with a margin for rounding, so
	// that a document holding only those terms scores below below[j].
	below := make([]float64, len(tfs)+1)
	for j, t := range tfs {
		below[j+1] = below[j] + t.ub
	}
	for j := range below {
		below[j] *= 1 + 1e-9
	}
	tasks, workers := par.plan(snap, allow)
	if workers <= 1 {
		m := &merger{tfs: tfs, below: below, snap: snap, allow: allow, c: c}
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
		ms[w] = &merger{tfs: own, below: below, snap: snap, allow: allow, c: shared}
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

// merger scores tasks with its own iterators (tfs, one per term-field, in
// scoreFields' order), counting the term-fields it read only by skipping.
type merger struct {
	tfs     []*termField
	below   []float64
	snap    *snapshot
	allow   []docSet
	c       collector
	skipped int
	fs      fieldScores // here, not on the stack: collect's pointer would move it to the heap per document
}

// score merges the task's documents (see scoreFields).
func (m *merger) score(ctx context.Context, tk task) error {
	e, err := m.merge(ctx, tk)
	m.skipped += e
	return err
}

// merge is score, returning the number of non-essential term-fields at the
// end of the task.
func (m *merger) merge(ctx context.Context, tk task) (int, error) {
	tfs, below, c := m.tfs, m.below, m.c
	essential := func(e int, theta float64) int {
		for e < len(tfs) && below[e+1] < theta {
			e++
		}
		return e
	}
	i := tk.seg
	var a docSet
	if m.allow != nil {
		a = m.allow[i]
	}
	for _, t := range tfs {
		if err := t.start(i); err != nil {
			return 0, err
		}
		if tk.lo > 0 && t.doc < tk.lo {
			if err := t.advance(tk.lo); err != nil {
				return 0, err
			}
		}
	}
	off := m.snap.offsets[i]
	e := essential(0, c.threshold())
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return e, err
			}
		}
		d := uint64(noDoc)
		for _, t := range tfs[e:] {
			d = min(d, t.doc)
		}
		if d >= tk.hi {
			return e, nil // the essential terms are past the task (or exhausted)
		}
		if a != nil && !a.has(d) {
			// Skip to the next allowed document: a selective filter
			// then costs skips, not a merge of every posting.
			if d = a.next(d); d >= tk.hi {
				return e, nil
			}
			for _, t := range tfs[e:] {
				if t.doc < d {
					if err := t.advance(d); err != nil {
						return e, err
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
					return e, err
				}
			}
		}
		theta := c.threshold()
		j := e - 1
		for ; j >= 0; j-- {
			if combine(&m.fs)+below[j+1] < theta {
				break // cannot reach the threshold
			}
			t := tfs[j]
			if t.doc < d {
				if err := t.advance(d); err != nil {
					return e, err
				}
			}
			if t.doc == d {
				m.fs[t.f] += t.score(t.cur)
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
