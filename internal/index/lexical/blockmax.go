package lexical

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// Block maxima: a term's postings in one segment summarised per block of
// consecutive document numbers, so that MaxScore can bound a term's score
// block by block rather than over the whole index (block-max MaxScore, as
// Lucene's MaxScoreBulkScorer and PISA run it; Ding and Suel 2011).
//
// A block's summary is the Pareto frontier of the (tf, field length) pairs
// of its postings: the pairs no other pair of the block beats on both
// (more occurrences, shorter field). BM25's tf/(tf+kb+kl*dl) grows with tf
// and falls with dl, so its maximum over the block is its maximum over the
// frontier, whatever kb and kl (the average field length) are when a
// search reads it: the summary stays valid as the index grows. A segment
// never changes once written, so a summary is computed once, from all of
// the segment's postings of the term (deleted documents too: a bound over
// more documents is still a bound), the first time a search needs it, and
// kept in a cache of bounded size (blockCache) keyed by segment ID. Zap's
// format has no room for them; computing one reads the term's postings in
// that segment once, what a search without pruning reads.

// blockPoint is one (tf, field length) pair of a block's frontier.
type blockPoint struct{ tf, dl uint32 }

// blockBounds is one term's frontier per block of one segment: block b's is
// pts[start[b]:start[b+1]], empty when the block holds no posting.
type blockBounds struct {
	start []uint32
	pts   []blockPoint
}

// bound returns the largest score t gives a document of block b.
func (bb *blockBounds) bound(b uint64, t *termField) float64 {
	if b+1 >= uint64(len(bb.start)) {
		return 0
	}
	best := 0.0
	for _, p := range bb.pts[bb.start[b]:bb.start[b+1]] {
		best = max(best, t.bm25(float64(p.tf), float64(p.dl)))
	}
	return best
}

func (bb *blockBounds) bytes() int { return 4*len(bb.start) + 8*len(bb.pts) + 64 }

