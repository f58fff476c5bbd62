package lexical

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/blevesearch/bleve/v2/index/scorch"
	bindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
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

// segEnd returns one past the global number of segment i's last document.
func (s *snapshot) segEnd(i int) uint64 {
	if i+1 < len(s.offsets) {
		return s.offsets[i+1]
	}
	return math.MaxUint64
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

// fieldScores holds each field's BM25 score of one candidate document.
type fieldScores [len(fields)]float64

// candidates are the documents matching any query term, with their field
// scores, held densely by global document number: a slice indexed by doc
// number costs a fraction of a map's time per posting, and the few MB it
// takes at a million documents are pooled across queries (Index.cands). A
// zero entry means untouched: a matching term's BM25 is always > 0.
type candidates struct {
	scores  []fieldScores
	touched []uint64 // every doc with a nonzero entry
	// live are the docs that can still reach the top k, with exact scores:
	// touched, less those pruned (see scoreFields).
	live []uint64
	// advanced counts the term-fields that only visited live docs.
	advanced int
}

func (c *candidates) add(doc uint64, f int, s float64) {
	if doc >= uint64(len(c.scores)) {
		c.scores = append(c.scores, make([]fieldScores, int(doc)+1-len(c.scores)+len(c.scores)/2)...)
	}
	e := &c.scores[doc]
	if *e == (fieldScores{}) {
		c.touched = append(c.touched, doc)
	}
	e[f] += s
}

// reset clears the touched entries, leaving c ready for another query.
func (c *candidates) reset() {
	for _, d := range c.touched {
		c.scores[d] = fieldScores{}
	}
	c.touched = c.touched[:0]
	c.live = c.live[:0]
	c.advanced = 0
}

// kth returns the k-th best combined score among docs, 0 if there are
// fewer than k.
func (c *candidates) kth(docs []uint64, k int) float64 {
	if len(docs) < k {
		return 0
	}
	h := make(minHeap, 0, k)
	for _, d := range docs {
		s := combine(&c.scores[d])
		if len(h) < k {
			heap.Push(&h, cand{d, s})
		} else if s > h[0].score {
			h[0] = cand{d, s}
			heap.Fix(&h, 0)
		}
	}
	return h[0].score
}

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
// segment.
type termField struct {
	f      int
	w      float64 // qtf * idf * (K1+1)
	kb, kl float64 // BM25's denominator is tf + kb + kl*dl
	ub     float64 // strict upper bound of the term's score in any document
	df     uint64
	pls    []segment.PostingsList
}

func (t *termField) score(p segment.Posting) float64 {
	tf := float64(p.Frequency())
	return t.w * tf / (tf + t.kb + t.kl*postingLength(p))
}

// scoreFields scores the documents matching any term into scores, with st
// the field statistics of the same snapshot. With k > 0 it may skip
// documents that cannot reach the top k (MaxScore pruning, exact); with
// k = 0 every matching document gets its full score.
//
// Terms are scored one at a time, rarest (highest bound) first. Once the
// bounds of the terms still to come sum below the k-th best score so far,
// no document they alone match can reach the top k, and neither can a
// candidate whose score plus that sum falls short: the remaining terms then
// only add to the surviving candidates, reaching them by Advance instead of
// walking and scoring the whole postings list. Common terms, which hold
// most postings, come last: on SciFact's queries over 100k documents, 50-75%
// of the postings are never scored and the candidates shrink to about k
// (zap's Advance still steps over postings inside a chunk, so the saving is
// the scoring and accumulating, not the decoding). A term's score w*tf/(tf+kb+kl*dl) is below w/(1+kl) since
// dl >= tf, and best_fields grows by at most the sum of what its fields
// gain, so the bounds are safe.
//
// allow, when not nil, restricts scoring to the documents a filter matches
// (see docSet): a posting of a document outside allow[i] is stepped over,
// never scored, so the document never becomes a candidate. A term's df,
// and so its idf and bound, stay those of the whole index. Every
// candidate, and so every threshold, is then one of the filtered search,
// and the pruning stays exact: the bounds are still upper bounds of any
// document's score, and the k-th best score among filtered candidates is
// a lower bound of the filtered top k's.
func scoreFields(ctx context.Context, snap *snapshot, st stats, terms []queryTerm, allow []docSet, scores *candidates, k int) error {
	if snap.live == 0 {
		return nil
	}
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
				return fmt.Errorf("field %s dictionary: %w", field, err)
			}
			dicts[i] = d
		}
		for _, qt := range terms {
			t := &termField{f: f, kb: K1 * (1 - B), kl: K1 * B / avgdl, pls: make([]segment.PostingsList, len(snap.segs))}
			for i, ss := range snap.segs {
				pl, err := dicts[i].PostingsList([]byte(qt.term), ss.Deleted(), nil)
				if err != nil {
					return fmt.Errorf("postings of %q in %s: %w", qt.term, field, err)
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
	sort.SliceStable(tfs, func(i, j int) bool { return tfs[i].ub > tfs[j].ub })
	// rest[j] and postings[j] sum the bounds and postings of tfs[j:]; summed
	// from the end, so that rest[len(tfs)] is exactly 0.
	rest := make([]float64, len(tfs)+1)
	postings := make([]uint64, len(tfs)+1)
	for j := len(tfs) - 1; j >= 0; j-- {
		rest[j] = rest[j+1] + tfs[j].ub
		postings[j] = postings[j+1] + tfs[j].df
	}
	pruned := false
	var it segment.PostingsIterator
	for j, t := range tfs {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Try to start pruning. No score so far exceeds the bounds summed
		// over the terms done, so it cannot start before those outweigh
		// the terms to come; and it is worth a check only while the
		// postings to come outnumber the candidates checked. The k-th best
		// score among the first thetaSample candidates is a lower bound of
		// the k-th best over all (so a safe threshold) at a cost that does
		// not grow with the corpus; the first candidates come from the
		// rarest terms, which score highest.
		if !pruned && k > 0 && rest[0]-rest[j] > rest[j] && postings[j] > uint64(min(len(scores.touched), thetaSample)) {
			if theta := scores.kth(scores.touched[:min(len(scores.touched), max(k, thetaSample))], k); rest[j]*(1+1e-9) < theta {
				pruned = true
				scores.live = scores.prune(scores.live[:0], scores.touched, rest[j], theta)
				slices.Sort(scores.live)
			}
		}
		for i := range snap.segs {
			var a docSet
			if allow != nil {
				if a = allow[i]; a != nil && len(a) == 0 {
					continue // nothing to score in this segment
				}
			}
			it = t.pls[i].Iterator(true, true, false, it)
			var err error
			switch {
			case pruned: // the live candidates are all allowed
				err = t.addTo(scores, it, snap.offsets[i], snap.segEnd(i))
			case a != nil:
				err = t.scoreAllowed(scores, it, snap.offsets[i], a)
			default:
				err = t.scoreAll(scores, it, snap.offsets[i])
			}
			if err != nil {
				return fmt.Errorf("postings of %s: %w", fields[t.f], err)
			}
		}
		if pruned {
			scores.advanced++
			scores.live = scores.prune(scores.live[:0], scores.live, rest[j+1], scores.kth(scores.live, k))
		}
	}
	if !pruned {
		scores.live = append(scores.live[:0], scores.touched...)
	}
	return nil
}

// thetaSample caps the candidates that estimate the pruning threshold.
const thetaSample = 4096

// scoreAll walks the whole postings list, adding every document.
func (t *termField) scoreAll(scores *candidates, it segment.PostingsIterator, off uint64) error {
	for {
		p, err := it.Next()
		if err != nil || p == nil {
			return err
		}
		scores.add(off+p.Number(), t.f, t.score(p))
	}
}

// scoreAllowed is scoreAll for the documents of a only.
func (t *termField) scoreAllowed(scores *candidates, it segment.PostingsIterator, off uint64, a docSet) error {
	for {
		p, err := it.Next()
		if err != nil || p == nil {
			return err
		}
		if d := p.Number(); a.has(d) {
			scores.add(off+d, t.f, t.score(p))
		}
	}
}

// addTo adds the term's score to the live candidates in [off, end) only,
// advancing the iterator from one to the next.
func (t *termField) addTo(scores *candidates, it segment.PostingsIterator, off, end uint64) error {
	live := scores.live
	lo, _ := slices.BinarySearch(live, off)
	var p segment.Posting
	for _, d := range live[lo:] {
		if d >= end {
			break
		}
		local := d - off
		if p == nil || p.Number() < local {
			var err error
			if p, err = it.Advance(local); err != nil {
				return err
			}
			if p == nil {
				break // postings exhausted
			}
		}
		if p.Number() == local {
			scores.scores[d][t.f] += t.score(p)
		}
	}
	return nil
}

// prune appends to dst the docs of src whose score plus rem reaches theta;
// dst may alias src.
func (c *candidates) prune(dst, src []uint64, rem, theta float64) []uint64 {
	for _, d := range src {
		if combine(&c.scores[d])+rem*(1+1e-9) >= theta {
			dst = append(dst, d)
		}
	}
	return dst
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

// topK returns the k best hits, ties broken by external ID so results do not
// depend on segment layout. Candidates tied with the k-th score are all
// resolved to external IDs before cutting.
func topK(snap *snapshot, c *candidates, k int) ([]Hit, error) {
	cutoff := c.kth(c.live, k) // 0 when there are no more than k: keep all
	var keep []cand
	for _, doc := range c.live {
		if s := combine(&c.scores[doc]); s >= cutoff {
			keep = append(keep, cand{doc, s})
		}
	}
	hits := make([]Hit, len(keep))
	for i, c := range keep {
		id, err := snap.externalID(c.doc)
		if err != nil {
			return nil, fmt.Errorf("lexical: external id: %w", err)
		}
		hits[i] = Hit{ID: id, Score: c.score}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}
