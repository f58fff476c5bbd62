package hnsw

import "cmp"

// Analyzer is a struct that holds a graph and provides
// methods for analyzing it. It offers no compatibility guarantee
// as the methods of measuring the graph's health with change
// with the implementation.
type Analyzer[K cmp.Ordered] struct {
	Graph *Graph[K]
}

// Height returns the number of layers.
func (a *Analyzer[T]) Height() int {
	g := a.Graph
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.maxLevel + 1
}

// Connectivity returns the average number of edges in the
// graph for each non-empty layer (live nodes only).
func (a *Analyzer[T]) Connectivity() []float64 {
	g := a.Graph
	g.mu.RLock()
	defer g.mu.RUnlock()
	sums := make([]float64, g.maxLevel+1)
	counts := make([]int, g.maxLevel+1)
	for id := range g.keys {
		if g.deleted[id] {
			continue
		}
		for l := 0; l <= int(g.levels[id]); l++ {
			sums[l] += float64(len(g.links(uint32(id), l)))
			counts[l]++
		}
	}
	var out []float64
	for l := range sums {
		if counts[l] > 0 {
			out = append(out, sums[l]/float64(counts[l]))
		}
	}
	return out
}

// Topography returns the number of live nodes in each layer of the graph.
func (a *Analyzer[T]) Topography() []int {
	g := a.Graph
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]int, g.maxLevel+1)
	for id := range g.keys {
		if g.deleted[id] {
			continue
		}
		for l := 0; l <= int(g.levels[id]) && l < len(out); l++ {
			out[l]++
		}
	}
	return out
}
