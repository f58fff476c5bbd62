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
