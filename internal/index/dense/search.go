package dense

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/internal/index/dense/hnsw"
	"github.com/anna-search/anna/internal/safe"
)

// Strategy is how a search finds its passages.
type Strategy uint8

const (
	// StrategyAuto lets Search choose (SearchOptions only): the graph
	// without a filter; with one, an exact scan of the matching passages
	// when they are few enough (see scanFactor), else a filtered traversal.
	StrategyAuto Strategy = iota
	// StrategyGraph is the unfiltered graph search.
	StrategyGraph
	// StrategyTraverse is the filtered graph search: every node is walked
	// through, only passages of matching documents are collected.
	StrategyTraverse
	// StrategyScan is exact search over the passages of the matching
	// documents (of every document without a filter).
	StrategyScan
)

func (s Strategy) String() string {
	switch s {
	case StrategyAuto:
		return "auto"
	case StrategyGraph:
		return "graph"
	case StrategyTraverse:
		return "traverse"
	case StrategyScan:
		return "scan"
	}
	return fmt.Sprintf("Strategy(%d)", s)
}

// SearchOptions tunes Search. The zero value is an unfiltered search at the
// configured EfSearch.
type SearchOptions struct {
	// Ef is the candidate list size (<= 0: Config.EfSearch; at least the
	// number of passages asked of the graph is always used).
	Ef int
	// Filter restricts the results to the documents it matches (nil: all).
	Filter Filter
	// Strategy forces a strategy (benchmarks and tests); StrategyAuto
	// chooses. A filtered search never uses StrategyGraph.
	Strategy Strategy
	// Stats, when set, receives what the search did.
	Stats *SearchStats
}

// SearchStats says how a search went.
type SearchStats struct {
	Strategy Strategy // the one used (StrategyAuto when there was nothing to search)
	Matched  int      // documents the filter matched (all live ones without a filter)
	Fetches  int      // graph searches or scans run: 1 unless passages of the same documents crowded the list
}

// scanFactor sets where a filtered search switches from a filtered
// traversal of the graph to an exact scan of the matching passages: it
// scans when m² <= scanFactor·ef·P, m being the matching passages, P all
// live passages and ef the candidate list size.
//
// The cost model (hnsw.Graph.SearchFilter): with a fraction s = m/P of the
// passages matching, independently of where they lie, the traversal costs
// about 1/s times an unfiltered search of the same ef, which computes about
// c·ef distances, so c·ef·P/m in all; the scan costs m distances plus a
// key lookup each. They break even at m² = c'·ef·P, c' folding in c and the
// two loops' different costs per distance (both are memory-bound: a 384-d
// vector is 24 cache lines).
//
// Measured (BenchmarkDenseFilter100k, 384-d clustered vectors, ef 64, one
// passage per document, p50 per query on the shared 2-core machine), in two
// runs on 100,000 documents: the scan took 2.5 and 1.5 ms at 10 % of them,
// 4.9 and 4.2 ms at 20 %; the traversal 3.3 and 2.6 ms at 10 %, 1.5 and
// 1.7 ms at 20 %. Fitting scan = a·s and traversal = b/s, they cross at
// s ≈ 11 % and 13 %: c' ≈ 20 and 26. On 20,000 documents they crossed at
// s ≈ 25 % (c' ≈ 19). scanFactor is 24 (switching at 12.4 % of 100,000
// passages, 27.7 % of 20,000, 3.9 % of a million), at the upper side of
// the measured range because the two sides' risks differ: the scan is
// exact and its cost does not depend on where the matches lie, while the
// traversal near the crossing lost recall on this data (0.96 at 10 %
// where the scan has 1.0) and slows down further when the matches lie
// away from the query.
const scanFactor = 24

// chooseScan reports whether scanning m matching passages out of p is
// cheaper than a filtered traversal with candidate list ef.
func chooseScan(m, p, ef int) bool {
	return float64(m)*float64(m) <= scanFactor*float64(ef)*float64(p)
}

