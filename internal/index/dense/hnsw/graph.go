package hnsw

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anna-search/anna/internal/safe"
)

type Vector = []float32

// Node is a node in the graph.
type Node[K cmp.Ordered] struct {
	Key   K
	Value Vector
}

func MakeNode[K cmp.Ordered](key K, vec Vector) Node[K] {
	return Node[K]{Key: key, Value: vec}
}

// SearchResult is one hit of SearchEf: a key and its distance to the query.
type SearchResult[K cmp.Ordered] struct {
	Key      K
	Distance float32
}

// prefetchPerVector is how many cache lines of each neighbor's vector the
// layer search prefetches before computing distances. The hardware
// prefetcher follows on from there; more lines only crowd the fill buffers
// (measured on 28k×384 at ef=64, CPU time per query: none 1.00, 1-4 lines
// 0.91, the whole vector 1.07).
const prefetchPerVector = 4

const (
	defaultM              = 16
	defaultEfSearch       = 20
	defaultEfConstruction = 200
	// maxLevels caps the level draw; with Ml <= 0.5 a level above this has
	// probability < 2^-31.
	maxLevels = 32
	// compactFraction: once tombstones exceed 1/compactFraction of all
	// slots, Delete repairs the graph and drops them.
	compactFraction = 4
)

// Graph is a Hierarchical Navigable Small World graph (Malkov & Yashunin,
// arXiv:1603.09320).
//
// All public parameters must be set before adding nodes to the graph; zero
// values get the defaults documented on each field. A Graph is safe for
// concurrent use: Search, Lookup, Len and Export take a read lock, Add,
// Delete and Import a write lock.
//
// K is cmp.Ordered instead of comparable so that it can be encoded by Export.
type Graph[K cmp.Ordered] struct {
	// Distance is the distance function used to compare embeddings
	// (nil: CosineDistance). Use DotDistance for L2-normalised vectors.
	Distance DistanceFunc

	// Rng is used for level generation. It may be set to a deterministic value
	// for reproducibility. Note that deterministic number generation can lead to
	// degenerate graphs when exposed to adversarial inputs.
	Rng *rand.Rand

	// KeyLevels draws each node's level from a hash (FNV-1a) of its key
	// instead of Rng: the same nodes added in the same order give the same
	// graph in any process, and a re-added key keeps its level. anna's
	// dense index uses it so that evaluations and mining are reproducible.
	KeyLevels bool

	// KeyHash, when set, is the hash KeyLevels draws a node's level from in
	// place of FNV-1a of the key's text. anna's dense index keys nodes by
	// numbers and hashes the document ID behind them, so that a level does
	// not depend on the number a document happened to get. It is called
	// under the graph's write lock, during Add.
	KeyHash func(K) uint64

	// M is the maximum number of neighbors kept per node on the upper layers;
	// the base layer keeps 2*M (as in the paper and hnswlib). Default 16.
	// It is fixed by the first Add.
	M int

	// Ml is the level generation factor: the probability that a node also
	// appears on the next layer up. Zero means 1/M (the paper's choice).
	Ml float64

	// EfSearch is the size of the dynamic candidate list at query time
	// (at least k is always used). Default 20; higher improves recall at
	// the expense of speed.
	EfSearch int

	// EfConstruction is the size of the candidate list when inserting.
	// Default 200; higher gives a better graph and slower inserts.
	EfConstruction int

	// Quantize is QuantizeNone (float32 vectors, the default) or
	// QuantizeInt8: the graph is built and searched over int8 codes of
	// the vectors and a search's candidates are re-scored with the float
	// vectors (see quant.go). Int8 needs DotDistance (L2-normalised
	// vectors). It is fixed by the first Add; Import takes it from the
	// stream.
	Quantize string

	// Workers is how many goroutines Add spreads its inserts over (<= 0:
	// GOMAXPROCS). The graph built does not depend on it (see addBatch).
	Workers int

	mu sync.RWMutex

	// Fixed by the first insert (and reset when the graph becomes empty).
	dim    int
	m, m0  int
	levelP float64

	// Per internal id (dense, insertion order; ids are renumbered by
	// compact).
	keys []K
	// Float vectors: those of ids below nMapped in mapped (a file mapping,
	// only in quantized graphs loaded with ImportOptions.File), the others
	// in vecs, (id-nMapped)*dim ... (id-nMapped+1)*dim.
	vecs    []float32
	mapped  []float32
	nMapped int
	mapping *fileMapping
	// quant: Quantize is QuantizeInt8; codes holds id*dim ... (id+1)*dim.
	quant   bool
	qz      quantizer
	codes   []int8
	levels  []uint8
	deleted []bool
	// links0 holds the base layer: m0+1 slots per node, the first one the
	// neighbor count.
	links0 []uint32
	// upper[id] holds layers 1..levels[id], m+1 slots per layer like links0.
	upper [][]uint32

	ids      map[K]uint32 // live keys only
	nDeleted int
	// sinceReconnect counts nodes inserted since the last reconnect.
	sinceReconnect int
	entry          uint32
	maxLevel       int // -1 when there are no slots

	visitedPool sync.Pool
}

