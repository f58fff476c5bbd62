package hnsw

import (
	"cmp"
	"slices"
)

// compact relinks every live node that points at a tombstone and then drops
// the tombstones, renumbering ids. It runs under the write lock once
// tombstones pass 1/compactFraction of the slots, so its O(n·M) scan is
// amortised over many deletes.
//
// Repair follows the usual local rule (as in Weaviate and hnswlib's
// replacement of deleted elements): the candidates for a node are its live
// neighbors plus the live nodes reachable within two hops through its
// deleted neighbors; the neighbor heuristic picks among them. A node left
// with too few candidates gets a fresh layer search from the (live) entry
// point instead, so long tombstone chains cannot disconnect it.
//
// Upstream deleted eagerly and "replenished" with a hard-coded cosine
// distance, left dangling pointers in the upper layers and an entry point
// that could be the deleted node itself: the nil-pointer panics after a few
// deletes came from there.
func (g *Graph[K]) compact() {
	n := len(g.keys)

	// A live entry point on the highest live level.
	entry, maxLevel := uint32(0), -1
	if !g.deleted[g.entry] {
		entry, maxLevel = g.entry, g.maxLevel
	} else {
		for id := 0; id < n; id++ {
			if !g.deleted[id] && int(g.levels[id]) > maxLevel {
				entry, maxLevel = uint32(id), int(g.levels[id])
			}
		}
	}
	if maxLevel < 0 {
		g.reset()
		return
	}

	vs := g.getVisited()
	defer g.visitedPool.Put(vs)
	efc := g.efConstruction()
	qbuf, nbuf := make([]float32, g.dim), make([]float32, g.dim)
	var cs []cand
	for level := 0; level <= maxLevel; level++ {
		maxM := g.maxLinks(level)
		for i := 0; i < n; i++ {
			id := uint32(i)
			if g.deleted[id] || int(g.levels[id]) < level {
				continue
			}
			lst := g.links(id, level)
			if !slices.ContainsFunc(lst, func(x uint32) bool { return g.deleted[x] }) {
				continue
			}
			q := g.nodeQuery(id, qbuf)
			vs.reset(n)
			vs.visit(id)
			cs = cs[:0]
			add := func(x uint32) {
				if g.deleted[x] || vs.visit(x) {
					return
				}
				cs = append(cs, cand{x, g.qdist(&q, x)})
			}
			for _, x := range lst {
				if !g.deleted[x] {
					add(x)
					continue
				}
				for _, y := range g.links(x, level) {
					if !g.deleted[y] {
						add(y)
						continue
					}
					for _, z := range g.links(y, level) {
						add(z)
					}
				}
			}
			if len(cs) < maxM/2 && id != entry {
				ep := cand{entry, g.qdist(&q, entry)}
				for l := maxLevel; l > level; l-- {
					ep = g.greedy(&q, ep, l)
				}
				vs.reset(n)
				vs.visit(id)
				for _, c := range g.searchLayer(&q, ep, efc, level, true, nil, vs) {
					if c.id != id && !slices.ContainsFunc(cs, func(o cand) bool { return o.id == c.id }) {
						cs = append(cs, c)
					}
				}
			}
			slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) })
			if len(cs) > efc {
				cs = cs[:efc]
			}
			g.setLinks(id, level, g.selectNeighbors(cs, maxM, nbuf))
		}
	}

	// Renumber in place: live ids only move down, so copies never clobber
	// data not yet moved.
	const gone = ^uint32(0)
	newID := make([]uint32, n)
	live := uint32(0)
	stride := g.m0 + 1
	for old := 0; old < n; old++ {
		if g.deleted[old] {
			newID[old] = gone
			continue
		}
		newID[old] = live
		nw := int(live)
		g.keys[nw] = g.keys[old]
		// Mapped float vectors are a private (copy-on-write) mapping: a
		// write here never reaches the file.
		copy(g.vec(uint32(nw)), g.vec(uint32(old)))
		if g.quant {
			copy(g.code(uint32(nw)), g.code(uint32(old)))
		}
		g.levels[nw] = g.levels[old]
		copy(g.links0[nw*stride:(nw+1)*stride], g.links0[old*stride:(old+1)*stride])
		g.upper[nw] = g.upper[old]
		live++
	}
	nl := int(live)
	clear(g.keys[nl:]) // release tombstoned keys (strings) to the GC
	g.keys = g.keys[:nl]
	if nl <= g.nMapped {
		g.nMapped = nl
		g.mapped = g.mapped[:nl*g.dim]
		g.vecs = g.vecs[:0]
	} else {
		g.vecs = g.vecs[:(nl-g.nMapped)*g.dim]
	}
	if g.quant {
		g.codes = g.codes[:nl*g.dim]
	}
	g.levels = g.levels[:nl]
	g.deleted = g.deleted[:nl]
	clear(g.deleted)
	g.links0 = g.links0[:nl*stride]
	clear(g.upper[nl:])
	g.upper = g.upper[:nl]
	remap := func(dst []uint32) {
		w := 0
		for _, x := range dst[1 : 1+dst[0]] {
			// Repair left no live node pointing at a tombstone; dropping
			// such a link anyway is better than a dangling one.
			if nx := newID[x]; nx != gone {
				dst[1+w] = nx
				w++
			}
		}
		dst[0] = uint32(w)
	}
	for id := 0; id < nl; id++ {
		remap(g.links0[id*stride : (id+1)*stride])
		for l := 1; l <= int(g.levels[id]); l++ {
			off := (l - 1) * (g.m + 1)
			remap(g.upper[id][off : off+g.m+1])
		}
	}
	g.entry = newID[entry]
	g.maxLevel = maxLevel
	for k, old := range g.ids {
		g.ids[k] = newID[old]
	}
	g.nDeleted = 0
}
