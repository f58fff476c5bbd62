package hnsw

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

var byteOrder = binary.LittleEndian

// Limits that keep a corrupt or hostile stream from making Import allocate
// absurd amounts of memory before it notices.
const (
	maxStringLen = 1 << 20
	maxDim       = 1 << 16
	maxCount     = 1 << 31
)

func binaryRead(r io.Reader, data interface{}) (int, error) {
	switch v := data.(type) {
	case *int:
		br, ok := r.(io.ByteReader)
		if !ok {
			return 0, fmt.Errorf("reader does not implement io.ByteReader")
		}
		i, err := binary.ReadVarint(br)
		if err != nil {
			return 0, err
		}
		*v = int(i)
		return binary.MaxVarintLen64, nil

	case *string:
		var ln int
		if _, err := binaryRead(r, &ln); err != nil {
			return 0, err
		}
		if ln < 0 || ln > maxStringLen {
			return 0, fmt.Errorf("string length %d out of range", ln)
		}
		s := make([]byte, ln)
		if _, err := io.ReadFull(r, s); err != nil {
			return 0, err
		}
		*v = string(s)
		return len(s), nil

	case *[]float32:
		var ln int
		if _, err := binaryRead(r, &ln); err != nil {
			return 0, err
		}
		if ln < 0 || ln > maxDim {
			return 0, fmt.Errorf("vector length %d out of range", ln)
		}
		*v = make([]float32, ln)
		return binary.Size(*v), binary.Read(r, byteOrder, *v)

	case io.ReaderFrom:
		n, err := v.ReadFrom(r)
		return int(n), err

	default:
		return binary.Size(data), binary.Read(r, byteOrder, data)
	}
}

func binaryWrite(w io.Writer, data any) (int, error) {
	switch v := data.(type) {
	case int:
		var buf [binary.MaxVarintLen64]byte
		n := binary.PutVarint(buf[:], int64(v))
		return w.Write(buf[:n])
	case io.WriterTo:
		n, err := v.WriteTo(w)
		return int(n), err
	case string:
		n, err := binaryWrite(w, len(v))
		if err != nil {
			return n, err
		}
		n2, err := io.WriteString(w, v)
		return n + n2, err
	case []float32:
		n, err := binaryWrite(w, len(v))
		if err != nil {
			return n, err
		}
		return n + binary.Size(v), binary.Write(w, byteOrder, v)
	default:
		sz := binary.Size(data)
		if err := binary.Write(w, byteOrder, data); err != nil {
			return 0, fmt.Errorf("encoding %T: %w", data, err)
		}
		return sz, nil
	}
}