func defaultRand() *rand.Rand {
	return rand.New(rand.NewSource(time.Now().UnixNano()))
}

// NewGraph returns a new graph with default parameters (cosine distance,
// M=16, EfSearch=20, EfConstruction=200).
func NewGraph[K cmp.Ordered]() *Graph[K] {
	return &Graph[K]{
		M:              defaultM,
		Distance:       CosineDistance,
		EfSearch:       defaultEfSearch,
		EfConstruction: defaultEfConstruction,
		Rng:            defaultRand(),
	}
}

func (g *Graph[K]) distance() DistanceFunc {
	if g.Distance == nil {
		return CosineDistance
	}
	return g.Distance
}

func (g *Graph[K]) efConstruction() int {
	if g.EfConstruction > 0 {
		return g.EfConstruction
	}
	return defaultEfConstruction
}

func (g *Graph[K]) efSearch() int {
	if g.EfSearch > 0 {
		return g.EfSearch
	}
	return defaultEfSearch
}

// setup fixes the structural parameters at the first insert. It panics on
// a Quantize it does not know or cannot apply.
func (g *Graph[K]) setup(dim int) {
	switch g.Quantize {
	case QuantizeNone:
		g.quant = false
	case QuantizeInt8:
		if name, _ := distanceFuncToName(g.distance()); name != "dot" {
			panic("hnsw: Quantize int8 needs DotDistance (L2-normalised vectors)")
		}
		g.quant = true
	default:
		panic(fmt.Sprintf("hnsw: unknown Quantize %q (want %q or %q)", g.Quantize, QuantizeNone, QuantizeInt8))
	}
	g.qz = quantizer{}
	g.dim = dim
	g.m = g.M
	if g.m <= 0 {
		g.m = defaultM
	}
	if g.m < 2 {
		g.m = 2
	}
	g.m0 = 2 * g.m
	g.levelP = g.Ml
	if g.levelP <= 0 || g.levelP >= 1 {
		g.levelP = 1 / float64(g.m)
	}
	if g.Rng == nil {
		g.Rng = defaultRand()
	}
	if g.ids == nil {
		g.ids = make(map[K]uint32)
	}
	g.maxLevel = -1
}

// reset drops every node; parameters are taken afresh at the next Add.
func (g *Graph[K]) reset() {
	g.dim = 0
	g.keys, g.vecs, g.levels, g.deleted, g.links0, g.upper = nil, nil, nil, nil, nil, nil
	g.mapped, g.nMapped, g.mapping = nil, 0, nil
	g.codes, g.qz = nil, quantizer{}
	g.ids = nil
	g.nDeleted = 0
	g.entry = 0
	g.maxLevel = -1
}

// randomLevel draws a level from the geometric distribution P(l) = p^l (1-p),
// from Rng or, with KeyLevels, from a hash of the key.
func (g *Graph[K]) randomLevel(key K) int {
	var u float64
	if g.KeyLevels {
		var x uint64
		if g.KeyHash != nil {
			x = g.KeyHash(key)
		} else {
			h := fnv.New64a()
			h.Write(fmt.Append(nil, key))
			x = h.Sum64()
		}
		// FNV's high bits are uneven for short, similar keys: mix them
		// (splitmix64's finalizer) before taking a uniform draw.
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		x ^= x >> 31
		u = float64(x>>11) / (1 << 53)
	} else {
		u = g.Rng.Float64()
	}
	if u <= 0 {
		u = math.SmallestNonzeroFloat64
	}
	l := int(math.Log(u) / math.Log(g.levelP))
	if l < 0 {
		l = 0
	}
	if l >= maxLevels {
		l = maxLevels - 1
	}
	return l
}

