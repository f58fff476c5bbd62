package hnsw

import (
	"cmp"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func mustCheck(t *testing.T, g *Graph[int], what string) {
	t.Helper()
	for _, is := range g.Check() {
		t.Errorf("%s: %s: %d nodes, e.g. %v", what, is.What, is.N, is.Keys)
	}
}

// TestCheckSoundGraphs builds graphs the way anna uses them (clustered
// vectors, upserts, deletes through compactions) and checks every
// invariant, reachability included, after each phase.
func TestCheckSoundGraphs(t *testing.T) {
	for _, tc := range []struct {
		n, dim, clusters int
		spread           float64
	}{{3000, 32, 30, 0.8}, {6000, 64, 300, 1.5}, {4000, 16, 4, 0.05}} {
		for _, quant := range []string{QuantizeNone, QuantizeInt8} {
			t.Run(fmt.Sprintf("n%d_d%d_c%d_%s", tc.n, tc.dim, tc.clusters, cmp.Or(quant, "float32")), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(tc.n)))
				g := newTestGraph(int64(tc.dim))
				g.Distance = DotDistance
				g.Quantize = quant
				vecs := clustered(rng, tc.n, tc.dim, tc.clusters, tc.spread)
				// Batches of 256, as internal/index/dense adds them.
				add := func(nodes []Node[int]) {
					for len(nodes) > 0 {
						k := min(len(nodes), 256)
						g.Add(nodes[:k]...)
						nodes = nodes[k:]
					}
					g.Reconnect()
				}
				var nodes []Node[int]
				for i, v := range vecs {
					nodes = append(nodes, MakeNode(i, v))
				}
				add(nodes)
				mustCheck(t, g, "built")
				nodes = nodes[:0]
				for i := 0; i < tc.n; i += 3 {
					nodes = append(nodes, MakeNode(i, vecs[(i+7)%tc.n])) // upserts leave tombstones
				}
				add(nodes)
				mustCheck(t, g, "upserted")
				for i := 1; i < tc.n; i += 2 {
					g.Delete(i) // passes the compaction threshold
				}
				mustCheck(t, g, "deleted")
				nodes = nodes[:0]
				for i := 1; i < tc.n; i += 4 {
					nodes = append(nodes, MakeNode(i, vecs[i]))
				}
				add(nodes)
				mustCheck(t, g, "re-added")
				// One at a time: reachability is repaired at least once per
				// len/32 nodes; after 1/32 of the graph more it holds again.
				for i := 0; i <= g.Len()/32+1; i++ {
					g.Add(MakeNode(tc.n+i, vecs[i]))
				}
				if quant == QuantizeInt8 && tc.spread < 0.1 {
					// Near-duplicates lie closer together than the codes'
					// resolution: the neighbour heuristic then drops new
					// nodes' in-links on noise, and such nodes wait for the
					// next repair (internal/index/dense runs one after each Add).
					g.Reconnect()
				}
				mustCheck(t, g, "single adds")
			})
		}
	}
}

// TestCheckFindsDamage breaks each invariant by hand and expects Check to
// name it and the node involved.
func TestCheckFindsDamage(t *testing.T) {
	build := func() *Graph[int] {
		rng := rand.New(rand.NewSource(3))
		g := newTestGraph(3)
		for i, v := range clustered(rng, 500, 8, 5, 0.5) {
			g.Add(MakeNode(i, v))
		}
		g.Delete(7)
		if is := g.Check(); len(is) != 0 {
			t.Fatalf("sound graph: %v", is)
		}
		return g
	}
	for name, tc := range map[string]struct {
		damage func(g *Graph[int]) int // returns the key expected in the report (-1: none)
		want   string
	}{
		"dangling": {func(g *Graph[int]) int {
			id := g.ids[10]
			g.links(id, 0)[0] = uint32(len(g.keys) + 5)
			return 10
		}, "dangling"},
		"self": {func(g *Graph[int]) int {
			id := g.ids[11]
			g.links(id, 0)[0] = id
			return 11
		}, "itself"},
		"too long": {func(g *Graph[int]) int {
			g.links0[int(g.ids[12])*(g.m0+1)] = uint32(g.m0 + 1)
			return 12
		}, "longer than its bound"},
		"twice": {func(g *Graph[int]) int {
			l := g.links(g.ids[13], 0)
			l[1] = l[0]
			return 13
		}, "twice"},
		"unreachable": {func(g *Graph[int]) int {
			victim := g.ids[20]
			for i := range g.keys {
				for l := 0; l <= int(g.levels[i]); l++ {
					lst := g.links(uint32(i), l)
					for j := range lst {
						if lst[j] == victim {
							// point the link at the entry point instead
							if uint32(i) == g.entry {
								lst[j] = g.ids[21]
							} else {
								lst[j] = g.entry
							}
						}
					}
				}
			}
			if g.entry == victim {
				return -1
			}
			return 20
		}, "unreachable"},
		"tombstones": {func(g *Graph[int]) int { g.nDeleted = 5; return -1 }, "tombstone count"},
		"key map":    {func(g *Graph[int]) int { g.ids[30] = g.ids[31]; return 30 }, "another key"},
		"nan": {func(g *Graph[int]) int {
			copy(g.vec(g.ids[40]), []float32{float32(nan())})
			return 40
		}, "NaN"},
		"entry": {func(g *Graph[int]) int { g.maxLevel++; return -1 }, "entry point on level"},
	} {
		t.Run(name, func(t *testing.T) {
			g := build()
			key := tc.damage(g)
			is := g.Check()
			found := false
			for _, i := range is {
				if strings.Contains(i.What, tc.want) && (key < 0 || contains(i.Keys, key)) {
					found = true
				}
			}
			if !found {
				t.Fatalf("damage %q not reported (key %d): %+v", tc.want, key, is)
			}
			t.Log(is[0].What)
		})
	}
}

func contains(keys []int, k int) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func nan() float64 {
	var z float64
	return z / z
}
