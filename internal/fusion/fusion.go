// Package fusion merges ranked lists from several retrievers (BM25, dense,
// ...) into one, and keeps, for every result, where it stood in each list so
// a search can explain itself.
//
// RRF (reciprocal rank fusion, Cormack et al. 2009) uses ranks only:
// score = Σ w/(k+rank). ScoreFusion normalises each list's scores and sums
// them, weighted (CombSUM); MinMax maps a list to [0,1], DBSF
// (distribution-based score fusion, as in Qdrant) maps mean±3σ to [0,1].
//
// In every list a document counts once, at its first (best) position. Lists
// absent for a document contribute nothing. Ties in the fused score are
// broken by the best rank the document reached in any list, then by ID, so
// output never depends on map order.
package fusion

import (
	"math"
	"sort"
)

// Hit is one entry of a ranked list.
type Hit struct {
	ID    string
	Score float64
}

// List is one retriever's ranked list, best first. Weight scales the list's
// contribution; 0 means 1.
type List struct {
	Name   string
	Hits   []Hit
	Weight float64
}

// Contribution explains one list's part in a result.
type Contribution struct {
	List  string
	Rank  int     // 1-based position in the list
	Score float64 // the list's own (raw) score for the document
	Fused float64 // what this list added to Result.Score
}

// Result is one fused document; Contributions follow the order of the input
// lists and omit lists that did not return the document.
type Result struct {
	ID            string
	Score         float64
	Contributions []Contribution
}

// DefaultK is RRF's rank constant when k <= 0 is passed.
const DefaultK = 60

// RRF fuses lists by reciprocal rank: Σ weight/(k+rank). k <= 0 means 60.
func RRF(lists []List, k int) []Result {
	if k <= 0 {
		k = DefaultK
	}
	return fuse(lists, func([]Hit) func(rank int, h Hit) float64 {
		return func(rank int, _ Hit) float64 { return 1 / float64(k+rank) }
	})
}

// Norm selects how ScoreFusion normalises each list's scores.
type Norm int

const (
	// MinMax maps a list's scores linearly so its best is 1 and worst 0; a
	// list whose scores are all equal maps to 1.
	MinMax Norm = iota
	// DBSF maps mean-3σ to 0 and mean+3σ to 1 (σ the sample standard
	// deviation), without clamping, as Qdrant does; a list with fewer than
	// two distinct scores maps to 0.5.
	DBSF
)

func (n Norm) String() string {
	switch n {
	case MinMax:
		return "minmax"
	case DBSF:
		return "dbsf"
	}
	return "unknown"
}

// ScoreFusion normalises each list with norm and sums the weighted
// normalised scores. An unknown norm behaves as MinMax.
func ScoreFusion(lists []List, norm Norm) []Result {
	return fuse(lists, func(hits []Hit) func(rank int, h Hit) float64 {
		if norm == DBSF {
			return dbsf(hits)
		}
		return minMax(hits)
	})
}

func minMax(hits []Hit) func(int, Hit) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, h := range hits {
		lo, hi = math.Min(lo, h.Score), math.Max(hi, h.Score)
	}
	return func(_ int, h Hit) float64 {
		if hi == lo {
			return 1
		}
		return (h.Score - lo) / (hi - lo)
	}
}

func dbsf(hits []Hit) func(int, Hit) float64 {
	n := float64(len(hits))
	var mean float64
	for _, h := range hits {
		mean += h.Score
	}
	mean /= n
	var ss float64
	for _, h := range hits {
		ss += (h.Score - mean) * (h.Score - mean)
	}
	std := 0.0
	if len(hits) > 1 {
		std = math.Sqrt(ss / (n - 1))
	}
	lo := mean - 3*std
	return func(_ int, h Hit) float64 {
		if std == 0 {
			return 0.5
		}
		return (h.Score - lo) / (6 * std)
	}
}

type acc struct {
	res      Result
	bestRank int
}

// fuse runs the shared loop: per list, dedupe, score each hit with the
// list's scorer (built from the deduplicated hits), weight and accumulate.
func fuse(lists []List, scorer func(hits []Hit) func(rank int, h Hit) float64) []Result {
	byID := map[string]*acc{}
	var order []*acc
	for _, l := range lists {
		w := l.Weight
		if w == 0 {
			w = 1
		}
		hits := dedupe(l.Hits)
		if len(hits) == 0 {
			continue
		}
		score := scorer(hits)
		for i, h := range hits {
			rank := i + 1
			f := w * score(rank, h)
			a := byID[h.ID]
			if a == nil {
				a = &acc{res: Result{ID: h.ID}, bestRank: rank}
				byID[h.ID] = a
				order = append(order, a)
			}
			a.res.Score += f
			a.bestRank = min(a.bestRank, rank)
			a.res.Contributions = append(a.res.Contributions, Contribution{List: l.Name, Rank: rank, Score: h.Score, Fused: f})
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.res.Score != b.res.Score {
			return a.res.Score > b.res.Score
		}
		if a.bestRank != b.bestRank {
			return a.bestRank < b.bestRank
		}
		return a.res.ID < b.res.ID
	})
	out := make([]Result, len(order))
	for i, a := range order {
		out[i] = a.res
	}
	return out
}

// dedupe keeps each ID's first occurrence.
func dedupe(hits []Hit) []Hit {
	seen := make(map[string]bool, len(hits))
	out := hits[:0:0]
	for _, h := range hits {
		if seen[h.ID] {
			continue
		}
		seen[h.ID] = true
		out = append(out, h)
	}
	return out
}
