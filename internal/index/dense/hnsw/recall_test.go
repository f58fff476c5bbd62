package hnsw

import (
	"math/rand"
	"testing"
	"time"
)

// TestRecallClustered builds a graph over clustered vectors and checks
// recall@10 against brute force. Upstream v0.6.1 scored 0.003-0.28 here.
func TestRecallClustered(t *testing.T) {
	n, dim, nq := 20000, 128, 200
	if testing.Short() {
		n = 5000
	}
	rng := rand.New(rand.NewSource(1))
	data := clustered(rng, n+nq, dim, 50, 0.6)
	g := NewGraph[int]()
	g.Distance = DotDistance
	g.Rng = rand.New(rand.NewSource(2))
	g.EfConstruction = 100
	g.EfSearch = 64
	start := time.Now()
	nodes := make([]Node[int], n)
	ref := make(map[int][]float32, n)
	for i := 0; i < n; i++ {
		nodes[i] = MakeNode(i, data[i])
		ref[i] = data[i]
	}
	g.Add(nodes...)
	t.Logf("built %d x %d in %v", n, dim, time.Since(start))
	if g.Len() != n {
		t.Fatalf("Len = %d, want %d", g.Len(), n)
	}
	for _, ef := range []int{10, 32, 64, 128} {
		hits := 0
		start := time.Now()
		for _, q := range data[n:] {
			res := g.SearchEf(q, 10, ef)
			got := make([]int, len(res))
			for i, r := range res {
				got[i] = r.Key
			}
			hits += overlap(got, exactKNN(ref, q, 10, DotDistance))
		}
		recall := float64(hits) / float64(10*nq)
		t.Logf("ef=%d recall@10=%.4f (%v incl. brute force)", ef, recall, time.Since(start))
		if ef == 64 && recall < 0.95 {
			t.Errorf("recall@10 at ef=64 = %.4f, want >= 0.95", recall)
		}
	}
}

// TestRecallAfterBulkDeletes deletes 40% of a graph (compaction runs), then
// re-adds them, comparing recall against brute force with the freshly built
// graph's: repair must not lose quality. The data and ef are chosen so that
// recall is not saturated (~0.97), where a broken repair would show.
func TestRecallAfterBulkDeletes(t *testing.T) {
	n, dim, nq := 8000, 64, 300
	rng := rand.New(rand.NewSource(9))
	data := clustered(rng, n+nq, dim, 40, 1.5)
	g := newTestGraph(9)
	g.M, g.EfConstruction = 16, 100
	ref := map[int][]float32{}
	for i := 0; i < n; i++ {
		g.Add(MakeNode(i, data[i]))
		ref[i] = data[i]
	}
	recall := func(phase string) float64 {
		t.Helper()
		hits := 0
		for _, q := range data[n:] {
			res := g.SearchEf(q, 10, 32)
			for _, r := range res {
				if _, ok := ref[r.Key]; !ok {
					t.Fatalf("%s: deleted key %d returned", phase, r.Key)
				}
			}
			hits += overlap(keysOf(res), exactKNN(ref, q, 10, DotDistance))
		}
		r := float64(hits) / float64(10*nq)
		t.Logf("%s: Len %d recall@10 %.4f", phase, g.Len(), r)
		return r
	}
	r0 := recall("built")
	start := time.Now()
	perm := rng.Perm(n)
	for _, i := range perm[:n*4/10] {
		g.Delete(i)
		delete(ref, i)
	}
	t.Logf("deleted %d in %v", n*4/10, time.Since(start))
	if r := recall("after deletes"); r < r0-0.02 {
		t.Errorf("recall after deletes %.4f, built %.4f", r, r0)
	}
	for _, i := range perm[:n*4/10] {
		g.Add(MakeNode(i, data[i]))
		ref[i] = data[i]
	}
	if r := recall("after re-adding"); r < r0-0.02 {
		t.Errorf("recall after re-adding %.4f, built %.4f", r, r0)
	}
	if r0 < 0.9 {
		t.Errorf("built recall %.4f < 0.9", r0)
	}
}
