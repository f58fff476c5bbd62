package hnsw

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// Issue is one violated invariant of a graph, with the keys of the nodes
// involved (at most maxIssueKeys of them) and how many there are in all.
type Issue[K any] struct {
	What string
	Keys []K
	N    int
}

const maxIssueKeys = 20

// Issues collects Issues, one per distinct What, each listing at most 20
// keys and counting them all. The zero value is ready to use.
type Issues[K any] struct {
	list  []Issue[K]
	index map[string]int
}

// Add records the issue what, of the node with key (nil: of no node in
// particular).
func (is *Issues[K]) Add(what string, key *K) {
	i, ok := is.index[what]
	if !ok {
		if is.index == nil {
			is.index = map[string]int{}
		}
		i = len(is.list)
		is.index[what] = i
		is.list = append(is.list, Issue[K]{What: what})
	}
	if key != nil {
		e := &is.list[i]
		e.N++
		if len(e.Keys) < maxIssueKeys {
			e.Keys = append(e.Keys, *key)
		}
	}
}

// List returns the issues recorded, in the order first seen.
func (is *Issues[K]) List() []Issue[K] { return is.list }

// Check verifies the graph's invariants, as bbolt's tx.Check does for its
// pages, and returns every violation found (none for a sound graph):
//
//   - the per-node arrays agree in length; the key map points at live slots
//     holding its keys; the tombstone count matches the flags;
//   - the entry point is a slot on the top level, and no node is above it;
//   - every neighbour list is within its bound (2·M on the base layer, M
//     above), names existing slots other than its own, no slot twice, and
//     only slots present on that level;
//   - every vector is finite (a float vector mapped from a file is not
//     read: the file's checksum covered it, and reading them all would
//     bring the whole mapping into memory); in a quantized graph, every
//     code is in [-127, 127] and the quantizer's ranges are finite;
//   - every live node is reachable from the entry point on the base layer
//     (through tombstones too, as searches go).
//
// It takes the read lock: searches may run meanwhile, writers wait.
func (g *Graph[K]) Check() []Issue[K] {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var is Issues[K]
	add := is.Add
	n := len(g.keys)
	if n == 0 {
		if len(g.ids) != 0 {
			add(fmt.Sprintf("no slots but %d keys in the key map", len(g.ids)), nil)
		}
		return is.List()
	}
	codes := n * g.dim
	if !g.quant {
		codes = 0
	}
	if len(g.levels) != n || len(g.deleted) != n || len(g.upper) != n || g.nMapped > n || len(g.mapped) != g.nMapped*g.dim ||
		len(g.vecs) != (n-g.nMapped)*g.dim || len(g.links0) != n*(g.m0+1) || len(g.codes) != codes {
		add(fmt.Sprintf("per-node arrays disagree: %d keys, %d levels, %d flags, %d upper lists, %d+%d vector floats (dim %d), %d codes, %d base-layer slots (m0 %d)",
			n, len(g.levels), len(g.deleted), len(g.upper), len(g.mapped), len(g.vecs), g.dim, len(g.codes), len(g.links0), g.m0), nil)
		return is.List() // the walks below would index out of range
	}
	if g.quant {
		bad := len(g.qz.mid) != g.dim || len(g.qz.scale) != g.dim
		for j := 0; !bad && j < g.dim; j++ {
			m, s := float64(g.qz.mid[j]), float64(g.qz.scale[j])
			bad = math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(s) || math.IsInf(s, 0) || s < 0
		}
		if bad {
			add("the quantizer's ranges are missing or not finite", nil)
		}
	}
	dead := 0
	for id := range g.keys {
		if g.deleted[id] {
			dead++
		}
	}
	if dead != g.nDeleted {
		add(fmt.Sprintf("tombstone count says %d, %d slots are flagged deleted", g.nDeleted, dead), nil)
	}
	if live := n - dead; live != len(g.ids) {
		add(fmt.Sprintf("%d live slots but %d keys in the key map", live, len(g.ids)), nil)
	}
	for k, id := range g.ids {
		switch {
		case int(id) >= n:
			add("key map points past the last slot", &k)
		case g.deleted[id]:
			add("key map points at a tombstone", &k)
		case g.keys[id] != k:
			add("key map points at a slot holding another key", &k)
		}
	}
	top := -1
	for id := range g.keys {
		top = max(top, int(g.levels[id]))
	}
	if int(g.entry) >= n {
		add(fmt.Sprintf("entry point %d is past the last slot %d", g.entry, n-1), nil)
		return is.List()
	}
	if int(g.levels[g.entry]) != g.maxLevel || top != g.maxLevel {
		add(fmt.Sprintf("entry point on level %d, graph top level %d, highest node level %d", g.levels[g.entry], g.maxLevel, top), nil)
	}
	for i := range g.keys {
		id := uint32(i)
		key := g.keys[i]
		if len(g.upper[i]) != int(g.levels[i])*(g.m+1) {
			add("upper-layer link storage does not match the node's level", &key)
			continue
		}
		for l := 0; l <= int(g.levels[i]); l++ {
			var raw uint32
			if l == 0 {
				raw = g.links0[i*(g.m0+1)]
			} else {
				raw = g.upper[i][(l-1)*(g.m+1)]
			}
			if int(raw) > g.maxLinks(l) {
				add(fmt.Sprintf("neighbour list longer than its bound (%d on level 0, %d above)", g.m0, g.m), &key)
				continue
			}
			lst := g.links(id, l)
			for j, nb := range lst {
				switch {
				case int(nb) >= n:
					add("neighbour list names a slot past the last one (dangling)", &key)
				case nb == id:
					add("node links to itself", &key)
				case int(g.levels[nb]) < l:
					add("neighbour list names a node absent from that level", &key)
				case slices.Contains(lst[:j], nb):
					add("neighbour list names a node twice", &key)
				default:
					continue
				}
				break
			}
		}
		if i >= g.nMapped {
			for _, x := range g.vec(id) {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					add("vector has a NaN or infinite component", &key)
					break
				}
			}
		}
		if g.quant && bytes.IndexByte(rawBytes(g.code(id)), 0x80) >= 0 { // -128
			add("code out of range (-128)", &key)
		}
	}
	if len(is.List()) > 0 {
		return is.List() // reachability needs sound links
	}
	seen := make([]bool, n)
	queue := []uint32{g.entry}
	seen[g.entry] = true
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, nb := range g.links(id, 0) {
			if !seen[nb] {
				seen[nb] = true
				queue = append(queue, nb)
			}
		}
	}
	for i, ok := range seen {
		if !ok && !g.deleted[i] {
			key := g.keys[i]
			add("live node unreachable from the entry point on the base layer", &key)
		}
	}
	return is.List()
}
