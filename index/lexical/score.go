package lexical

import (
	"container/heap"
	"context"
	"fmt"
	"math"
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
	touched []uint64
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

// scoreFields adds to scores the per-field BM25 of every document matching a
// term, with st the field statistics of the same snapshot.
func scoreFields(ctx context.Context, snap *snapshot, st stats, terms []queryTerm, scores *candidates) error {
	if snap.live == 0 {
		return nil
	}
	N := float64(snap.live)
	dicts := make([]segment.TermDictionary, len(snap.segs))
	pls := make([]segment.PostingsList, len(snap.segs))
	its := make([]segment.PostingsIterator, len(snap.segs))
	for f, field := range fields {
		avgdl := float64(st.Len[f]) / N
		if avgdl == 0 {
			continue // field empty everywhere: no postings
		}
		for i, ss := range snap.segs {
			d, err := ss.Segment().Dictionary(field)
			if err != nil {
				return fmt.Errorf("field %s dictionary: %w", field, err)
			}
			dicts[i] = d
		}
		// BM25's denominator is tf + K1*(1-B+B*dl/avgdl) = tf + kb + kl*dl.
		kb, kl := K1*(1-B), K1*B/avgdl
		for _, qt := range terms {
			if err := ctx.Err(); err != nil {
				return err
			}
			var df uint64
			for i, ss := range snap.segs {
				pl, err := dicts[i].PostingsList([]byte(qt.term), ss.Deleted(), pls[i])
				if err != nil {
					return fmt.Errorf("postings of %q in %s: %w", qt.term, field, err)
				}
				pls[i] = pl
				df += pl.Count()
			}
			if df == 0 {
				continue
			}
			w := qt.qtf * math.Log(1+(N-float64(df)+0.5)/(float64(df)+0.5)) * (K1 + 1)
			for i := range snap.segs {
				its[i] = pls[i].Iterator(true, true, false, its[i])
				off := snap.offsets[i]
				for {
					p, err := its[i].Next()
					if err != nil {
						return fmt.Errorf("postings of %q in %s: %w", qt.term, field, err)
					}
					if p == nil {
						break
					}
					tf := float64(p.Frequency())
					scores.add(off+p.Number(), f, w*tf/(tf+kb+kl*postingLength(p)))
				}
			}
		}
	}
	return nil
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
	all := make([]cand, len(c.touched))
	for i, doc := range c.touched {
		all[i] = cand{doc, combine(&c.scores[doc])}
	}
	var keep []cand
	if len(all) <= k {
		keep = all
	} else {
		h := make(minHeap, 0, k)
		for _, c := range all {
			if len(h) < k {
				heap.Push(&h, c)
			} else if c.score > h[0].score {
				h[0] = c
				heap.Fix(&h, 0)
			}
		}
		cutoff := h[0].score
		for _, c := range all {
			if c.score >= cutoff {
				keep = append(keep, c)
			}
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