// vec returns the float vector of id (aliasing the storage).
func (g *Graph[K]) vec(id uint32) []float32 {
	if int(id) < g.nMapped {
		o := int(id) * g.dim
		return g.mapped[o : o+g.dim : o+g.dim]
	}
	o := (int(id) - g.nMapped) * g.dim
	return g.vecs[o : o+g.dim : o+g.dim]
}

// code returns the int8 codes of id (quantized graphs).
func (g *Graph[K]) code(id uint32) []int8 {
	o := int(id) * g.dim
	return g.codes[o : o+g.dim : o+g.dim]
}

// newQuery prepares f for qdist: in a quantized graph p and c0, and p
// quantized to int8 (quantizeQuery), in vs's scratch.
func (g *Graph[K]) newQuery(f []float32, vs *visitedSet) query {
	q := query{f: f, dist: g.distance()}
	if g.quant {
		q.p = vs.scratch(g.dim)
		q.c0 = g.qz.prepare(q.p, f)
		q.quantizeQuery(vs.scratchI8(g.dim))
	}
	return q
}

// nodeQuery prepares node id's vector for qdist: its float vector, or in
// a quantized graph what its codes decode to (in p).
func (g *Graph[K]) nodeQuery(id uint32, p []float32) query {
	if g.quant {
		q := query{dist: DotDistance, p: p[:g.dim]}
		q.c0 = g.qz.prepareCodes(q.p, g.code(id))
		return q
	}
	return query{f: g.vec(id), dist: g.distance()}
}

// exactQuery is a query whose distances are computed from the float
// vectors also in a quantized graph.
func (g *Graph[K]) exactQuery(f []float32) query {
	return query{f: f, dist: g.distance()}
}

// qdist is q's distance to node id: over the codes for a query prepared
// for a quantized graph, else over the float vectors.
func (g *Graph[K]) qdist(q *query, id uint32) float32 {
	o := int(id) * g.dim
	if q.s != nil {
		return 1 - q.c0 - q.ps*float32(dotI8(q.a, q.s, g.codes[o:o+g.dim:o+g.dim]))
	}
	if q.p != nil {
		return 1 - q.c0 - dotF32I8(q.p, g.codes[o:o+g.dim:o+g.dim])
	}
	if g.nMapped == 0 {
		return q.dist(q.f, g.vecs[o:o+g.dim:o+g.dim])
	}
	return q.dist(q.f, g.vec(id))
}

// links returns the neighbor list of id at level (aliasing the storage).
func (g *Graph[K]) links(id uint32, level int) []uint32 {
	if level == 0 {
		base := int(id) * (g.m0 + 1)
		n := int(g.links0[base])
		return g.links0[base+1 : base+1+n]
	}
	u := g.upper[id]
	off := (level - 1) * (g.m + 1)
	n := int(u[off])
	return u[off+1 : off+1+n]
}

func (g *Graph[K]) setLinks(id uint32, level int, nb []cand) {
	var dst []uint32
	if level == 0 {
		base := int(id) * (g.m0 + 1)
		dst = g.links0[base : base+g.m0+1]
	} else {
		off := (level - 1) * (g.m + 1)
		dst = g.upper[id][off : off+g.m+1]
	}
	dst[0] = uint32(len(nb))
	for i, c := range nb {
		dst[i+1] = c.id
	}
}

func (g *Graph[K]) appendLink(id uint32, level int, nb uint32) {
	var dst []uint32
	if level == 0 {
		base := int(id) * (g.m0 + 1)
		dst = g.links0[base : base+g.m0+1]
	} else {
		off := (level - 1) * (g.m + 1)
		dst = g.upper[id][off : off+g.m+1]
	}
	n := dst[0]
	dst[n+1] = nb
	dst[0] = n + 1
}

func (g *Graph[K]) maxLinks(level int) int {
	if level == 0 {
		return g.m0
	}
	return g.m
}

func (g *Graph[K]) getVisited() *visitedSet {
	vs, _ := g.visitedPool.Get().(*visitedSet)
	if vs == nil {
		vs = &visitedSet{}
	}
	vs.reset(len(g.keys))
	return vs
}