// Search returns the k documents of the highest DocScore to q (the
// cosine of a document of one passage; for a few, a mix of the first
// passage's and the best one's; for many, the best one's: see
// FirstWeight), best first, each with
// its best passage and its score. With opts.Filter only matching
// documents are returned, and k of them whenever k documents match. k
// larger than the number of (matching) documents gives them all; an empty
// index gives none.
//
// The graph is asked for passages, which are collapsed to documents (the
// first passage of a document found by another is scored exactly). The
// first request is for k passages when every document has one (the cost
// of a search before passages existed), else for max(ef, k·⌈P/D⌉) (P
// passages, D documents: enough for k documents when each has the average
// number); when the passages returned hold fewer than k distinct
// documents, or the k-th document scores below the farthest passage
// returned (so a document not found could score higher), although more
// passages exist, the request (and the candidate list with it) is doubled
// and the search run again.
func (ix *Index) Search(ctx context.Context, q []float32, k int, opts SearchOptions) (_ []Hit, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dense: search: %w", err)
	}
	if k < 0 {
		return nil, fmt.Errorf("dense: search: negative k %d", k)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	stats := opts.Stats
	if stats == nil {
		stats = &SearchStats{}
	}
	*stats = SearchStats{}
	if k == 0 || len(ix.byID) == 0 {
		return nil, nil
	}
	qn, err := normalized(q, ix.cfg.Dim)
	if err != nil {
		return nil, fmt.Errorf("dense: search: query: %w", err)
	}
	ef := opts.Ef
	if ef <= 0 {
		ef = ix.cfg.EfSearch
	}
	var match *roaring.Bitmap // nil: every document
	docs, passages := len(ix.byID), ix.nPassages
	if opts.Filter != nil {
		if match = opts.Filter.Eval(&ix.meta); match == nil {
			return nil, nil
		}
		match.And(ix.meta.live)
		docs = int(match.GetCardinality())
		if docs == 0 {
			return nil, nil
		}
		if docs == len(ix.byID) {
			match = nil // every document matches: an unfiltered search
		} else {
			// Matching passages, estimated from the average per document.
			passages = int(int64(docs) * int64(ix.nPassages) / int64(len(ix.byID)))
		}
	}
	stats.Matched = docs
	strategy := opts.Strategy
	if strategy == StrategyAuto || (strategy == StrategyGraph && match != nil) {
		strategy = StrategyGraph
		if match != nil {
			strategy = StrategyTraverse
			if chooseScan(passages, ix.nPassages, max(ef, ix.firstRequest(k, ef))) {
				strategy = StrategyScan
			}
		}
	}
	stats.Strategy = strategy
	// limit: the passages there are to find; the graph's searches also
	// stop on their own, returning fewer than asked, once they have found
	// every one (so an estimate above would do no harm).
	limit := ix.nPassages
	var fetch func(n, ef int) []hnsw.SearchResult[uint64]
	switch strategy {
	case StrategyScan:
		buf := ix.matchingKeys(match)
		defer ix.keyBuf.Put(buf)
		limit = len(*buf)
		fetch = func(n, _ int) []hnsw.SearchResult[uint64] { return ix.g.ScanKeys(qn, *buf, n) }
	case StrategyTraverse:
		var accept func(uint64) bool
		if match != nil {
			accept = func(key uint64) bool { return match.Contains(uint32(key >> 32)) }
			if ix.nPassages == len(ix.byID) {
				limit = docs
			}
		}
		fetch = func(n, ef int) []hnsw.SearchResult[uint64] { return ix.g.SearchFilter(qn, n, ef, accept) }
	default:
		fetch = func(n, ef int) []hnsw.SearchResult[uint64] { return ix.g.SearchEf(qn, n, ef) }
	}
	return ix.collect(qn, k, ef, limit, fetch, stats), nil
}

