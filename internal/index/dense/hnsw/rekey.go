package hnsw

import (
	"cmp"
	"fmt"
)

// Rekey moves g's nodes, links, vectors and parameters into a graph keyed
// by key(k, live) of each node's key k (live is false for tombstones, whose
// keys only matter to Export and Check). Nothing is copied but the keys: g
// is left empty. It fails, leaving g as it was, when two live nodes would
// get the same key. KeyHash is not carried over (its type changes).
//
// anna's dense index uses it to load files whose graph was keyed by
// document ID into its graph keyed by passage numbers, without rebuilding.
func Rekey[K, L cmp.Ordered](g *Graph[K], key func(k K, live bool) L) (*Graph[L], error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := &Graph[L]{
		Distance: g.Distance, Rng: g.Rng, KeyLevels: g.KeyLevels, M: g.M, Ml: g.Ml,
		EfSearch: g.EfSearch, EfConstruction: g.EfConstruction, Quantize: g.Quantize, Workers: g.Workers,
	}
	keys := make([]L, len(g.keys))
	ids := make(map[L]uint32, len(g.ids))
	for i, k := range g.keys {
		live := !g.deleted[i]
		keys[i] = key(k, live)
		if !live {
			continue
		}
		if _, dup := ids[keys[i]]; dup {
			return nil, fmt.Errorf("hnsw: rekey: keys %v and another live key both map to %v", k, keys[i])
		}
		ids[keys[i]] = uint32(i)
	}
	if len(g.keys) == 0 {
		ids = nil
	}
	out.keys, out.ids = keys, ids
	out.dim, out.m, out.m0, out.levelP = g.dim, g.m, g.m0, g.levelP
	out.mapped, out.nMapped, out.mapping = g.mapped, g.nMapped, g.mapping
	out.quant, out.qz, out.codes = g.quant, g.qz, g.codes
	out.vecs, out.levels, out.deleted, out.links0, out.upper = g.vecs, g.levels, g.deleted, g.links0, g.upper
	out.nDeleted, out.sinceReconnect, out.entry, out.maxLevel = g.nDeleted, g.sinceReconnect, g.entry, g.maxLevel
	if len(g.keys) == 0 {
		out.maxLevel = -1
	}
	g.reset()
	return out, nil
}