// greedy walks level from ep to the closest node it can reach by always
// moving to a strictly closer neighbor (the ef=1 search of the upper
// layers).
func (g *Graph[K]) greedy(q *query, ep cand, level int) cand {
	for changed := true; changed; {
		changed = false
		for _, nb := range g.links(ep.id, level) {
			if d := g.qdist(q, nb); d < ep.dist {
				ep = cand{nb, d}
				changed = true
			}
		}
	}
	return ep
}

// searchLayer is the paper's SEARCH-LAYER: a best-first search from ep that
// stops when the closest unexpanded candidate is farther than the worst of
// the ef best results found. Tombstones are always traversed (they keep the
// graph connected until compaction) but with liveOnly they never enter the
// results. The result is sorted by increasing distance.
//
// With accept (which needs liveOnly), every node is still traversed but
// only the live ones whose key accept admits enter the results: the
// filtered search of SearchFilter. The stopping rule is unchanged and
// keeps working when few nodes are accepted: while fewer than ef results
// have been found every neighbour reached is a candidate, so the search
// expands until it holds ef accepted nodes or has run out of reachable
// ones.
//
// Upstream's version stopped as soon as one expansion did not improve the
// single best distance and truncated the candidate heap by removing its
// last array element (not its worst element), which is where its recall
// went.
func (g *Graph[K]) searchLayer(q *query, ep cand, ef, level int, liveOnly bool, accept func(K) bool, vs *visitedSet) []cand {
	cands := make(minHeap, 0, ef*2)
	res := make(maxHeap, 0, ef+1)
	vs.visit(ep.id)
	cands.push(ep)
	if g.admits(ep.id, liveOnly, accept) {
		res.push(ep)
	}
	for len(cands) > 0 {
		c := cands.pop()
		if len(res) >= ef && c.dist > res[0].dist {
			break
		}
		if hasPrefetch && level == 0 && len(cands) > 0 {
			// The link list the next expansion will likely read (unless
			// this one finds a closer candidate): as many lines as its m0+1
			// slots fill. Its load overlaps this expansion's distances.
			prefetchUint32(&g.links0[int(cands[0].id)*(g.m0+1)], (g.m0+16)/16)
		}
		todo := vs.todo[:0]
		for _, nb := range g.links(c.id, level) {
			if !vs.visit(nb) {
				todo = append(todo, nb)
			}
		}
		vs.todo = todo
		if hasPrefetch {
			if q.p != nil {
				lines := (g.dim + 63) / 64
				for _, nb := range todo {
					prefetchBytes(&g.codes[int(nb)*g.dim], lines)
				}
			} else {
				for _, nb := range todo {
					g.prefetchVec(nb)
				}
			}
		}
		for _, nb := range todo {
			d := g.qdist(q, nb)
			if len(res) < ef || d < res[0].dist {
				cands.push(cand{nb, d})
				if g.admits(nb, liveOnly, accept) {
					res.push(cand{nb, d})
					if len(res) > ef {
						res.pop()
					}
				}
			}
		}
	}
	return res.sorted()
}

// prefetchVec starts loading the first prefetchPerVector cache lines of
// node id's float vector.
func (g *Graph[K]) prefetchVec(id uint32) {
	prefetchLines(&g.vec(id)[0], min(prefetchPerVector, (g.dim+15)/16))
}

// admits reports whether searchLayer may return node id.
func (g *Graph[K]) admits(id uint32, liveOnly bool, accept func(K) bool) bool {
	if liveOnly && g.deleted[id] {
		return false
	}
	return accept == nil || accept(g.keys[id])
}

// selectNeighbors is the paper's heuristic (Algorithm 4, as in hnswlib):
// walking candidates from closest to farthest, keep one only if it is closer
// to the base than to every neighbor already kept. This keeps links pointing
// in diverse directions, which is what makes clustered data navigable.
// sorted must be ordered by increasing distance to the base. p is dim
// floats of scratch.
func (g *Graph[K]) selectNeighbors(sorted []cand, m int, p []float32) []cand {
	if len(sorted) <= m {
		return sorted
	}
	sel := make([]cand, 0, m)
	for _, c := range sorted {
		if len(sel) >= m {
			break
		}
		if len(sel) == 0 {
			sel = append(sel, c)
			continue
		}
		cq := g.nodeQuery(c.id, p)
		good := true
		for _, s := range sel {
			if g.qdist(&cq, s.id) < c.dist {
				good = false
				break
			}
		}
		if good {
			sel = append(sel, c)
		}
	}
	return sel
}

