package benchmarks

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/index/dense/densetest"
)

// BenchmarkDenseFilter100k measures filtered dense search on the vectors
// of BenchmarkHNSW (100,000 clustered 384-d vectors, the same generator and
// seed; 500 of its queries), one passage per document, default M,
// EfConstruction and EfSearch (64). Each document gets metadata keys p1,
// p2, p5, p10, p20, p50, each "1" with that probability in percent,
// independently of the vector; the filter key=1 then matches that share of
// the documents. Each document also gets the number u, uniform in [0, 100)
// (metadata values, filter.NumberValue), and the range row's filter is
// filter.Range("u", "40", "50"): about 10% of the documents, from the
// numeric postings. For each selectivity it reports recall@10 against exact
// filtered search and the p50 latency of the strategy Search chooses
// (which one it chose), and of each strategy forced, beside the p50 of
// unfiltered search in the same run; every search must return k hits.
// Single-threaded, k = 10.
//
//	go test -v -run '^$' -bench DenseFilter100k -benchtime 1x ./benchmarks/
//
// -short uses 20,000 vectors, for quick runs (recall is asserted, >= 0.95,
// on the 100,000 only).
func BenchmarkDenseFilter100k(b *testing.B) {
	n, nq, dim, k := 100_000, 500, 384, 10
	if testing.Short() {
		n = 20_000
	}
	percents := []int{1, 2, 5, 10, 20, 50}
	const rangeRow = -1 // the row of the range filter on u, in percents' place
	data := densetest.Clustered(1, n+nq, dim, 1000, 1.5)
	base, queries := data[:n], data[n:]
	rng := rand.New(rand.NewSource(1))
	docs := make([]dense.Doc, n)
	members := make(map[int][]int32, len(percents)) // percent -> base indices matching
	for i := range docs {
		docs[i] = dense.Doc{ID: fmt.Sprintf("doc%07d", i), Vectors: [][]float32{base[i]}, Meta: map[string]string{}}
		for _, p := range percents {
			if rng.Float64()*100 < float64(p) {
				docs[i].Meta[fmt.Sprint("p", p)] = "1"
				members[p] = append(members[p], int32(i))
			}
		}
	}
	// Drawn after the p keys, so that those are the same as before.
	for i := range docs {
		u := rng.Float64() * 100
		docs[i].MetaValues = map[string]filter.Value{"u": filter.NumberValue(u)}
		if 40 <= u && u < 50 {
			members[rangeRow] = append(members[rangeRow], int32(i))
		}
	}
	pos := make(map[string]int32, n)
	for i, d := range docs {
		pos[d.ID] = int32(i)
	}
	// Exact filtered neighbours: exact search over the matching vectors.
	truth := map[int][][]int32{0: hnswExactKNN(base, queries, k)}
	for _, p := range append(percents, rangeRow) {
		sub := make([][]float32, len(members[p]))
		for j, i := range members[p] {
			sub[j] = base[i]
		}
		gt := hnswExactKNN(sub, queries, k)
		for _, row := range gt {
			for j, x := range row {
				row[j] = members[p][x]
			}
		}
		truth[p] = gt
	}

	for it := 0; it < b.N; it++ {
		ix := dense.New(dense.Config{Dim: dim})
		start := time.Now()
		if err := ix.Add(context.Background(), docs); err != nil {
			b.Fatal(err)
		}
		b.Logf("built %d x %d in %.1fs (EfSearch %d)", n, dim, time.Since(start).Seconds(), ix.Config().EfSearch)
		run := func(p int, strategy dense.Strategy) filterRun {
			var opts dense.SearchOptions
			switch {
			case p > 0:
				opts.Filter = termFilter{fmt.Sprint("p", p), "1"}
			case p == rangeRow:
				opts.Filter = filter.Range("u", "40", "50")
			}
			opts.Strategy = strategy
			var st dense.SearchStats
			opts.Stats = &st
			r := filterRun{used: map[dense.Strategy]int{}}
			found := make([][]int32, len(queries))
			lat := make([]time.Duration, len(queries))
			for qi, q := range queries {
				t0 := time.Now()
				hits, err := ix.Search(context.Background(), q, k, opts)
				lat[qi] = time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				if len(hits) != k {
					b.Fatalf("p%d %v: %d hits, want %d", p, strategy, len(hits), k)
				}
				row := make([]int32, len(hits))
				for j, h := range hits {
					row[j] = pos[h.ID]
				}
				found[qi] = row
				r.used[st.Strategy]++
			}
			slices.Sort(lat)
			r.recall, r.p50, r.p99 = hnswRecall(found, truth[p]), lat[len(lat)/2], lat[len(lat)*99/100]
			return r
		}
		unfiltered := run(0, dense.StrategyAuto)
		b.Logf("unfiltered: recall@10 %.4f, p50 %v, p99 %v", unfiltered.recall, unfiltered.p50, unfiltered.p99)
		b.ReportMetric(float64(unfiltered.p50.Microseconds()), "unfiltered_p50_us")
		for _, p := range append(percents, rangeRow) {
			auto := run(p, dense.StrategyAuto)
			trav := run(p, dense.StrategyTraverse)
			scan := run(p, dense.StrategyScan)
			name, metric := fmt.Sprintf("%2d%%", p), fmt.Sprintf("%dpct", p)
			if p == rangeRow {
				name, metric = "u in [40, 50)", "range"
			}
			b.Logf("%s (%6d docs): chosen %v: recall@10 %.4f p50 %8v p99 %8v (%.1fx unfiltered) | traverse: recall %.4f p50 %8v | scan: recall %.4f p50 %8v",
				name, len(members[p]), auto.used, auto.recall, auto.p50, auto.p99, float64(auto.p50)/float64(unfiltered.p50),
				trav.recall, trav.p50, scan.recall, scan.p50)
			b.ReportMetric(auto.recall, "recall_"+metric)
			b.ReportMetric(float64(auto.p50.Microseconds()), "p50_us_"+metric)
			if auto.recall < 0.95 && !testing.Short() {
				b.Errorf("%s: recall@10 %.4f < 0.95", name, auto.recall)
			}
		}
		// The same unfiltered queries again, for the drift over the run.
		again := run(0, dense.StrategyAuto)
		b.Logf("unfiltered again: recall@10 %.4f, p50 %v, p99 %v", again.recall, again.p50, again.p99)
	}
}

type filterRun struct {
	recall   float64
	p50, p99 time.Duration
	used     map[dense.Strategy]int
}

// termFilter matches the documents whose metadata has key = value.
type termFilter struct{ key, value string }

func (f termFilter) Eval(p dense.Postings) *roaring.Bitmap { return p.Term(f.key, f.value) }