// firstRequest is how many passages Search asks for first (see Search).
func (ix *Index) firstRequest(k, ef int) int {
	if ix.nPassages == len(ix.byID) {
		return k
	}
	per := (ix.nPassages + len(ix.byID) - 1) / len(ix.byID)
	return max(ef, k*per)
}

// FirstWeight and BestFrom set how a document of several passages scores
// (DocScore): below BestFrom passages
//
//	FirstWeight·cos(first passage) + (1 − FirstWeight)·cos(best passage),
//
// from BestFrom on (with the default windows, 256 tokens 128 apart: about
// three windows of text and more) its best passage's cosine alone
// ("max-passage"). A document of one passage, or whose best passage is
// its first, scores that passage's cosine exactly. The first passage is
// the window a truncating model reads (title and the start of the text).
// Ranking every document by its best passage alone let an incidental later
// passage of a document a little longer than the window outrank documents
// that fit, and lost to truncation (dense nDCG@10 0.7278 against 0.7493
// on SciFact documents with 50-90 words appended); a mix for every length
// lost much of the gain on documents several windows long, whose first
// passage is one of many. Chosen on six collections, the rule never falls
// more than 0.002 below truncation on any and keeps the long-document
// gain: docs/results/chunking.md (BenchmarkChunkingRules).
const (
	FirstWeight = 0.2
	BestFrom    = 5
)

// DocScore is the score of a document of n passages whose first passage
// has cosine first to the query and whose best passage cosine best (best
// >= first): see FirstWeight. It is at most best.
func DocScore(first, best float32, n int) float32 {
	if first >= best || n >= BestFrom {
		return best
	}
	return FirstWeight*first + (1-FirstWeight)*best
}

// collect fetches passages until they hold k documents whose scores are
// known to be the best (or all the passages there are, limit), and
// collapses them to documents.
func (ix *Index) collect(qn []float32, k, ef, limit int, fetch func(n, ef int) []hnsw.SearchResult[uint64], stats *SearchStats) []Hit {
	n := ix.firstRequest(k, ef)
	for {
		n = min(n, max(limit, 1))
		res := fetch(n, max(ef, n))
		stats.Fetches++
		hits, sure := ix.collapse(qn, res, k)
		// Fewer results than asked: the search found every passage there
		// is to find.
		if (len(hits) >= k && sure) || len(res) < n || n >= limit {
			return hits
		}
		n *= 2
	}
}