// connect adds a link nb -> id at level, re-running the heuristic over nb's
// links when its list is full. p is dim floats of scratch.
func (g *Graph[K]) connect(nb, id uint32, d float32, level int, p []float32) {
	cur := g.links(nb, level)
	maxM := g.maxLinks(level)
	if slices.Contains(cur, id) {
		return
	}
	if len(cur) < maxM {
		g.appendLink(nb, level, id)
		return
	}
	nq := g.nodeQuery(nb, p)
	cs := make([]cand, 0, len(cur)+1)
	for _, x := range cur {
		cs = append(cs, cand{x, g.qdist(&nq, x)})
	}
	if g.quant {
		// The same kind of distance as the others' (decoded nb to codes):
		// d, the new node's float vector to nb's codes, differs from it by
		// quantization noise, and on duplicates that noise alone would
		// decide which of two equal vectors keeps the link.
		d = g.qdist(&nq, id)
	}
	cs = append(cs, cand{id, d})
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) })
	g.setLinks(nb, level, g.selectNeighbors(cs, maxM, p))
}

func (g *Graph[K]) assertDims(n Vector) {
	if len(g.keys) == 0 {
		return
	}
	if g.dim != len(n) {
		panic(fmt.Sprint("embedding dimension mismatch: ", g.dim, " != ", len(n)))
	}
}

// Dims returns the number of dimensions in the graph, or
// 0 if the graph is empty.
func (g *Graph[K]) Dims() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if len(g.ids) == 0 {
		return 0
	}
	return g.dim
}

// Add inserts nodes into the graph.
// If another node with the same key exists, it is replaced (upstream
// panicked with "node not added"). The vectors are copied. Reachability
// is repaired once per len/32 nodes added (see reconnect); call Reconnect
// after a batch of Adds to have every live node reachable at once.
// It panics if a vector's dimension differs from the graph's, before
// inserting any of nodes.
func (g *Graph[K]) Add(nodes ...Node[K]) {
	if len(nodes) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ids) == 0 && len(g.keys) > 0 {
		// Only tombstones left: start afresh.
		g.reset()
	}
	dim := g.dim
	if len(g.keys) == 0 {
		dim = len(nodes[0].Value)
	}
	for _, n := range nodes {
		if len(n.Value) != dim || dim == 0 {
			panic(fmt.Sprint("embedding dimension mismatch: ", dim, " != ", len(n.Value)))
		}
	}
	if len(g.keys) == 0 {
		g.setup(dim)
	}
	for rest := nodes; len(rest) > 0; {
		b := min(len(rest), batchSize)
		g.addBatch(rest[:b])
		rest = rest[b:]
	}
	compacted := g.maybeCompact()
	// Repair reachability (see reconnect) after a compaction, and otherwise
	// once per len/reconnectEvery inserted nodes, so that its walk of the
	// graph costs a constant share of the inserts. Reconnect repairs it at
	// once (internal/index/dense calls it at the end of each of its Adds).
	g.sinceReconnect += len(nodes)
	if compacted || g.sinceReconnect*reconnectEvery >= len(g.keys) {
		g.reconnect()
		g.sinceReconnect = 0
	}
}

// reconnectEvery: see Add.
const reconnectEvery = 32

// Reconnect makes every live node reachable from the entry point on the
// base layer (see reconnect); Add does it only now and then.
func (g *Graph[K]) Reconnect() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ids) > 0 && g.sinceReconnect > 0 {
		g.reconnect()
		g.sinceReconnect = 0
	}
}

// batchSize is how many nodes addBatch inserts together (Add cuts its
// nodes into batches of this many). It is fixed, not derived from Workers,
// so that the graph built does not depend on the number of cores.
const batchSize = 256

