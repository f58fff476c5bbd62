package hnsw

// reconnect makes every live node reachable from the entry point on the
// base layer again, the invariant Check verifies.
//
// The neighbour heuristic (selectNeighbors) keeps a link only if its target
// is closer to the node than to every link already kept. When a full list
// is re-pruned (connect), a node can lose its last in-link, and on tight,
// well-separated clusters the long links between clusters are dropped on
// what is nearly a coin flip (their distances to the node and to its kept
// neighbours differ by noise), so whole clusters fall off the graph:
// measured on 4 clusters of 1,000 near-duplicate 16-d vectors, 2,296 of
// ~3,000 live nodes were unreachable after re-adds, and on 3,000 clustered
// 32-d vectors one node after deletes. Searches never find such nodes.
// hnswlib and FAISS have the same hole; Lucene closes it the same way
// (HnswGraphBuilder.connectComponents), after building.
//
// The repair: a breadth-first walk from the entry point marks what is
// reachable; each live node left unmarked is looked up by an ordinary
// search (which only walks reachable nodes) and linked from the nearest
// reached node with room in its list, or, when all of those are full, from
// the nearest one in place of its farthest link; then its component is
// marked. A replaced link may cut another node off, so the walk repeats
// until nothing is unreachable (in practice once). It costs one walk of the
// base layer, O(n·2M), plus a search per island: about a millisecond per
// 10,000 nodes, paid once per Add call and per compaction.
func (g *Graph[K]) reconnect() {
	n := len(g.keys)
	if n == 0 || g.maxLevel < 0 {
		return
	}
	reached := make([]bool, n)
	var queue []uint32
	walk := func(start uint32) {
		if reached[start] {
			return
		}
		reached[start] = true
		queue = append(queue[:0], start)
		for len(queue) > 0 {
			id := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, nb := range g.links(id, 0) {
				if !reached[nb] {
					reached[nb] = true
					queue = append(queue, nb)
				}
			}
		}
	}
	var vs *visitedSet
	for pass := 0; pass < 8; pass++ {
		clear(reached)
		walk(g.entry)
		fixed := 0
		for i := 0; i < n; i++ {
			u := uint32(i)
			if reached[u] || g.deleted[u] {
				continue
			}
			if vs == nil {
				vs = g.getVisited()
				defer g.visitedPool.Put(vs)
			}
			g.attach(u, reached, vs)
			walk(u)
			fixed++
		}
		if fixed == 0 {
			return
		}
	}
}

// attach links u from the nearest reached node, preferring one with room.
func (g *Graph[K]) attach(u uint32, reached []bool, vs *visitedSet) {
	// Exact distances also in a quantized graph: the nodes that get here
	// are few, and on near-duplicates codes tie where floats do not.
	q := g.exactQuery(g.vec(u))
	// Descend from the entry point through reached nodes only: the upper
	// layers may lead into u's own component, which would be no help.
	ep := cand{g.entry, g.qdist(&q, g.entry)}
	for l := g.maxLevel; l > 0; l-- {
		for changed := true; changed; {
			changed = false
			for _, nb := range g.links(ep.id, l) {
				if d := g.qdist(&q, nb); d < ep.dist && reached[nb] {
					ep = cand{nb, d}
					changed = true
				}
			}
		}
	}
	vs.reset(len(g.keys))
	found := g.searchLayer(&q, ep, g.efConstruction(), 0, false, nil, vs)
	var nearest *cand
	for i := range found {
		c := &found[i]
		if c.id == u || !reached[c.id] {
			continue
		}
		if len(g.links(c.id, 0)) < g.m0 {
			g.appendLink(c.id, 0, u)
			return
		}
		if nearest == nil {
			nearest = c
		}
	}
	p := g.entry
	if nearest != nil {
		p = nearest.id
	}
	lst := g.links(p, 0)
	if len(lst) < g.m0 {
		g.appendLink(p, 0, u)
		return
	}
	pq := g.exactQuery(g.vec(p))
	far, farD := 0, float32(-1)
	for j, x := range lst {
		if d := g.qdist(&pq, x); d > farD {
			far, farD = j, d
		}
	}
	lst[far] = u
}
