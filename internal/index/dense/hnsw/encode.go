package hnsw

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/anna-search/anna/internal/atomicfile"
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

// encodingVersion 3 is this fork's flat layout, read in bulk into flat
// arrays; version 2 (the same content, links one list at a time) and
// version 1 (upstream's per-layer node maps, re-inserted from its base
// layer) are still read.
const (
	encodingVersion   = 3
	encodingVersionV2 = 2
	encodingVersionV1 = 1
)

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

// ExportOptions tunes ExportWith.
type ExportOptions struct {
	// Offset is the position in its file at which the stream starts: the
	// float vectors are padded to start at a multiple of 64 bytes of the
	// file, so that ImportOptions.File can map them.
	Offset int64
}

// Export writes the graph to a writer, tombstones included, so that Import
// restores exactly this graph.
func (h *Graph[K]) Export(w io.Writer) error { return h.ExportWith(w, ExportOptions{}) }

// ExportWith is Export with options. The layout (format 3; varints are
// encoding/binary's, arrays raw little-endian):
//
//	varint version 3, M; float64 Ml; varint EfSearch; string distance;
//	varint EfConstruction, dim, slots n, max level, entry, quantized (0/1)
//	keys: n raw 8-byte words for uint64 keys, else one encoded key each
//	n levels (bytes), n deleted flags (bytes)
//	quantized: varint vectors fitted on; dim float32 mid, dim float32
//	  scale; n·dim int8 codes
//	n·(2M+1) uint32: the base layer (count, then 2M slots, per node)
//	per node above the base layer, level·(M+1) uint32 (count, M slots)
//	varint p, p zero bytes (the floats start 64-byte aligned in the file)
//	n·dim float32: the vectors
func (h *Graph[K]) ExportWith(w io.Writer, opts ExportOptions) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	distFuncName, ok := distanceFuncToName(h.distance())
	if !ok {
		return fmt.Errorf("hnsw: cannot export a graph whose distance function is not EuclideanDistance, CosineDistance, DotDistance or SquaredEuclideanDistance")
	}
	cw := &countingWriter{w: bufio.NewWriterSize(w, 1<<16)}
	m, ml := h.m, h.levelP
	if len(h.keys) == 0 {
		m, ml = h.M, h.Ml
	}
	quant := 0
	if h.quant || (len(h.keys) == 0 && h.Quantize == QuantizeInt8) {
		quant = 1
	}
	_, err := multiBinaryWrite(cw,
		encodingVersion, m, ml, h.EfSearch, distFuncName, h.EfConstruction,
		h.dim, len(h.keys), h.maxLevel, int(h.entry), quant,
	)
	if err != nil {
		return fmt.Errorf("encode parameters: %w", err)
	}
	n := len(h.keys)
	if n == 0 {
		return cw.w.Flush()
	}
	if keys, ok := any(h.keys).([]uint64); ok {
		err = writeRaw(cw, keys)
	} else {
		for _, k := range h.keys {
			if _, err = binaryWrite(cw, k); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("encode keys: %w", err)
	}
	flags := make([]byte, 2*n)
	for i := range h.keys {
		flags[i] = h.levels[i]
		if h.deleted[i] {
			flags[n+i] = 1
		}
	}
	if _, err := cw.Write(flags); err != nil {
		return fmt.Errorf("encode levels: %w", err)
	}
	if h.quant {
		if _, err := binaryWrite(cw, h.qz.trainedOn); err != nil {
			return fmt.Errorf("encode quantizer: %w", err)
		}
		if err := errors.Join(writeRaw(cw, h.qz.mid), writeRaw(cw, h.qz.scale), writeRaw(cw, h.codes)); err != nil {
			return fmt.Errorf("encode codes: %w", err)
		}
	}
	if err := writeRaw(cw, h.links0); err != nil {
		return fmt.Errorf("encode links: %w", err)
	}
	for id := range h.keys {
		if err := writeRaw(cw, h.upper[id]); err != nil {
			return fmt.Errorf("encode links: %w", err)
		}
	}
	// The pad's own varint is one byte (p < 128).
	pad := int((64 - (opts.Offset+cw.n+1)%64) % 64)
	if _, err := binaryWrite(cw, pad); err != nil {
		return fmt.Errorf("encode vectors: %w", err)
	}
	if _, err := cw.Write(make([]byte, pad)); err != nil {
		return fmt.Errorf("encode vectors: %w", err)
	}
	if err := errors.Join(writeRaw(cw, h.mapped), writeRaw(cw, h.vecs)); err != nil {
		return fmt.Errorf("encode vectors: %w", err)
	}
	return cw.w.Flush()
}