// addBatch inserts nodes (at most batchSize of them), spread over Workers
// goroutines. It runs under the write lock.
//
// The batch is inserted in three phases, each of which gives the same
// result whatever the number of goroutines, so the graph depends only on
// the nodes and the order they come in (as a serial build does):
//
//  1. serially, every node gets its slot (an upserted key's old node
//     becomes a tombstone), its level and its codes;
//  2. in parallel, each node searches the graph as it was before the batch
//     (the paper's INSERT: greedy descent, then a layer search with
//     EfConstruction per level), adds to each layer's candidates the
//     nodes of the batch before it on that layer (by exact distance: they
//     are not in the graph yet, so the search cannot find them; this is
//     batchSize/2 distances per node), picks its neighbours with the
//     heuristic and sets its own links. Nothing it reads is written in this
//     phase: the searches walk only nodes linked before the batch, and a
//     node's own links are written by its goroutine only;
//  3. the reverse links: every (neighbour ← node) request of the batch is
//     sorted by neighbour, then by node, and each neighbour's requests are
//     applied in that order by one goroutine (connect: append, or re-run
//     the heuristic over a full list), different neighbours in parallel.
//
// Then the entry point moves, in batch order, to the first node above the
// top level. Compared with one node at a time, a node of the batch misses
// only what the batch's earlier nodes would have changed in the graph it
// searches, and sees those nodes themselves exactly.
func (g *Graph[K]) addBatch(nodes []Node[K]) {
	first := uint32(len(g.keys))
	for _, n := range nodes {
		if old, ok := g.ids[n.Key]; ok {
			g.deleted[old] = true
			g.nDeleted++
		}
		id := uint32(len(g.keys))
		level := g.randomLevel(n.Key)
		g.keys = append(g.keys, n.Key)
		g.vecs = append(g.vecs, n.Value...)
		g.levels = append(g.levels, uint8(level))
		g.deleted = append(g.deleted, false)
		g.links0 = append(g.links0, make([]uint32, g.m0+1)...)
		var up []uint32
		if level > 0 {
			up = make([]uint32, level*(g.m+1))
		}
		g.upper = append(g.upper, up)
		g.ids[n.Key] = id
	}
	if g.quant {
		g.encode(first)
	}

	entry0, top0 := g.entry, g.maxLevel
	efc := g.efConstruction()
	n := len(nodes)
	chosen := make([][][]cand, n) // per node, per level: its neighbours
	g.parallel(n, func(w *worker, b int) {
		id := first + uint32(b)
		level := int(g.levels[id])
		q := g.newQuery(g.vec(id), w.vs)
		peers := w.peers[:0]
		for j := uint32(0); j < uint32(b); j++ {
			peers = append(peers, cand{first + j, g.qdist(&q, first+j)})
		}
		w.peers = peers
		var ep cand
		if top0 >= 0 {
			ep = cand{entry0, g.qdist(&q, entry0)}
			for l := top0; l > level; l-- {
				ep = g.greedy(&q, ep, l)
			}
		}
		per := make([][]cand, level+1)
		for l := level; l >= 0; l-- {
			var cs []cand
			if l <= top0 {
				w.vs.reset(len(g.keys))
				// Tombstones may be linked to: they keep the graph
				// connected and compaction relinks around them.
				cs = g.searchLayer(&q, ep, efc, l, false, nil, w.vs)
				if len(cs) > 0 {
					ep = cs[0]
				}
			}
			added := false
			for _, p := range peers {
				if int(g.levels[p.id]) >= l {
					cs = append(cs, p)
					added = true
				}
			}
			if added {
				slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) })
				if len(cs) > efc {
					cs = cs[:efc]
				}
			}
			nb := slices.Clone(g.selectNeighbors(cs, g.m, w.nbuf))
			g.setLinks(id, l, nb)
			per[l] = nb
		}
		chosen[b] = per
	})

	type request struct {
		nb, id uint32
		dist   float32
		level  int
	}
	var reqs []request
	for b, per := range chosen {
		for l, nbs := range per {
			for _, c := range nbs {
				reqs = append(reqs, request{c.id, first + uint32(b), c.dist, l})
			}
		}
	}
	slices.SortFunc(reqs, func(a, b request) int {
		if c := cmp.Compare(a.nb, b.nb); c != 0 {
			return c
		}
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.level, b.level)
	})
	var groups []int // start of each neighbour's requests, and len(reqs)
	for i := range reqs {
		if i == 0 || reqs[i].nb != reqs[i-1].nb {
			groups = append(groups, i)
		}
	}
	groups = append(groups, len(reqs))
	g.parallel(len(groups)-1, func(w *worker, gi int) {
		for _, r := range reqs[groups[gi]:groups[gi+1]] {
			g.connect(r.nb, r.id, r.dist, r.level, w.nbuf)
		}
	})

	for b := range nodes {
		id := first + uint32(b)
		if level := int(g.levels[id]); level > g.maxLevel {
			g.entry, g.maxLevel = id, level
		}
	}
}

