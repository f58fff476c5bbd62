// Package dense is anna's dense-vector index: an HNSW graph (our fork of
// github.com/coder/hnsw, in internal/index/dense/hnsw) over L2-normalised
// embeddings, scored by cosine similarity, with metadata filters.
//
// # Documents and passages
//
// The index holds documents (Doc), each with one vector per passage and its
// metadata (strings, numbers, lists). The engine cuts a long text into overlapping token windows
// and embeds each; a document ranks by its best passage ("max-passage", as
// in the BEIR and MS MARCO document-ranking literature) mixed with its
// first below BestFrom passages (DocScore: FirstWeight·first +
// (1 − FirstWeight)·best), and a Hit names the best passage. Each passage is a graph node keyed by the document's number
// (a stable uint32 per document, given at its first Add, reused after its
// Delete, smallest first; the graph's compaction renumbers its own nodes,
// never these) in the high 32 bits and the passage in the low 32: a
// document of one passage is one node, as before passages existed. Levels
// are drawn from a hash of the document ID (and the passage number beyond
// the first), so the same documents added the same way give the same graph.
// Search asks the graph for passages and collapses them to documents,
// asking again for twice as many when the passages returned hold fewer than
// k documents (see Search).
//
// # Filters
//
// Metadata is indexed, not checked one document at a time: a roaring
// bitmap of document numbers per key=value (a list value posts each of its
// elements; number values are posted apart from strings, under their
// filter.EncodeNumber keys), kept in step by Add (an upsert replaces the
// document's terms), Delete and Load, and for each key its values in a
// sorted list, so that a prefix or range query is a binary search and a
// walk over the values in range (the list is merged lazily: writes cost
// nothing until the next prefix or range query). A Filter is evaluated
// over these postings (the Postings interface) into the bitmap of matching
// documents; then one of two strategies finds the nearest:
//
//   - a filtered traversal of the graph (hnsw.Graph.SearchFilter): the
//     upper layers are descended as usual, and on the base layer every
//     node is walked through but only passages of matching documents are
//     collected (membership is a bitmap lookup of the node key's high
//     bits, no allocation), until ef of them are found or the graph is
//     exhausted; its cost grows as 1/selectivity;
//   - an exact scan of the matching passages (hnsw.Graph.ScanKeys), which
//     costs one distance per matching passage.
//
// The scan is chosen when m² <= scanFactor·ef·P (m matching passages, P
// all passages, ef the candidate list): the break-even point of the two
// costs, measured (see scanFactor). Either way k documents come back
// whenever k documents match.
//
// # Quantization and parallel inserts
//
// With Config.Quantize "int8" (the default) the graph holds int8 codes of the passage
// vectors (per-dimension ranges) and is built and searched over them; each
// search re-scores its whole candidate list with the float vectors, so the
// scores and the final order are exact cosines (see hnsw's quant.go). A
// loaded quantized index maps the float vectors from its file instead of
// reading them into memory: resident are the codes (a quarter of the
// floats), the links and the tables, plus the pages of the vectors that
// searches have re-scored (the kernel may drop those again). The choice is
// recorded in the file, so a reopened index keeps it whatever the Config
// it was created with. Inserts are spread over GOMAXPROCS goroutines in
// batches whose result does not depend on their number (hnsw.Graph's
// addBatch), so the same documents added the same way still give the same
// graph.
//
// # Persistence
//
// The index is derived data. The engine keeps vectors in storage (bbolt) and
// rebuilds the graph from there when the saved graph is missing or stale
// (Meta.AppliedSeq behind storage); Save and Load only make restarts fast.
// The file (format version 5) holds the document table (IDs, passage
// counts, metadata terms) and the posting lists beside the graph, all under
// one checksum; Load verifies that they agree with each other and with the
// graph. Files of version 2 load as documents of one passage without
// metadata; files before version 4 hold float32 graphs and load as such;
// files before version 5 hold string metadata only.
//
// Crashes: Save writes a temporary file, fsyncs it and renames it over the
// old one, so a crash leaves the old file or the new one, never a torn
// one; a torn or damaged file fails Load's checksum (ErrCorrupt) and the
// engine rebuilds from storage. The checksum covers the float vectors a
// quantized index maps, read once at Load; the mapping is private, so
// nothing the index does writes to the file.
//
// A nil context.Context given to a function of this package is
// context.Background(). A panic in the graph code (on the caller's
// goroutine or a worker) comes back from Add and Search as an error.
package dense

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/index/dense/hnsw"
	"github.com/anna-search/anna/internal/safe"
)

// Defaults (hnswlib's M and efConstruction). Measured recall@10 against
// exact search at EfSearch 64: 0.995 on 100,000 clustered 384-d vectors
// (TestRecall100k; 0.976 at EfSearch 32) and 0.993 on SciFact's MiniLM
// embeddings (TestSciFactRecall), so 64 leaves margin above 0.95.
const (
	DefaultM              = 16
	DefaultEfSearch       = 64
	DefaultEfConstruction = 200
)