type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// countingReader counts the bytes its user consumes.
type countingReader struct {
	r interface {
		io.Reader
		io.ByteReader
	}
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// ImportOptions tunes ImportWith.
type ImportOptions struct {
	// File, when set, is the file the stream is read from, and Offset the
	// position in it where the stream starts. The float vectors of a
	// quantized graph are then mapped from the file (private, read-only in
	// practice: the graph never writes them but in a compaction, whose
	// writes go to private copies of the pages) instead of being read into
	// memory; their bytes still flow through the reader, so that a
	// checksum over the stream covers them. The file must not change
	// while the graph lives (anna replaces its files by renaming new ones
	// over them, which leaves the mapped one as it was). Without mmap (not
	// Unix) they are read into memory as usual.
	File   *os.File
	Offset int64
	// Size, when > 0, bounds the stream's length: an array that would
	// not fit in it is refused before it is allocated. Without it arrays
	// are read in pieces, growing as data arrives.
	Size int64
}

// ImportWith is Import with options.
func (h *Graph[K]) ImportWith(r io.Reader, opts ImportOptions) error {
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
	cr := &countingReader{r: br}
	var version int
	if _, err := binaryRead(cr, &version); err != nil {
		return fmt.Errorf("read encoding version: %w", err)
	}
	var err error
	switch version {
	case encodingVersion:
		err = h.importV3(cr, opts)
	case encodingVersionV2:
		err = h.importV2(cr)
	case encodingVersionV1:
		err = h.importV1(cr)
	default:
		return fmt.Errorf("incompatible encoding version: %d", version)
	}
	if err != nil {
		h.reset()
	}
	return err
}

// Import reads a graph written by Export, replacing the receiver's content
// and parameters. Malformed input gives an error, never a panic; on error the
// graph is left empty.
func (h *Graph[K]) Import(r io.Reader) error { return h.ImportWith(r, ImportOptions{}) }

// setShape checks a non-empty graph's header fields read by an importer
// (formats 2 and 3 write the same ones) and sets up the graph for them.
func (h *Graph[K]) setShape(m, dim, n, maxLevel, entry int, ml float64) error {
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
	return nil
}

func (h *Graph[K]) importV3(r *countingReader, opts ImportOptions) error {
	var (
		m, efSearch, efc, dim, n, maxLevel, entry, quant int
		ml                                               float64
		dist                                             string
	)
	if _, err := multiBinaryRead(r, &m, &ml, &efSearch, &dist, &efc, &dim, &n, &maxLevel, &entry, &quant); err != nil {
		return fmt.Errorf("decode parameters: %w", err)
	}
	df, ok := distanceFuncByName(dist)
	if !ok {
		return fmt.Errorf("unknown distance function %q", dist)
	}
	h.Distance, h.M, h.Ml, h.EfSearch, h.EfConstruction = df, m, ml, efSearch, efc
	switch quant {
	case 0:
		h.Quantize = QuantizeNone
	case 1:
		h.Quantize = QuantizeInt8
		if dist != "dot" {
			return fmt.Errorf("quantized graph with distance %q (want dot)", dist)
		}
	default:
		return fmt.Errorf("bad quantization flag %d", quant)
	}
	if n == 0 {
		return nil
	}
	if err := h.setShape(m, dim, n, maxLevel, entry, ml); err != nil {
		return err
	}
	var err error
	if keys, ok := any(&h.keys).(*[]uint64); ok {
		*keys, err = readRaw[uint64](r, n, opts.Size)
	} else {
		h.keys = make([]K, 0, min(n, 1<<20))
		for i := 0; i < n && err == nil; i++ {
			var k K
			if _, err = binaryRead(r, &k); err == nil {
				h.keys = append(h.keys, k)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("decode keys: %w", err)
	}
	flags, err := readRaw[uint8](r, 2*n, opts.Size)
	if err != nil {
		return fmt.Errorf("decode levels: %w", err)
	}
	h.levels = flags[:n:n]
	h.deleted = make([]bool, n)
	uppers := 0
	for i := 0; i < n; i++ {
		if int(h.levels[i]) > maxLevel {
			return fmt.Errorf("node %d: level %d above max level %d", i, h.levels[i], maxLevel)
		}
		uppers += int(h.levels[i]) * (m + 1)
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
	if h.quant {
		var trained int
		if _, err := binaryRead(r, &trained); err != nil {
			return fmt.Errorf("decode quantizer: %w", err)
		}
		h.qz.trainedOn = trained
		if h.qz.mid, err = readRaw[float32](r, dim, opts.Size); err == nil {
			h.qz.scale, err = readRaw[float32](r, dim, opts.Size)
		}
		if err != nil {
			return fmt.Errorf("decode quantizer: %w", err)
		}
		for j := range dim {
			mj, sj := float64(h.qz.mid[j]), float64(h.qz.scale[j])
			if trained <= 0 || math.IsNaN(mj) || math.IsInf(mj, 0) || math.IsNaN(sj) || math.IsInf(sj, 0) || sj < 0 {
				return fmt.Errorf("quantizer: bad range for dimension %d (fitted on %d vectors)", j, trained)
			}
		}
		if h.codes, err = readRaw[int8](r, n*dim, opts.Size); err != nil {
			return fmt.Errorf("decode codes: %w", err)
		}
		if bytes.IndexByte(rawBytes(h.codes), 0x80) >= 0 { // -128, vectorised

			return errors.New("decode codes: code -128 out of range")
		}
	}
	if h.links0, err = readRaw[uint32](r, n*(h.m0+1), opts.Size); err != nil {
		return fmt.Errorf("decode links: %w", err)
	}
	slab, err := readRaw[uint32](r, uppers, opts.Size)
	if err != nil {
		return fmt.Errorf("decode links: %w", err)
	}
	h.upper = make([][]uint32, n)
	for id := range n {
		if lv := int(h.levels[id]); lv > 0 {
			sz := lv * (m + 1)
			h.upper[id], slab = slab[:sz:sz], slab[sz:]
		}
	}
	for id := range n {
		for l := 0; l <= int(h.levels[id]); l++ {
			var cnt uint32
			if l == 0 {
				cnt = h.links0[id*(h.m0+1)]
			} else {
				cnt = h.upper[id][(l-1)*(m+1)]
			}
			if int(cnt) > h.maxLinks(l) {
				return fmt.Errorf("node %d level %d: %d links, max %d", id, l, cnt, h.maxLinks(l))
			}
			for _, x := range h.links(uint32(id), l) {
				if int(x) >= n || int(h.levels[x]) < l {
					return fmt.Errorf("node %d level %d: link to %d which is not on that level", id, l, x)
				}
			}
		}
	}
	var pad int
	if _, err := binaryRead(r, &pad); err != nil || pad < 0 || pad >= 64 {
		return fmt.Errorf("decode vector padding %d: %v", pad, err)
	}
	if _, err := io.CopyN(io.Discard, r, int64(pad)); err != nil {
		return fmt.Errorf("decode vector padding: %w", err)
	}
	if at := opts.Offset + r.n; h.quant && opts.File != nil && at%4 == 0 {
		if opts.Size > 0 && int64(n)*int64(dim)*4 > opts.Size {
			return fmt.Errorf("decode vectors: %d floats do not fit in %d bytes", n*dim, opts.Size)
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)*int64(dim)*4); err != nil {
			return fmt.Errorf("decode vectors: %w", err)
		}
		fm, floats, err := mapFloats(opts.File, at, n*dim)
		if err != nil {
			return fmt.Errorf("map vectors: %w", err)
		}
		h.mapping, h.mapped, h.nMapped = fm, floats, n
	} else if h.vecs, err = readRaw[float32](r, n*dim, opts.Size); err != nil {
		return fmt.Errorf("decode vectors: %w", err)
	}
	return h.indexKeys()
}

// indexKeys maps each live key to its node after an import; a key live
// twice is an error, and a graph with no live node is reset to empty.
func (h *Graph[K]) indexKeys() error {
	h.ids = make(map[K]uint32, max(len(h.keys)-h.nDeleted, 0))
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

// littleEndian: raw arrays are written and read as the host stores them
// on little-endian hosts, converted otherwise.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

type rawElem interface {
	~uint8 | ~int8 | ~uint32 | ~uint64 | ~float32
}

func rawBytes[T rawElem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// swapBytes reverses the bytes of each size-byte element of b.
func swapBytes(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		slices.Reverse(b[i : i+size])
	}
}

func writeRaw[T rawElem](w io.Writer, s []T) error {
	b := rawBytes(s)
	size := 1
	if len(s) > 0 {
		size = int(unsafe.Sizeof(s[0]))
	}
	if littleEndian || size == 1 {
		_, err := w.Write(b)
		return err
	}
	const chunk = 1 << 16
	buf := make([]byte, 0, chunk)
	for len(b) > 0 {
		k := min(len(b), chunk)
		buf = append(buf[:0], b[:k]...)
		swapBytes(buf, size)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}

// readRaw reads count elements written by writeRaw. With limit > 0 an
// array of more than limit bytes is refused before allocating; without,
// it grows as data arrives, so a lying count fails at the end of the
// stream instead of allocating first.
func readRaw[T rawElem](r io.Reader, count int, limit int64) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if count < 0 || int64(count)*int64(size) > int64(maxCount)*8 {
		return nil, fmt.Errorf("array of %d elements out of range", count)
	}
	var out []T
	if limit > 0 {
		if int64(count)*int64(size) > limit {
			return nil, fmt.Errorf("array of %d %d-byte elements does not fit in %d bytes", count, size, limit)
		}
		out = make([]T, count)
		if _, err := io.ReadFull(r, rawBytes(out)); err != nil {
			return nil, err
		}
	} else {
		const chunk = 1 << 20
		out = make([]T, 0, min(count, chunk))
		for len(out) < count {
			k := min(count-len(out), chunk)
			out = slices.Grow(out, k)
			part := out[len(out) : len(out)+k]
			if _, err := io.ReadFull(r, rawBytes(part)); err != nil {
				return nil, err
			}
			out = out[:len(out)+k]
		}
	}
	if !littleEndian && size > 1 {
		swapBytes(rawBytes(out), size)
	}
	return out, nil
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
	h.Quantize = QuantizeNone // format 2 had no quantization
	if n == 0 {
		return nil
	}
	if err := h.setShape(m, dim, n, maxLevel, entry, ml); err != nil {
		return err
	}

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
	return h.indexKeys()
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
	h.Quantize = QuantizeNone // format 1 had no quantization
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
	for len(base) > 0 {
		b := min(len(base), batchSize)
		h.addBatch(base[:b])
		base = base[b:]
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
	return atomicfile.Write(g.Path, g.Export)
}