// encode gives the nodes from first on their codes, fitting the
// quantizer's ranges first when they have never been fitted or the graph
// has doubled since (until refitUntil vectors; see quant.go), in which
// case every node is encoded again.
func (g *Graph[K]) encode(first uint32) {
	n := len(g.keys)
	g.codes = append(g.codes, make([]int8, (n-int(first))*g.dim)...)
	if g.qz.trainedOn == 0 || (g.qz.trainedOn < refitUntil && n >= 2*g.qz.trainedOn) {
		g.qz = fitQuantizer(n, g.dim, func(i int) []float32 { return g.vec(uint32(i)) })
		first = 0
	}
	const chunk = 1024
	todo := n - int(first)
	g.parallel((todo+chunk-1)/chunk, func(_ *worker, c int) {
		for i := int(first) + c*chunk; i < min(n, int(first)+(c+1)*chunk); i++ {
			g.qz.encode(g.code(uint32(i)), g.vec(uint32(i)))
		}
	})
}

// worker is one goroutine's scratch in parallel.
type worker struct {
	vs    *visitedSet
	nbuf  []float32
	peers []cand
}

func (g *Graph[K]) workers() int {
	if g.Workers > 0 {
		return g.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// parallel calls f(w, i) for i in [0, n) on up to Workers goroutines, each
// with its own scratch w, and returns when all calls have. A panic of f on
// a worker is recovered there and raised again here, on the caller's
// goroutine, so that it does not end the process: the Graph's caller gets
// it (package dense turns it into an error).
func (g *Graph[K]) parallel(n int, f func(w *worker, i int)) {
	if n <= 0 {
		return
	}
	run := func(next *atomic.Int64) {
		w := &worker{vs: g.getVisited(), nbuf: make([]float32, g.dim)}
		defer g.visitedPool.Put(w.vs)
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			f(w, i)
		}
	}
	var next atomic.Int64
	nw := min(g.workers(), n)
	if nw <= 1 {
		run(&next)
		return
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range nw {
		wg.Go(func() {
			if err := safe.Call(func() error { run(&next); return nil }); err != nil {
				once.Do(func() { first = err })
				next.Store(int64(n)) // the others stop at their next index
			}
		})
	}
	wg.Wait()
	safe.Repanic(first)
}

// Search finds the k nearest neighbors from the target node, closest first.
// The returned vectors are copies.
func (g *Graph[K]) Search(near Vector, k int) []Node[K] {
	g.mu.RLock()
	defer g.mu.RUnlock()
	res := g.search(near, k, g.efSearch(), nil)
	out := make([]Node[K], len(res))
	for i, r := range res {
		out[i] = Node[K]{Key: g.keys[r.id], Value: slices.Clone(g.vec(r.id))}
	}
	return out
}

// SearchEf finds the k nearest neighbors of near with a candidate list of
// max(ef, k) (ef <= 0: the graph's EfSearch), closest first, with their
// distances.
func (g *Graph[K]) SearchEf(near Vector, k, ef int) []SearchResult[K] {
	return g.SearchFilter(near, k, ef, nil)
}

// SearchFilter is SearchEf restricted to the live nodes whose key accept
// admits (nil: all of them). The upper layers are descended as usual; on
// the base layer the search walks through every node, admitted or not,
// but collects only admitted ones, and keeps expanding until it holds
// max(ef, k) of them or has reached every node. So it returns k results
// whenever k live nodes are admitted, and exactly the admitted nodes when
// there are fewer than k.
//
// Cost: when a fraction s of the nodes is admitted, independently of
// where they lie, the max(ef, k) admitted results found are about the
// max(ef, k)/s nearest nodes of all, and the search expands about as many
// nodes as an unfiltered search with a candidate list of max(ef, k)/s: the
// cost of an unfiltered search times 1/s, up to a walk of the whole graph
// (every live node's distance computed once) when max(ef, k)/s reaches Len.
// An exact scan of the admitted nodes (ScanKeys) costs s·Len distances, so
// it is the cheaper one below s ≈ sqrt(c·ef/Len), c being the distances an
// unfiltered search computes per unit of ef (internal/index/dense measures where).
//
// accept is called at most once per live node reached, under the graph's
// read lock: it must be cheap and must not call the graph.
func (g *Graph[K]) SearchFilter(near Vector, k, ef int, accept func(K) bool) []SearchResult[K] {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if ef <= 0 {
		ef = g.efSearch()
	}
	return g.results(g.search(near, k, ef, accept))
}

// ScanKeys returns the k nodes among keys nearest to near by exact search,
// closest first, with their distances. Keys that are not live nodes are
// skipped, a repeated key counts once. No vector is copied.
func (g *Graph[K]) ScanKeys(near Vector, keys []K, k int) []SearchResult[K] {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if k <= 0 || len(g.ids) == 0 {
		return nil
	}
	g.assertDims(near)
	dist := g.distance()
	vs := g.getVisited()
	defer g.visitedPool.Put(vs)
	res := make(maxHeap, 0, min(k, len(keys))+1)
	for _, key := range keys {
		if id, ok := g.ids[key]; ok && !vs.visit(id) {
			res.keepBest(cand{id, dist(near, g.vec(id))}, k)
		}
	}
	return g.results(res.sorted())
}

func (g *Graph[K]) results(res []cand) []SearchResult[K] {
	out := make([]SearchResult[K], len(res))
	for i, r := range res {
		out[i] = SearchResult[K]{Key: g.keys[r.id], Distance: r.dist}
	}
	return out
}

func (g *Graph[K]) search(q []float32, k, ef int, accept func(K) bool) []cand {
	if k <= 0 || len(g.ids) == 0 {
		return nil
	}
	g.assertDims(q)
	dist := g.distance()
	if len(g.keys) <= max(ef, k) {
		// The search would visit about every node anyway; scanning them is
		// as fast, exact, and returns every live node when k >= Len even
		// if pruning left one without in-links.
		return g.scan(q, k, dist, accept)
	}
	vs := g.getVisited()
	defer g.visitedPool.Put(vs)
	qq := g.newQuery(q, vs)
	ep := cand{g.entry, g.qdist(&qq, g.entry)}
	for l := g.maxLevel; l > 0; l-- {
		ep = g.greedy(&qq, ep, l)
	}
	res := g.searchLayer(&qq, ep, max(ef, k), 0, true, accept, vs)
	if g.quant {
		// Re-score the whole candidate list with the float vectors: the
		// order and the distances returned are exact. The vectors lie far
		// apart (and at a million, mostly outside the CPU's caches), so
		// their loads are started together first.
		if hasPrefetch {
			for i := range res {
				g.prefetchVec(res[i].id)
			}
		}
		for i := range res {
			res[i].dist = dist(q, g.vec(res[i].id))
		}
		slices.SortFunc(res, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) })
	}
	if len(res) > k {
		res = res[:k]
	}
	return res
}

