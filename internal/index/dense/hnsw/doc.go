// Package hnsw is a Hierarchical Navigable Small World graph (Malkov &
// Yashunin, arXiv:1603.09320) for approximate nearest-neighbour search over
// float32 vectors: anna's rewrite of github.com/coder/hnsw v0.6.1 behind
// that package's API (CC0-1.0: LICENSE and NOTICE are kept; README.md lists
// each upstream bug, its cause and the fix, and the API added). It is a
// package of anna's module, not a replace directive, so that programs that
// `go get` anna build it as it is. internal/index/dense is its one user in anna: it
// keys nodes by passage number, uses DotDistance on L2-normalised vectors
// and, optionally, int8 codes.
//
// # Layout
//
// Nodes get dense uint32 ids in insertion order. The float vectors lie in
// one slab (dim floats per id), the base-layer links in another (2·M
// slots and a count per id), the links of the upper layers per node (M
// slots and a count per layer). With Quantize QuantizeInt8 every vector is
// also kept as int8 codes, over which the graph is built and searched;
// a search's final candidates are re-scored with the float vectors, so the
// order and distances it returns are exact (quant.go). Export writes
// format 3 (the layout is on ExportWith); Import also reads formats 2 and
// 1 (upstream's).
//
// # Invariants (verified by Check)
//
//   - The per-node arrays agree in length; the key map points at the live
//     slots holding its keys; the tombstone count matches the flags.
//   - The entry point is a slot on the top level, and no node is above it.
//   - Every neighbour list holds at most 2·M links on the base layer and M
//     above, names existing slots other than its own, none twice, and only
//     slots present on that level.
//   - Every float vector is finite (one mapped from a file is not read);
//     in a quantized graph every code is in [-127, 127] and the
//     quantizer's ranges are finite.
//   - Every live node is reachable from the entry point on the base layer:
//     each Add repairs reachability once per len/32 nodes inserted and after
//     a compaction (reconnect), Reconnect does it at once. A search that
//     walks the graph finds only reachable nodes.
//
// Besides: dim, M and Quantize are fixed by the first Add and taken afresh
// once the graph is empty. Add upserts (a re-added key's old node becomes
// a tombstone); Delete makes a node a tombstone, which still routes
// searches but is never returned; once tombstones pass a quarter of the
// slots the graph is relinked around them and they are dropped, renumbering
// the ids (compact). The graph built depends only on the nodes and the
// order they are added in (and on Rng, or with KeyLevels on the keys), not
// on Workers. A search over a graph of at most max(ef, k) slots scans it
// exactly.
//
// # Concurrency
//
// A Graph holds a sync.RWMutex: Search, SearchEf, SearchFilter, ScanKeys,
// Lookup, Len, Dims, Keys, Export and Check take the read lock, so any
// number run at once; Add, Delete, Reconnect, Import and Rekey take the
// write lock. Add spreads a batch's inserts over Workers goroutines while
// it holds the lock; a panic on one of them is raised again on Add's
// goroutine. The exported fields (Distance, M, EfSearch, …) are not
// guarded by the lock: set them before the first Add and do not change
// them while the graph is in use. A DistanceFunc must be safe for concurrent
// use; SearchFilter's accept runs under the read lock and must not call
// the graph.
//
// # Misuse and malformed input
//
// Add panics, before inserting anything, on a vector whose dimension
// differs from the graph's, and on a Quantize it does not know or int8
// without DotDistance; a search with a query of another dimension panics
// (upstream's behaviour; internal/index/dense checks both first and turns a panic
// into an error). A panic inside Add from Distance or KeyHash leaves the
// batch partly inserted: rebuild such a graph. Export refuses a graph
// whose Distance is not one of EuclideanDistance, CosineDistance,
// DotDistance and SquaredEuclideanDistance (the file records its name).
// Import gives an error, never a panic, on malformed input — no count read
// from the stream is allocated before its data arrives (or fits in
// ImportOptions.Size), every link, level, flag, code and the entry point
// are range-checked, a key live twice is refused — and leaves the graph
// empty; it checks structure, not content (a damaged
// vector or an in-range link decodes: internal/index/dense checksums its files).
//
// # Crash behaviour
//
// The graph lives in memory; nothing is written but by Export. SavedGraph.Save
// writes through internal/atomicfile (a temporary file in the same folder,
// fsynced, renamed over Path), so a crash leaves the old file or the new
// one, at worst beside a ".NAME.tmp-*" leftover; LoadSavedGraph of a
// missing path returns an empty graph and creates nothing. With
// ImportOptions.File the float vectors of a quantized graph are mapped
// from the file (private pages: a compaction's writes never reach it), so
// the file must not change while the graph lives; anna replaces its files
// by renaming new ones over them, which leaves a mapped one as it was.
package hnsw