// Config.Quantize values. DefaultQuantize is int8: on 100,000 variants of
// SciFact's MiniLM vectors (BenchmarkHNSW1M at 100k, 2 cores) it reached
// the same recall@10 as float32 at every ef (0.9985 against 0.9975 at ef
// 16) at 1.58× the queries per second (18,480 against 11,666), with
// 0.37× the resident memory after Load (64 against 174 MB).
const (
	QuantizeFloat32 = "float32"
	QuantizeInt8    = "int8"
	DefaultQuantize = QuantizeInt8
)

// Config sets the graph's shape. Zero fields take the defaults above; Dim 0
// means "the length of the first vector added".
type Config struct {
	Dim            int // vector length; every Add and Search must match
	M              int // links per node on upper layers (2*M on the base layer)
	EfSearch       int // candidate list size at query time (>= k is always used)
	EfConstruction int // candidate list size while inserting
	// Quantize is QuantizeInt8 ("" means DefaultQuantize, int8) or
	// QuantizeFloat32 (float32 vectors in the graph; see the package doc).
	// A loaded index takes it from its file.
	Quantize string
}

func (c Config) withDefaults() Config {
	if c.M <= 0 {
		c.M = DefaultM
	}
	if c.EfSearch <= 0 {
		c.EfSearch = DefaultEfSearch
	}
	if c.EfConstruction <= 0 {
		c.EfConstruction = DefaultEfConstruction
	}
	if c.Quantize == "" {
		c.Quantize = DefaultQuantize
	}
	return c
}

// Doc is one document: one vector per passage (at least one; the engine
// cuts a long text into overlapping windows and embeds each), and its
// metadata, which filters select on: strings in Meta, numbers and lists in
// MetaValues (see filter.Value).
type Doc struct {
	ID         string
	Vectors    [][]float32
	Meta       map[string]string
	MetaValues map[string]filter.Value
}

// Hit is one search result: a document, its best passage (0-based) and
// the document's score (DocScore: that passage's cosine similarity to the
// query when it is the first or the only one; higher is better).
type Hit struct {
	ID      string
	Passage int
	Score   float32
}

// docEntry is a document number's slot in the document table.
type docEntry struct {
	id       string // "" for a free number
	passages uint32
	meta     []metaTerm // sorted, each once; nil when the document has none
}

// Index is an HNSW index of documents made of passages. It is safe for
// concurrent readers with one writer: Search/Len/Save share a read lock,
// Add/Delete take the write lock, so a search sees an Add batch either
// entirely or not at all.
type Index struct {
	mu  sync.RWMutex
	cfg Config
	g   *hnsw.Graph[uint64] // keyed by nodeKey(document number, passage)

	docs      []docEntry        // by document number
	byID      map[string]uint32 // live documents
	free      *roaring.Bitmap   // free document numbers; the smallest is reused first
	nPassages int               // live passages (graph nodes)
	meta      metaIndex

	keyBuf sync.Pool // *[]uint64 scratch for exact scans
}

// New returns an empty index.
func New(cfg Config) *Index {
	cfg = cfg.withDefaults()
	ix := &Index{cfg: cfg, byID: map[string]uint32{}, free: roaring.New(), meta: newMetaIndex()}
	ix.g = hnsw.NewGraph[uint64]()
	ix.setupGraph(ix.g)
	return ix
}

// setupGraph sets the graph's parameters (those a loaded graph carries are
// overwritten by its own).
func (ix *Index) setupGraph(g *hnsw.Graph[uint64]) {
	// Vectors are normalised on the way in, so 1 - dot is the cosine
	// distance at the price of one dot product.
	g.Distance = hnsw.DotDistance
	// Levels from the document IDs (keyHash): the same documents indexed
	// the same way give the same graph, so evaluations and mining repeat
	// exactly; a document's number plays no part.
	g.KeyLevels = true
	g.KeyHash = ix.keyHash
	g.M = ix.cfg.M
	g.EfSearch = ix.cfg.EfSearch
	g.EfConstruction = ix.cfg.EfConstruction
	g.Quantize = hnsw.QuantizeNone
	if ix.cfg.Quantize == QuantizeInt8 {
		g.Quantize = hnsw.QuantizeInt8
	}
}

// nodeKey is the graph key of a passage: the document number in the high
// 32 bits, the passage in the low ones. A document with one passage is one
// node, as before passages existed.
func nodeKey(doc, passage uint32) uint64 { return uint64(doc)<<32 | uint64(passage) }

func splitKey(key uint64) (doc, passage uint32) { return uint32(key >> 32), uint32(key) }