// scan is exact search over the live nodes that accept admits (nil: all).
func (g *Graph[K]) scan(q []float32, k int, dist DistanceFunc, accept func(K) bool) []cand {
	res := make(maxHeap, 0, k+1)
	for i := range g.keys {
		if g.admits(uint32(i), true, accept) {
			res.keepBest(cand{uint32(i), dist(q, g.vec(uint32(i)))}, k)
		}
	}
	return res.sorted()
}

// Len returns the number of nodes in the graph.
func (g *Graph[K]) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.ids)
}

// Delete removes a node from the graph by key and reports whether it was
// there. The node becomes a tombstone: it is never returned again but still
// routes searches until enough tombstones accumulate, when the graph is
// repaired around them and they are dropped (see compact).
func (g *Graph[K]) Delete(key K) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, ok := g.ids[key]
	if !ok {
		return false
	}
	delete(g.ids, key)
	g.deleted[id] = true
	g.nDeleted++
	if g.maybeCompact() {
		g.reconnect()
	}
	return true
}

// maybeCompact compacts when tombstones pass the threshold and reports
// whether it did.
func (g *Graph[K]) maybeCompact() bool {
	if len(g.ids) == 0 {
		g.reset()
		return false
	}
	if g.nDeleted > 0 && g.nDeleted*compactFraction > len(g.keys) {
		g.compact()
		return true
	}
	return false
}

// Lookup returns a copy of the vector with the given key.
func (g *Graph[K]) Lookup(key K) (Vector, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	id, ok := g.ids[key]
	if !ok {
		return nil, false
	}
	return slices.Clone(g.vec(id)), true
}

// Keys returns the live keys in unspecified order.
func (g *Graph[K]) Keys() []K {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]K, 0, len(g.ids))
	for k := range g.ids {
		out = append(out, k)
	}
	return out
}