// computeBounds reads every posting of pl, a postings list of a segment of
// n documents, into its frontiers per block of size documents, calling
// pause (when not nil) before every 4,096 postings.
func computeBounds(ctx context.Context, pl segment.PostingsList, n, size uint64, pause func(context.Context)) (*blockBounds, error) {
	nb := (n + size - 1) / size
	bb := &blockBounds{start: make([]uint32, nb+1)}
	var cur uint64 // the block being read
	var acc []blockPoint
	flush := func(next uint64) {
		// acc holds the least dl of each tf: the frontier is, by tf
		// descending, each pair shorter than every pair before it.
		slices.SortFunc(acc, func(a, b blockPoint) int { return int(b.tf) - int(a.tf) })
		least := uint32(math.MaxUint32)
		for _, p := range acc {
			if p.dl < least {
				bb.pts = append(bb.pts, p)
				least = p.dl
			}
		}
		acc = acc[:0]
		for cur < next && cur < nb {
			cur++
			bb.start[cur] = uint32(len(bb.pts))
		}
	}
	it := pl.Iterator(true, true, false, nil)
	for i := 0; ; i++ {
		if i&(1<<12-1) == 0 {
			if pause != nil {
				pause(ctx)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		p, err := it.Next()
		if err != nil {
			return nil, err
		}
		if p == nil {
			break
		}
		d := p.Number()
		if d >= n {
			return nil, fmt.Errorf("posting of document %d in a segment of %d", d, n)
		}
		if b := d / size; b != cur {
			flush(b)
		}
		tf, dl := postingTFDL(p)
		pt := blockPoint{uint32(min(tf, math.MaxUint32)), uint32(min(dl, math.MaxUint32))}
		j := 0
		for j < len(acc) && acc[j].tf != pt.tf {
			j++
		}
		if j == len(acc) {
			acc = append(acc, pt)
		} else {
			acc[j].dl = min(acc[j].dl, pt.dl)
		}
	}
	flush(nb)
	return bb, nil
}

// blockKey names one term's postings in one field of one segment.
type blockKey struct {
	seg   uint64 // scorch's segment ID: one ID, one immutable segment
	field int
	term  string
}

// blockCache keeps block maxima, least recently used dropped first once
// they take more than limit bytes. Safe for concurrent use.
//
// Once fill has started it, a goroutine of the cache computes the maxima
// searches asked for (request) and did not find, so that no search waits
// for them: a search that misses scores with the whole-index bound, as
// without block maxima, and the searches after it find them. The goroutine
// gives way to searches (pause), so a one-shot process (annactl search)
// never pays for them; a server has them after its first queries. Without
// fill a search computes what it misses itself (tests, for determinism).
type blockCache struct {
	size  uint64 // documents per block
	minDF uint64 // a term with fewer postings in a segment gets none there: its whole-index bound serves
	limit int

	mu      sync.Mutex
	bytes   int
	lru     list.List // of *blockEntry, the most recently used first
	m       map[blockKey]*list.Element
	pending map[blockKey]bool // requested, not yet computed

	want   chan blockKey // nil until fill
	stop   context.CancelFunc
	done   chan struct{}
	active atomic.Int64 // searches scoring now (scoreFields), which fill's goroutine gives way to
}

type blockEntry struct {
	key blockKey
	bb  *blockBounds
}

// Block maxima defaults: blocks of 4096 documents, for terms with at least
// 1024 postings in a segment, 32 MiB of them per open index.
const (
	blockSize  = 4096
	blockMinDF = 1024
	blockLimit = 32 << 20
)

func newBlockCache(size, minDF uint64, limit int) *blockCache {
	return &blockCache{size: max(size, 1), minDF: minDF, limit: limit, m: map[blockKey]*list.Element{}, pending: map[blockKey]bool{}}
}

// maxPending bounds the requests waiting for fill's goroutine; more are
// dropped (asked again by a later search).
const maxPending = 4096

// background reports whether fill's goroutine computes what searches miss.
func (c *blockCache) background() bool { return c.want != nil }

// fill starts the goroutine that computes requested block maxima, each
// from a snapshot open returns (closed with its closer once read).
func (c *blockCache) fill(open func() (*snapshot, io.Closer, error)) {
	ctx, stop := context.WithCancel(context.Background())
	c.want, c.stop, c.done = make(chan blockKey, maxPending), stop, make(chan struct{})
	go func() {
		defer close(c.done)
		for {
			var keys []blockKey
			select {
			case <-ctx.Done():
				return
			case k := <-c.want:
				keys = append(keys, k)
			}
			for len(c.want) > 0 {
				keys = append(keys, <-c.want)
			}
			c.compute(ctx, keys, open)
		}
	}()
}

// compute computes keys' block maxima in one snapshot of open's, skipping
// those whose segment it no longer holds (merged away). An error leaves
// the key to be asked again.
func (c *blockCache) compute(ctx context.Context, keys []blockKey, open func() (*snapshot, io.Closer, error)) {
	defer func() {
		c.mu.Lock()
		for _, k := range keys {
			delete(c.pending, k)
		}
		c.mu.Unlock()
	}()
	snap, closer, err := open()
	if err != nil {
		return
	}
	defer closer.Close()
	for _, k := range keys {
		c.pause(ctx)
		if ctx.Err() != nil {
			return
		}
		for _, ss := range snap.segs {
			if ss.Id() == k.seg {
				c.computeIn(ctx, ss.Segment(), k, c.pause) // an error: asked again later
				break
			}
		}
	}
}

// computeIn computes k's block maxima from all of seg's postings of the
// term, deleted documents too (so that they hold for every snapshot of
// the segment), calling pause as computeBounds does, and caches them.
func (c *blockCache) computeIn(ctx context.Context, seg segment.Segment, k blockKey, pause func(context.Context)) (*blockBounds, error) {
	fail := func(err error) (*blockBounds, error) {
		return nil, fmt.Errorf("block maxima of %q in %s: %w", k.term, fields[k.field], err)
	}
	d, err := seg.Dictionary(fields[k.field])
	if err != nil {
		return fail(err)
	}
	pl, err := d.PostingsList([]byte(k.term), nil, nil)
	if err != nil {
		return fail(err)
	}
	bb, err := computeBounds(ctx, pl, seg.Count(), c.size, pause)
	if err != nil {
		return fail(err)
	}
	c.put(k, bb)
	return bb, nil
}

// maxPause is the longest fill's goroutine waits for searches to end
// before reading 4,096 more postings: under a load that never pauses it
// still gets on, at a small share of the cores.
const maxPause = 50 * time.Millisecond

// pause waits while a search is scoring, at most maxPause, so that the
// maxima are computed on cores the searches leave idle: a one-shot process
// (annactl search) then never computes them while it searches.
func (c *blockCache) pause(ctx context.Context) {
	for start := time.Now(); c.active.Load() > 0 && time.Since(start) < maxPause && ctx.Err() == nil; {
		time.Sleep(time.Millisecond)
	}
}

// request asks fill's goroutine for k's block maxima, unless they are
// already asked for or too many are.
func (c *blockCache) request(k blockKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[k] || len(c.pending) >= maxPending {
		return
	}
	select {
	case c.want <- k:
		c.pending[k] = true
	default:
	}
}

// close stops fill's goroutine, if any, and waits for it: a computation
// under way stops within 4,096 postings. A nil cache is none.
func (c *blockCache) close() {
	if c != nil && c.stop != nil {
		c.stop()
		<-c.done
	}
}

// lookup returns the block maxima of k if the cache holds them.
func (c *blockCache) lookup(k blockKey) (*blockBounds, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*blockEntry).bb, true
}

// put caches bb as k's block maxima, dropping the least recently used
// entries beyond the limit (never the one just put).
func (c *blockCache) put(k blockKey, bb *blockBounds) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = c.lru.PushFront(&blockEntry{k, bb})
	c.bytes += bb.bytes() + len(k.term)
	for c.bytes > c.limit && c.lru.Len() > 1 {
		old := c.lru.Remove(c.lru.Back()).(*blockEntry)
		delete(c.m, old.key)
		c.bytes -= old.bb.bytes() + len(old.key.term)
	}
}