// keyHash is the hash the graph draws a passage's level from: FNV-1a of
// the document ID for passage 0 (what the graph keyed by ID drew from, so
// single-passage documents get the levels they always had), and of
// ID + "#" + the passage number for the others. The graph calls it during
// Add, under Index's write lock.
func (ix *Index) keyHash(key uint64) uint64 {
	doc, p := splitKey(key)
	h := fnvString(fnvOffset, ix.docs[doc].id)
	if p > 0 {
		h = fnvString(h, "#"+strconv.FormatUint(uint64(p), 10))
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString continues the 64-bit FNV-1a hash h over s (as hash/fnv).
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// Config returns the index's configuration (defaults filled in; Dim is set
// once the first vector is added).
func (ix *Index) Config() Config {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.cfg
}

// addChunk is how many passages Add inserts between context checks.
const addChunk = 256

// maxPassages bounds a document's passages (and what Load accepts).
const maxPassages = 1 << 20

// prepared is a validated document of an Add: normalised copies of its
// vectors, and its metadata terms.
type prepared struct {
	id   string
	vecs [][]float32
	meta []metaTerm
}

// Add inserts documents, replacing every passage and the metadata of an ID
// already present (upsert; a document keeps its number). Vectors are
// copied and L2-normalised, so Score stays a cosine even if a caller passes
// unnormalised vectors; metadata is copied. Within one call a repeated ID
// keeps its last document. Bad input (empty ID, no vectors, wrong
// dimension, zero/NaN/Inf vector, empty metadata key, a NaN or infinite
// metadata number, an ID, key or value over 1 MiB) is rejected before
// anything is inserted. If ctx is
// cancelled midway the documents of the chunks already inserted stay in,
// each whole.
func (ix *Index) Add(ctx context.Context, docs []Doc) (err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if len(docs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dense: add: %w", err)
	}
	if q := ix.cfg.Quantize; q != QuantizeFloat32 && q != QuantizeInt8 {
		return fmt.Errorf("dense: add: unknown Quantize %q (want %q or %q)", q, QuantizeInt8, QuantizeFloat32)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	dim := ix.cfg.Dim
	if dim == 0 && len(docs[0].Vectors) > 0 {
		dim = len(docs[0].Vectors[0])
	}
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		last[d.ID] = i
	}
	batch := make([]prepared, 0, len(last))
	for i, d := range docs {
		if d.ID == "" {
			return fmt.Errorf("dense: add: empty id at index %d", i)
		}
		if len(d.Vectors) == 0 || len(d.Vectors) > maxPassages {
			return fmt.Errorf("dense: add: document %d (id %q) has %d vectors, want 1 to %d", i, d.ID, len(d.Vectors), maxPassages)
		}
		p := prepared{id: d.ID, vecs: make([][]float32, len(d.Vectors))}
		for j, v := range d.Vectors {
			nv, err := normalized(v, dim)
			if err != nil {
				return fmt.Errorf("dense: add: document %d (id %q) vector %d: %w", i, d.ID, j, err)
			}
			p.vecs[j] = nv
		}
		if len(d.ID) > maxString {
			return fmt.Errorf("dense: add: document %d: id of %d bytes (at most %d)", i, len(d.ID), maxString)
		}
		for k, v := range d.MetaValues {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("dense: add: document %d (id %q): metadata key %q: %w", i, d.ID, k, err)
			}
		}
		p.meta = metaTerms(d.Meta, d.MetaValues)
		for _, t := range p.meta {
			if t.key == "" || len(t.key) > maxString || len(t.val) > maxString {
				return fmt.Errorf("dense: add: document %d (id %q): metadata key %q: empty, or key or value longer than %d bytes", i, d.ID, t.key, maxString)
			}
		}
		if last[d.ID] == i {
			batch = append(batch, p)
		}
	}
	ix.cfg.Dim = dim
	// Every live passage is reachable again when Add returns, also when it
	// stops early (hnsw.Graph.Reconnect).
	defer ix.g.Reconnect()
	var nodes []hnsw.Node[uint64]
	for len(batch) > 0 {
		nodes = nodes[:0]
		for len(batch) > 0 && len(nodes) < addChunk {
			nodes = ix.upsert(batch[0], nodes)
			batch = batch[1:]
		}
		ix.g.Add(nodes...)
		if len(batch) > 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("dense: add interrupted: %w", err)
			}
		}
	}
	return nil
}