func multiBinaryWrite(w io.Writer, data ...any) (int, error) {
	var written int
	for _, d := range data {
		n, err := binaryWrite(w, d)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func multiBinaryRead(r io.Reader, data ...any) (int, error) {
	var read int
	for i, d := range data {
		n, err := binaryRead(r, d)
		read += n
		if err != nil {
			return read, fmt.Errorf("reading %T at index %v: %w", d, i, err)
		}
	}
	return read, nil
}

// encodingVersion 2 is this fork's flat layout. Version 1 (upstream's
// per-layer node maps) is still read, by re-inserting its base-layer nodes.
const (
	encodingVersion   = 2
	encodingVersionV1 = 1
)

// writeFloats writes v as little-endian float32 in chunks.
func writeFloats(w io.Writer, v []float32) error {
	var buf [4096]byte
	for len(v) > 0 {
		n := min(len(v), len(buf)/4)
		for i, f := range v[:n] {
			byteOrder.PutUint32(buf[4*i:], math.Float32bits(f))
		}
		if _, err := w.Write(buf[:4*n]); err != nil {
			return err
		}
		v = v[n:]
	}
	return nil
}

// readFloats appends count float32 read from r to dst, growing dst as data
// arrives so a lying count fails at EOF instead of allocating first.
func readFloats(r io.Reader, dst []float32, count int) ([]float32, error) {
	var buf [4096]byte
	for count > 0 {
		n := min(count, len(buf)/4)
		if _, err := io.ReadFull(r, buf[:4*n]); err != nil {
			return dst, err
		}
		for i := 0; i < n; i++ {
			dst = append(dst, math.Float32frombits(byteOrder.Uint32(buf[4*i:])))
		}
		count -= n
	}
	return dst, nil
}

func writeIDs(w io.Writer, ids []uint32) error {
	if _, err := binaryWrite(w, len(ids)); err != nil {
		return err
	}
	var buf [4]byte
	for _, id := range ids {
		byteOrder.PutUint32(buf[:], id)
		if _, err := w.Write(buf[:]); err != nil {
			return err
		}
	}
	return nil
}

// Export writes the graph to a writer, tombstones included, so that Import
// restores exactly this graph.
func (h *Graph[K]) Export(w io.Writer) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	distFuncName, ok := distanceFuncToName(h.distance())
	if !ok {
		return fmt.Errorf("distance function %v must be registered with RegisterDistanceFunc", h.Distance)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	m, ml := h.m, h.levelP
	if len(h.keys) == 0 {
		m, ml = h.M, h.Ml
	}
	_, err := multiBinaryWrite(bw,
		encodingVersion, m, ml, h.EfSearch, distFuncName, h.EfConstruction,
		h.dim, len(h.keys), h.maxLevel, int(h.entry),
	)
	if err != nil {
		return fmt.Errorf("encode parameters: %w", err)
	}
	for _, k := range h.keys {
		if _, err := binaryWrite(bw, k); err != nil {
			return fmt.Errorf("encode key %v: %w", k, err)
		}
	}
	flags := make([]byte, 2*len(h.keys))
	for i := range h.keys {
		flags[i] = h.levels[i]
		if h.deleted[i] {
			flags[len(h.keys)+i] = 1
		}
	}
	if _, err := bw.Write(flags); err != nil {
		return fmt.Errorf("encode levels: %w", err)
	}
	if err := writeFloats(bw, h.vecs); err != nil {
		return fmt.Errorf("encode vectors: %w", err)
	}
	for id := range h.keys {
		for l := 0; l <= int(h.levels[id]); l++ {
			if err := writeIDs(bw, h.links(uint32(id), l)); err != nil {
				return fmt.Errorf("encode links of node %d: %w", id, err)
			}
		}
	}
	return bw.Flush()
}

// Import reads a graph written by Export, replacing the receiver's content
// and parameters. Malformed input gives an error, never a panic; on error the
// graph is left empty.
func (h *Graph[K]) Import(r io.Reader) error {
	br, ok := r.(interface {
		io.Reader
		io.ByteReader
	})
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reset()
	var version int
	if _, err := binaryRead(br, &version); err != nil {
		return fmt.Errorf("read encoding version: %w", err)
	}
	var err error
	switch version {
	case encodingVersion:
		err = h.importV2(br)
	case encodingVersionV1:
		err = h.importV1(br)
	default:
		return fmt.Errorf("incompatible encoding version: %d", version)
	}
	if err != nil {
		h.reset()
	}
	return err
}

func (h *Graph[K]) importV2(r interface {
	io.Reader
	io.ByteReader
}) error {
	var (
		m, efSearch, efc, dim, n, maxLevel, entry int
		ml                                        float64
		dist                                      string
	)
	if _, err := multiBinaryRead(r, &m, &ml, &efSearch, &dist, &efc, &dim, &n, &maxLevel, &entry); err != nil {
		return fmt.Errorf("decode parameters: %w", err)
	}
	df, ok := distanceFuncByName(dist)
	if !ok {
		return fmt.Errorf("unknown distance function %q", dist)
	}
	h.Distance, h.M, h.Ml, h.EfSearch, h.EfConstruction = df, m, ml, efSearch, efc
	if n == 0 {
		return nil
	}
	switch {
	case m < 2 || m > 1<<12:
		return fmt.Errorf("M %d out of range", m)
	case dim <= 0 || dim > maxDim:
		return fmt.Errorf("dimension %d out of range", dim)
	case n < 0 || n > maxCount:
		return fmt.Errorf("node count %d out of range", n)
	case maxLevel < 0 || maxLevel >= maxLevels:
		return fmt.Errorf("max level %d out of range", maxLevel)
	case entry < 0 || entry >= n:
		return fmt.Errorf("entry point %d out of range [0,%d)", entry, n)
	case math.IsNaN(ml) || ml < 0 || ml >= 1:
		return fmt.Errorf("level factor %v out of range", ml)
	}
	h.setup(dim)
	h.m, h.m0, h.levelP = m, 2*m, ml
	if h.levelP == 0 {
		h.levelP = 1 / float64(m)
	}
	h.entry, h.maxLevel = uint32(entry), maxLevel

	for i := 0; i < n; i++ {
		var k K
		if _, err := binaryRead(r, &k); err != nil {
			return fmt.Errorf("decode key %d: %w", i, err)
		}
		h.keys = append(h.keys, k)
	}
	flags := make([]byte, 2*n)
	if _, err := io.ReadFull(r, flags); err != nil {
		return fmt.Errorf("decode levels: %w", err)
	}
	h.levels = flags[:n:n]
	h.deleted = make([]bool, n)
	for i := 0; i < n; i++ {
		if int(h.levels[i]) > maxLevel {
			return fmt.Errorf("node %d: level %d above max level %d", i, h.levels[i], maxLevel)
		}
		switch flags[n+i] {
		case 0:
		case 1:
			h.deleted[i] = true
			h.nDeleted++
		default:
			return fmt.Errorf("node %d: bad deleted flag %d", i, flags[n+i])
		}
	}
	if int(h.levels[entry]) != maxLevel {
		return fmt.Errorf("entry point %d has level %d, want max level %d", entry, h.levels[entry], maxLevel)
	}
	var err error
	if h.vecs, err = readFloats(r, nil, n*dim); err != nil {
		return fmt.Errorf("decode vectors: %w", err)
	}
	h.links0 = make([]uint32, 0, (h.m0+1)*min(n, 1<<20))
	h.upper = make([][]uint32, n)
	var buf [4]byte
	for id := 0; id < n; id++ {
		h.links0 = append(h.links0, make([]uint32, h.m0+1)...)
		if lv := int(h.levels[id]); lv > 0 {
			h.upper[id] = make([]uint32, lv*(h.m+1))
		}
		for l := 0; l <= int(h.levels[id]); l++ {
			var cnt int
			if _, err := binaryRead(r, &cnt); err != nil {
				return fmt.Errorf("decode links of node %d level %d: %w", id, l, err)
			}
			if cnt < 0 || cnt > h.maxLinks(l) {
				return fmt.Errorf("node %d level %d: %d links, max %d", id, l, cnt, h.maxLinks(l))
			}
			nb := make([]cand, cnt)
			for j := range nb {
				if _, err := io.ReadFull(r, buf[:]); err != nil {
					return fmt.Errorf("decode links of node %d level %d: %w", id, l, err)
				}
				x := byteOrder.Uint32(buf[:])
				if int(x) >= n || int(h.levels[x]) < l {
					return fmt.Errorf("node %d level %d: link to %d which is not on that level", id, l, x)
				}
				nb[j].id = x
			}
			h.setLinks(uint32(id), l, nb)
		}
	}
	for id, k := range h.keys {
		if h.deleted[id] {
			continue
		}
		if _, dup := h.ids[k]; dup {
			return fmt.Errorf("key %v is live twice", k)
		}
		h.ids[k] = uint32(id)
	}
	if len(h.ids) == 0 {
		h.reset()
	}
	return nil
}

// importV1 reads upstream's format and rebuilds the graph from its base
// layer (its links were built by the broken search and are not worth
// keeping).
func (h *Graph[K]) importV1(r interface {
	io.Reader
	io.ByteReader
}) error {
	var (
		m, efSearch int
		ml          float64
		dist        string
	)
	if _, err := multiBinaryRead(r, &m, &ml, &efSearch, &dist); err != nil {
		return fmt.Errorf("decode parameters: %w", err)
	}
	df, ok := distanceFuncByName(dist)
	if !ok {
		return fmt.Errorf("unknown distance function %q", dist)
	}
	h.Distance, h.M, h.EfSearch = df, m, efSearch
	if ml > 0 && ml < 1 {
		h.Ml = ml
	}
	var nLayers int
	if _, err := binaryRead(r, &nLayers); err != nil {
		return fmt.Errorf("decode layer count: %w", err)
	}
	if nLayers < 0 || nLayers > 64 {
		return fmt.Errorf("layer count %d out of range", nLayers)
	}
	var base []Node[K]
	for i := 0; i < nLayers; i++ {
		var nNodes int
		if _, err := binaryRead(r, &nNodes); err != nil {
			return fmt.Errorf("decode layer %d size: %w", i, err)
		}
		if nNodes < 0 || nNodes > maxCount {
			return fmt.Errorf("layer %d: node count %d out of range", i, nNodes)
		}
		for j := 0; j < nNodes; j++ {
			var (
				key        K
				vec        Vector
				nNeighbors int
			)
			if _, err := multiBinaryRead(r, &key, &vec, &nNeighbors); err != nil {
				return fmt.Errorf("decoding node %d: %w", j, err)
			}
			if nNeighbors < 0 || nNeighbors > 1<<16 {
				return fmt.Errorf("node %d: neighbor count %d out of range", j, nNeighbors)
			}
			for k := 0; k < nNeighbors; k++ {
				var nb K
				if _, err := binaryRead(r, &nb); err != nil {
					return fmt.Errorf("decoding neighbor %d for node %d: %w", k, j, err)
				}
			}
			if i == 0 {
				base = append(base, Node[K]{Key: key, Value: vec})
			}
		}
	}
	if len(base) == 0 {
		return nil
	}
	dim := len(base[0].Value)
	for _, nd := range base {
		if len(nd.Value) != dim || dim == 0 {
			return fmt.Errorf("node %v: dimension %d, want %d", nd.Key, len(nd.Value), dim)
		}
	}
	h.setup(dim)
	for _, nd := range base {
		h.insert(nd.Key, nd.Value)
	}
	h.maybeCompact()
	return nil
}

// SavedGraph is a wrapper around a graph that persists
// changes to a file upon calls to Save. It is more convenient
// but less powerful than calling Graph.Export and Graph.Import
// directly.
type SavedGraph[K cmp.Ordered] struct {
	*Graph[K]
	Path string
}

// LoadSavedGraph opens a graph from a file, reads it, and returns it.
//
// If the file does not exist (i.e. this is a new graph), the equivalent of
// NewGraph is returned and nothing is created on disk (upstream created an
// empty file here).
//
// It does not hold open a file descriptor, so SavedGraph can be forgotten
// without ever calling Save.
func LoadSavedGraph[K cmp.Ordered](path string) (*SavedGraph[K], error) {
	g := NewGraph[K]()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &SavedGraph[K]{Graph: g, Path: path}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := g.Import(bufio.NewReaderSize(f, 1<<16)); err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return &SavedGraph[K]{Graph: g, Path: path}, nil
}

// Save writes the graph to the file atomically: a temporary file in the same
// directory is written, synced and renamed over Path.
func (g *SavedGraph[K]) Save() error {
	return WriteFileAtomic(g.Path, g.Export)
}

// WriteFileAtomic writes path through write into a temporary file in the
// same directory, fsyncs it, renames it over path and fsyncs the directory,
// so readers see either the old or the new content, never a torn file.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err := write(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp.Name(), path, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		// Best effort: makes the rename itself durable on Linux.
		d.Sync()
		d.Close()
	}
	return nil
}
