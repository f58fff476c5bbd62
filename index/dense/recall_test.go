package dense

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anna-search/anna/index/dense/densetest"
)

// recallAt returns mean recall@k of ix (at ef) against Exact over queries.
func recallAt(t testing.TB, ix *Index, ref map[string][]float32, queries [][]float32, k, ef int) float64 {
	t.Helper()
	hits := 0
	for _, q := range queries {
		got, err := ix.SearchEf(context.Background(), q, k, ef)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, h := range Exact(ref, q, k) {
			want[h.ID] = true
		}
		for _, h := range got {
			if want[h.ID] {
				hits++
			}
		}
	}
	return float64(hits) / float64(k*len(queries))
}

// TestRecall100k is the quality bar: recall@10 >= 0.95 against exact search
// on 100,000 clustered 384-d vectors at the default EfSearch. Building takes
// about a minute on one core; -short uses 20,000 vectors.
func TestRecall100k(t *testing.T) {
	n, nq := 100_000, 200
	if testing.Short() {
		n = 20_000
	}
	const dim = 384
	data := densetest.Clustered(1, n+nq, dim, 1000, 1.0)
	ids := make([]string, n)
	ref := make(map[string][]float32, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("doc%06d", i)
		ref[ids[i]] = data[i]
	}
	ix := New(Config{Dim: dim})
	start := time.Now()
	if err := ix.Add(context.Background(), ids, data[:n]); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d x %d (M=%d efC=%d) in %v", n, dim, ix.cfg.M, ix.cfg.EfConstruction, time.Since(start).Round(time.Millisecond))
	queries := data[n:]
	for _, ef := range []int{16, 32, DefaultEfSearch, 128} {
		start := time.Now()
		r := recallAt(t, ix, ref, queries, 10, ef)
		t.Logf("ef=%d recall@10=%.4f (%v with exact search)", ef, r, time.Since(start).Round(time.Millisecond))
		if ef == DefaultEfSearch && r < 0.95 {
			t.Errorf("recall@10 at default EfSearch %d = %.4f, want >= 0.95", ef, r)
		}
	}
}