// upsert records d in the document table and the metadata index, deletes
// the passages an older version had beyond d's, and appends d's passages
// to nodes for the caller to insert (replacing the older version's).
func (ix *Index) upsert(d prepared, nodes []hnsw.Node[uint64]) []hnsw.Node[uint64] {
	num, ok := ix.byID[d.id]
	if ok {
		e := &ix.docs[num]
		for p := uint32(len(d.vecs)); p < e.passages; p++ {
			ix.g.Delete(nodeKey(num, p))
		}
		ix.nPassages -= int(e.passages)
		if !slices.Equal(e.meta, d.meta) {
			ix.meta.remove(num, e.meta)
			ix.meta.add(num, d.meta)
		}
	} else {
		if !ix.free.IsEmpty() {
			num = ix.free.Minimum()
			ix.free.Remove(num)
		} else {
			num = uint32(len(ix.docs))
			ix.docs = append(ix.docs, docEntry{})
		}
		ix.byID[d.id] = num
		ix.meta.add(num, d.meta)
	}
	ix.docs[num] = docEntry{id: d.id, passages: uint32(len(d.vecs)), meta: d.meta}
	ix.nPassages += len(d.vecs)
	for p, v := range d.vecs {
		nodes = append(nodes, hnsw.MakeNode(nodeKey(num, uint32(p)), v))
	}
	return nodes
}

// normalized returns a unit-length copy of v after checking its length and
// values.
func normalized(v []float32, dim int) ([]float32, error) {
	if len(v) != dim {
		return nil, fmt.Errorf("dimension %d, want %d", len(v), dim)
	}
	var ss float64
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("component %d is %v", j, x)
		}
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return nil, errors.New("zero vector has no direction")
	}
	inv := float32(1 / math.Sqrt(ss))
	out := make([]float32, dim)
	for j, x := range v {
		out[j] = x * inv
	}
	return out, nil
}

// Delete removes documents, every passage of each; IDs not in the index
// are ignored.
func (ix *Index) Delete(ids []string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, id := range ids {
		num, ok := ix.byID[id]
		if !ok {
			continue
		}
		e := ix.docs[num]
		for p := uint32(0); p < e.passages; p++ {
			ix.g.Delete(nodeKey(num, p))
		}
		ix.meta.remove(num, e.meta)
		ix.nPassages -= int(e.passages)
		delete(ix.byID, id)
		ix.docs[num] = docEntry{}
		ix.free.Add(num)
	}
	if len(ix.byID) == 0 {
		// The graph has dropped every node (tombstones too): start the
		// numbering afresh.
		ix.docs = nil
		ix.free.Clear()
	}
	return nil
}

// Len returns the number of documents in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byID)
}

// Passages returns the number of passages (graph nodes) in the index.
func (ix *Index) Passages() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.nPassages
}

// Vectors returns copies of the (normalised) passage vectors stored for
// id, in passage order.
func (ix *Index) Vectors(id string) ([][]float32, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	num, ok := ix.byID[id]
	if !ok {
		return nil, false
	}
	out := make([][]float32, ix.docs[num].passages)
	for p := range out {
		if out[p], ok = ix.g.Lookup(nodeKey(num, uint32(p))); !ok {
			return nil, false // Check reports it
		}
	}
	return out, true
}

// Meta returns the metadata indexed for id, as the set of its values: a
// key with one string value in meta, any other in values (one number, or a
// list of the distinct values, strings first in byte order, then numbers
// in increasing order). The order and repeats of a list are not kept.
func (ix *Index) Meta(id string) (meta map[string]string, values map[string]filter.Value, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	num, ok := ix.byID[id]
	if !ok {
		return nil, nil, false
	}
	byKey := map[string][]filter.Value{}
	var keys []string
	for _, t := range ix.docs[num].meta {
		if _, seen := byKey[t.key]; !seen {
			keys = append(keys, t.key)
		}
		v := filter.StringValue(t.val)
		if t.num {
			x, _ := filter.DecodeNumber(t.val)
			v = filter.NumberValue(x)
		}
		byKey[t.key] = append(byKey[t.key], v)
	}
	for _, k := range keys {
		vs := byKey[k]
		if len(vs) == 1 {
			if s, isString := vs[0].Str(); isString {
				if meta == nil {
					meta = map[string]string{}
				}
				meta[k] = s
				continue
			}
		}
		if values == nil {
			values = map[string]filter.Value{}
		}
		if len(vs) == 1 {
			values[k] = vs[0]
		} else {
			values[k] = filter.ListValue(vs...)
		}
	}
	return meta, values, true
}

// HasKey reports whether some document has a value for the metadata key.
func (ix *Index) HasKey(key string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.meta.hasKey(key)
}

// MetaKeys lists the metadata keys of the indexed documents in byte order,
// each with its number of distinct values and, for string values, the top
// values held by the most documents (a key of more than 10,000 values,
// such as a path, gets none).
func (ix *Index) MetaKeys(top int) []KeyStats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.meta.keyStats(top)
}

// IDs returns the IDs of every document in the index, in no particular
// order.
func (ix *Index) IDs() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return slices.Collect(maps.Keys(ix.byID))
}