// collapse turns passages (nearest first) into at most k documents, best
// first by DocScore, each at its best passage. A document's first passage
// is scored exactly when it is not among res. sure says whether the k-th
// document's score is at least the cosine of the farthest passage in res:
// a document none of whose passages is in res scores at most that, so no
// other document can take a place among the k.
func (ix *Index) collapse(qn []float32, res []hnsw.SearchResult[uint64], k int) ([]Hit, bool) {
	if ix.nPassages == len(ix.byID) { // one passage each: the nearest k
		hits := make([]Hit, 0, min(k, len(res)))
		for _, r := range res[:min(k, len(res))] {
			doc, p := splitKey(r.Key)
			hits = append(hits, Hit{ID: ix.docs[doc].id, Passage: int(p), Score: 1 - r.Distance})
		}
		return hits, true
	}
	type docHit struct {
		doc          uint32
		passage      int
		best, first  float32
		firstUnknown bool
	}
	var docs []docHit
	at := make(map[uint32]int, min(len(res), 4*k))
	for _, r := range res {
		doc, p := splitKey(r.Key)
		s := 1 - r.Distance
		i, seen := at[doc]
		if !seen {
			at[doc] = len(docs)
			docs = append(docs, docHit{doc: doc, passage: int(p), best: s, first: s, firstUnknown: p != 0})
			continue
		}
		if p == 0 {
			docs[i].first, docs[i].firstUnknown = s, false
		}
	}
	var keys []uint64 // first passages of documents not in res
	for _, d := range docs {
		if d.firstUnknown {
			keys = append(keys, nodeKey(d.doc, 0))
		}
	}
	if len(keys) > 0 {
		for _, r := range ix.g.ScanKeys(qn, keys, len(keys)) {
			doc, _ := splitKey(r.Key)
			i := at[doc]
			docs[i].first, docs[i].firstUnknown = 1-r.Distance, false
		}
	}
	hits := make([]Hit, len(docs))
	for i, d := range docs {
		hits[i] = Hit{ID: ix.docs[d.doc].id, Passage: d.passage, Score: DocScore(d.first, d.best, int(ix.docs[d.doc].passages))}
	}
	// Stable: equal scores keep the order of their best passages.
	slices.SortStableFunc(hits, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	hits = hits[:min(k, len(hits))]
	sure := len(hits) > 0 && len(res) > 0 && hits[len(hits)-1].Score >= 1-res[len(res)-1].Distance
	return hits, sure
}

// matchingKeys returns, in a pooled buffer, the graph keys of the passages
// of the documents in match (every live document when match is nil).
func (ix *Index) matchingKeys(match *roaring.Bitmap) *[]uint64 {
	buf, _ := ix.keyBuf.Get().(*[]uint64)
	if buf == nil {
		buf = new([]uint64)
	}
	keys := (*buf)[:0]
	add := func(doc uint32) bool {
		for p := range ix.docs[doc].passages {
			keys = append(keys, nodeKey(doc, p))
		}
		return true
	}
	if match == nil {
		match = ix.meta.live
	}
	match.Iterate(add)
	*buf = keys
	return buf
}

// Exact returns the k vectors of vecs most cosine-similar to q by brute
// force, best first (ties by id): ExactDocs with one passage per document.
// Zero or wrong-length vectors are skipped.
func Exact(vecs map[string][]float32, q []float32, k int) []Hit {
	docs := make([]Doc, 0, len(vecs))
	for id, v := range vecs {
		docs = append(docs, Doc{ID: id, Vectors: [][]float32{v}})
	}
	return ExactDocs(docs, q, k)
}

// ExactDocs ranks docs by brute force as Search does (by DocScore of the
// cosines of each document's first and best passages to q) and returns
// the best k, best first
// (ties by ID). It is the reference for tests and benchmarks: pass only
// the documents a filter matches to get exact filtered search. Passages
// that are zero or of another length than q are skipped, and documents
// left without any.
func ExactDocs(docs []Doc, q []float32, k int) []Hit {
	if k <= 0 {
		return nil
	}
	qn, err := normalized(q, len(q))
	if err != nil {
		return nil
	}
	// worse orders hits worst first: a min-heap on it keeps the best k.
	worse := func(a, b Hit) bool {
		if a.Score != b.Score {
			return a.Score < b.Score
		}
		return a.ID > b.ID
	}
	top := make([]Hit, 0, min(k, len(docs))+1)
	for _, d := range docs {
		h := Hit{ID: d.ID, Passage: -1}
		first, hasFirst := float32(0), false
		for p, v := range d.Vectors {
			if len(v) != len(qn) {
				continue
			}
			nv := hnsw.Dot(v, v)
			if nv == 0 {
				continue
			}
			s := hnsw.Dot(qn, v) / float32(math.Sqrt(float64(nv)))
			if p == 0 {
				first, hasFirst = s, true
			}
			if h.Passage < 0 || s > h.Score {
				h.Passage, h.Score = p, s
			}
		}
		if h.Passage < 0 {
			continue
		}
		if hasFirst {
			h.Score = DocScore(first, h.Score, len(d.Vectors))
		}
		if len(top) == k {
			if !worse(top[0], h) {
				continue
			}
			top[0] = h
			siftDown(top, worse)
			continue
		}
		top = append(top, h)
		for i := len(top) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(top[i], top[p]) {
				break
			}
			top[i], top[p] = top[p], top[i]
			i = p
		}
	}
	slices.SortFunc(top, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return top
}

func siftDown(h []Hit, less func(a, b Hit) bool) {
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			m = r
		}
		if !less(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
