package dense

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/index/dense/hnsw"
)

// Meta is what the engine records with a saved graph to tell whether it is
// still current: the store it was built from, the vectors' model
// fingerprint and the storage sequence number the graph reflects.
type Meta struct {
	StoreID     string // storage.Store.ID of the store the graph was built from
	Fingerprint string
	AppliedSeq  uint64
}

// File layout (little-endian; uvarint is encoding/binary's, a string is a
// uvarint length and its bytes):
//
//	magic "ANNADNS\x00" | u32 format version
//	u32 len + fingerprint | u64 applied seq
//	u32 Dim, M, EfSearch, EfConstruction
//	u32 len + store id (version 2; version 1 files load with StoreID "")
//	version 3: the document table and the metadata index:
//	  uvarint slots; per document number: string ID ("" for a free
//	    number, and nothing follows), uvarint passages, uvarint metadata
//	    pairs, then string key, string value per pair, keys increasing
//	    (from version 5: pairs increasing, a key may repeat: the strings
//	    of a list); from version 5 then uvarint number pairs, string key
//	    and string filter.EncodeNumber key per pair, pairs increasing
//	  uvarint metadata keys; per key, increasing: string key, uvarint
//	    values; per value, increasing: string value, uvarint length and a
//	    roaring bitmap of document numbers (its portable format); from
//	    version 5 the same again for number values (by EncodeNumber key)
//	hnsw graph (hnsw.Graph.ExportWith; format 2 up to version 3, format
//	  3 from version 4: flat arrays read in bulk, the quantization and
//	  int8 codes when quantized, the float vectors last and 64-byte
//	  aligned in the file so that a quantized index maps them): keyed by
//	  document ID in versions 1 and 2 (one passage per document, no
//	  metadata), by document number << 32 | passage from version 3
//	trailer: u32 CRC-32C of everything above, magic "ANNADEND"
var (
	fileMagic    = [8]byte{'A', 'N', 'N', 'A', 'D', 'N', 'S', 0}
	trailerMagic = [8]byte{'A', 'N', 'N', 'A', 'D', 'E', 'N', 'D'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

const (
	// fileVersion 5 adds number metadata and keys of several values
	// (lists); 4 has the graph in hnsw's format 3 (what else it holds
	// is version 3's); 3 added passages and metadata; 2 had no document table
	// (its files load as single-passage documents without metadata); 1
	// had no store id either (it loads with StoreID "").
	fileVersion    = 5
	maxFingerprint = 4096
	maxString      = 1 << 20 // an ID, a metadata key or value
	maxBitmap      = 1 << 30 // a posting list's bytes
)

// ErrCorrupt is wrapped by Load's error when the file is not a valid index
// (truncated, bad checksum, malformed content).
var ErrCorrupt = errors.New("corrupt dense index file")

// Save writes the index with meta to path atomically (temporary file in the
// same directory, fsync, rename). Searches may run meanwhile; writers wait.
func (ix *Index) Save(path string, meta Meta) error {
	if len(meta.Fingerprint) > maxFingerprint || len(meta.StoreID) > maxFingerprint {
		return fmt.Errorf("dense: save %s: fingerprint of %d bytes is too long", path, len(meta.Fingerprint))
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	err := atomicfile.Write(path, func(w io.Writer) error {
		h := crc32.New(castagnoli)
		cw := &countingWriter{w: w}
		mw := io.MultiWriter(cw, h)
		var hdr bytes.Buffer
		hdr.Write(fileMagic[:])
		le := binary.LittleEndian
		hdr.Write(le.AppendUint32(nil, fileVersion))
		hdr.Write(le.AppendUint32(nil, uint32(len(meta.Fingerprint))))
		hdr.WriteString(meta.Fingerprint)
		hdr.Write(le.AppendUint64(nil, meta.AppliedSeq))
		for _, v := range []int{ix.cfg.Dim, ix.cfg.M, ix.cfg.EfSearch, ix.cfg.EfConstruction} {
			hdr.Write(le.AppendUint32(nil, uint32(v)))
		}
		hdr.Write(le.AppendUint32(nil, uint32(len(meta.StoreID))))
		hdr.WriteString(meta.StoreID)
		if _, err := mw.Write(hdr.Bytes()); err != nil {
			return err
		}
		bw := bufio.NewWriterSize(mw, 1<<16)
		if err := ix.writeTables(bw); err != nil {
			return fmt.Errorf("write the document table: %w", err)
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := ix.g.ExportWith(mw, hnsw.ExportOptions{Offset: cw.n}); err != nil {
			return fmt.Errorf("export graph: %w", err)
		}
		var tr [12]byte
		le.PutUint32(tr[:4], h.Sum32())
		copy(tr[4:], trailerMagic[:])
		_, err := w.Write(tr[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("dense: save: %w", err)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// hashingReader hashes (and counts) exactly the bytes its user consumes (a
// bufio.Reader underneath reads ahead, so hashing below it would include
// the trailer).
type hashingReader struct {
	r *bufio.Reader
	h hash.Hash32
	n int64
	b [1]byte
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.n += int64(n)
	return n, err
}

func (hr *hashingReader) ReadByte() (byte, error) {
	c, err := hr.r.ReadByte()
	if err == nil {
		hr.b[0] = c
		hr.h.Write(hr.b[:])
		hr.n++
	}
	return c, err
}

// Load reads an index written by Save. A missing file gives an error
// wrapping fs.ErrNotExist and creates nothing; a damaged one gives an error
// wrapping ErrCorrupt. The file is read once, front to back, and its
// checksum verified before the index is returned; the float vectors of a
// quantized index are then mapped from it rather than kept in memory
// (Save replaces the file by renaming a new one over it, which leaves the
// mapped one intact).
func Load(path string) (*Index, Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("dense: load: %w", err)
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	hr := &hashingReader{r: bufio.NewReaderSize(f, 1<<20), h: crc32.New(castagnoli)}
	ix, meta, err := load(hr, f, size)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("dense: load %s: %w: %w", path, ErrCorrupt, err)
	}
	return ix, meta, nil
}

// readHeader reads everything before the document table, and the format
// version.
func readHeader(hr *hashingReader) (Meta, Config, uint32, error) {
	le := binary.LittleEndian
	var fixed [16]byte
	if _, err := io.ReadFull(hr, fixed[:]); err != nil {
		return Meta{}, Config{}, 0, fmt.Errorf("read header: %w", err)
	}
	if !bytes.Equal(fixed[:8], fileMagic[:]) {
		return Meta{}, Config{}, 0, errors.New("not a dense index file (bad magic)")
	}
	version := le.Uint32(fixed[8:12])
	if version < 1 || version > fileVersion {
		return Meta{}, Config{}, 0, fmt.Errorf("unsupported format version %d (want %d)", version, fileVersion)
	}
	fpLen := le.Uint32(fixed[12:16])
	if fpLen > maxFingerprint {
		return Meta{}, Config{}, 0, fmt.Errorf("fingerprint length %d out of range", fpLen)
	}
	rest := make([]byte, int(fpLen)+8+16)
	if _, err := io.ReadFull(hr, rest); err != nil {
		return Meta{}, Config{}, 0, fmt.Errorf("read header: %w", err)
	}
	meta := Meta{Fingerprint: string(rest[:fpLen]), AppliedSeq: le.Uint64(rest[fpLen:])}
	p := rest[fpLen+8:]
	if version >= 2 {
		var n [4]byte
		if _, err := io.ReadFull(hr, n[:]); err != nil {
			return Meta{}, Config{}, 0, fmt.Errorf("read header: %w", err)
		}
		idLen := le.Uint32(n[:])
		if idLen > maxFingerprint {
			return Meta{}, Config{}, 0, fmt.Errorf("store id length %d out of range", idLen)
		}
		id := make([]byte, idLen)
		if _, err := io.ReadFull(hr, id); err != nil {
			return Meta{}, Config{}, 0, fmt.Errorf("read header: %w", err)
		}
		meta.StoreID = string(id)
	}
	var cfg Config
	for i, dst := range []*int{&cfg.Dim, &cfg.M, &cfg.EfSearch, &cfg.EfConstruction} {
		v := le.Uint32(p[4*i:])
		if v > 1<<20 {
			return Meta{}, Config{}, 0, fmt.Errorf("config field %d = %d out of range", i, v)
		}
		*dst = int(v)
	}
	return meta, cfg, version, nil
}

func load(hr *hashingReader, f *os.File, size int64) (*Index, Meta, error) {
	meta, cfg, version, err := readHeader(hr)
	if err != nil {
		return nil, Meta{}, err
	}
	ix := New(cfg)
	if version >= 3 {
		if err := ix.readTables(hr, version, false); err != nil {
			return nil, Meta{}, err
		}
		if err := ix.g.ImportWith(hr, hnsw.ImportOptions{File: f, Offset: hr.n, Size: size}); err != nil {
			return nil, Meta{}, fmt.Errorf("import graph: %w", err)
		}
		ix.cfg.Quantize = QuantizeFloat32
		if ix.g.Quantize == hnsw.QuantizeInt8 {
			ix.cfg.Quantize = QuantizeInt8
		}
	} else if err := ix.importByID(hr); err != nil {
		return nil, Meta{}, err
	}
	sum := hr.h.Sum32()
	var tr [12]byte
	if _, err := io.ReadFull(hr.r, tr[:]); err != nil {
		return nil, Meta{}, fmt.Errorf("read trailer: %w", err)
	}
	if !bytes.Equal(tr[4:], trailerMagic[:]) {
		return nil, Meta{}, errors.New("bad trailer")
	}
	if got := binary.LittleEndian.Uint32(tr[:4]); got != sum {
		return nil, Meta{}, fmt.Errorf("checksum mismatch: file says %08x, content hashes to %08x", got, sum)
	}
	if _, err := hr.r.ReadByte(); err != io.EOF {
		return nil, Meta{}, errors.New("trailing bytes after the trailer")
	}
	if d := ix.g.Dims(); d != 0 && d != cfg.Dim {
		return nil, Meta{}, fmt.Errorf("graph dimension %d but header says %d", d, cfg.Dim)
	}
	// The document table and the graph must agree on every passage.
	var is issues
	ix.checkTable(&is)
	ix.checkPassages(&is)
	if list := is.List(); len(list) > 0 {
		return nil, Meta{}, fmt.Errorf("document table and graph disagree: %s %q", list[0].What, list[0].Keys)
	}
	return ix, meta, nil
}

// importByID reads a version 1 or 2 graph, keyed by document ID, and
// rekeys it to passage 0 of document numbers given in slot order.
func (ix *Index) importByID(r io.Reader) error {
	old := hnsw.NewGraph[string]()
	if err := old.Import(r); err != nil {
		return fmt.Errorf("import graph: %w", err)
	}
	const tombstone = math.MaxUint32
	g, err := hnsw.Rekey(old, func(id string, live bool) uint64 {
		if !live {
			return nodeKey(tombstone, 0)
		}
		num := uint32(len(ix.docs))
		ix.docs = append(ix.docs, docEntry{id: id, passages: 1})
		ix.byID[id] = num
		ix.meta.add(num, nil)
		ix.nPassages++
		return nodeKey(num, 0)
	})
	if err != nil {
		return fmt.Errorf("import graph: %w", err)
	}
	// Files of version 1 and 2 hold float32 graphs, which stay so.
	ix.cfg.Quantize = QuantizeFloat32
	ix.setupGraph(g)
	g.EfSearch, g.EfConstruction = old.EfSearch, old.EfConstruction
	ix.g = g
	return nil
}

// writeTables writes the document table and the metadata index (see the
// file layout).
func (ix *Index) writeTables(w *bufio.Writer) error {
	var scratch [binary.MaxVarintLen64]byte
	putUvarint := func(x uint64) { w.Write(binary.AppendUvarint(scratch[:0], x)) }
	putString := func(s string) {
		putUvarint(uint64(len(s)))
		w.WriteString(s)
	}
	putUvarint(uint64(len(ix.docs)))
	for _, e := range ix.docs {
		putString(e.id)
		if e.id == "" {
			continue
		}
		putUvarint(uint64(e.passages))
		nums, _ := slices.BinarySearchFunc(e.meta, metaTerm{num: true}, compareTerms) // the strings sort first
		for _, part := range [][]metaTerm{e.meta[:nums], e.meta[nums:]} {
			putUvarint(uint64(len(part)))
			for _, t := range part {
				putString(t.key)
				putString(t.val)
			}
		}
	}
	var buf bytes.Buffer
	for _, m := range []map[string]*termList{ix.meta.keys, ix.meta.nums} {
		keys := sortedKeys(m)
		putUvarint(uint64(len(keys)))
		for _, k := range keys {
			tl := m[k]
			vals := tl.values()
			putString(k)
			putUvarint(uint64(len(vals)))
			for _, v := range vals {
				putString(v)
				buf.Reset()
				if _, err := tl.post[v].WriteTo(&buf); err != nil {
					return fmt.Errorf("posting list %s=%q: %w", k, v, err)
				}
				putUvarint(uint64(buf.Len()))
				w.Write(buf.Bytes())
			}
		}
	}
	return nil
}

// tableReader reads the parts of the document table.
type tableReader struct {
	r interface {
		io.Reader
		io.ByteReader
	}
	err error
}

func (tr *tableReader) uvarint(what string, limit uint64) uint64 {
	if tr.err != nil {
		return 0
	}
	x, err := binary.ReadUvarint(tr.r)
	if err != nil {
		tr.err = fmt.Errorf("read %s: %w", what, err)
		return 0
	}
	if x > limit {
		tr.err = fmt.Errorf("%s %d out of range (at most %d)", what, x, limit)
		return 0
	}
	return x
}

func (tr *tableReader) bytes(what string, limit uint64) []byte {
	if tr.err != nil {
		return nil
	}
	n, err := binary.ReadUvarint(tr.r)
	if err != nil {
		tr.err = fmt.Errorf("read %s length: %w", what, err)
		return nil
	}
	if n > limit {
		tr.err = fmt.Errorf("%s length %d out of range (at most %d)", what, n, limit)
		return nil
	}
	if n <= 1<<16 {
		// Short (IDs, metadata): read at once, no more than 64 KiB
		// allocated on the word of the length.
		b := make([]byte, n)
		if _, err := io.ReadFull(tr.r, b); err != nil {
			tr.err = fmt.Errorf("read %s: %w", what, err)
		}
		return b
	}
	// Grown as the data arrives: a damaged length fails at the end of the
	// file instead of allocating first.
	var b bytes.Buffer
	if _, err := io.CopyN(&b, tr.r, int64(n)); err != nil {
		tr.err = fmt.Errorf("read %s: %w", what, err)
	}
	return b.Bytes()
}

func (tr *tableReader) string(what string) string { return string(tr.bytes(what, maxString)) }

// readTables reads what writeTables wrote in a file of version (3 or
// more), checking it as it goes: IDs unique, passage counts in range,
// pairs, keys and values in increasing order, number keys 8 bytes,
// posting lists valid, not empty and holding exactly the documents whose
// metadata has their key=value. With idsOnly it stops after the document
// table.
func (ix *Index) readTables(r interface {
	io.Reader
	io.ByteReader
}, version uint32, idsOnly bool) error {
	tr := &tableReader{r: r}
	spaces := 1 // strings; numbers from version 5
	if version >= 5 {
		spaces = 2
	}
	slots := tr.uvarint("document slots", math.MaxUint32)
	pairs := 0
	for num := uint32(0); tr.err == nil && uint64(num) < slots; num++ {
		e := docEntry{id: tr.string("document ID")}
		if e.id == "" {
			ix.docs = append(ix.docs, e)
			continue
		}
		if _, dup := ix.byID[e.id]; dup {
			return fmt.Errorf("document %q is in the table twice", e.id)
		}
		e.passages = uint32(tr.uvarint("passage count", maxPassages))
		if tr.err == nil && e.passages == 0 {
			return fmt.Errorf("document %q has no passage", e.id)
		}
		for space := range spaces {
			nm := tr.uvarint("metadata pairs", maxString)
			for i := uint64(0); tr.err == nil && i < nm; i++ {
				t := metaTerm{key: tr.string("metadata key"), val: tr.string("metadata value"), num: space == 1}
				if tr.err != nil {
					break
				}
				if len(e.meta) > 0 && compareTerms(e.meta[len(e.meta)-1], t) >= 0 {
					return fmt.Errorf("document %q: metadata not in increasing order", e.id)
				}
				if t.num && len(t.val) != 8 {
					return fmt.Errorf("document %q: metadata key %q: a number key of %d bytes", e.id, t.key, len(t.val))
				}
				e.meta = append(e.meta, t)
				pairs++
			}
		}
		ix.docs = append(ix.docs, e)
		ix.byID[e.id] = num
		ix.nPassages += int(e.passages)
		ix.meta.live.Add(num)
	}
	if tr.err != nil {
		return tr.err
	}
	for num, e := range ix.docs {
		if e.id == "" {
			ix.free.Add(uint32(num))
		}
	}
	if idsOnly {
		return nil
	}
	postings := 0
	for space := range spaces {
		m := ix.meta.keys
		if space == 1 {
			m = ix.meta.nums
		}
		nk := tr.uvarint("metadata keys", math.MaxUint32)
		prevKey := ""
		for i := uint64(0); tr.err == nil && i < nk; i++ {
			k := tr.string("metadata key")
			nv := tr.uvarint("values", math.MaxUint32)
			if tr.err == nil && (k <= prevKey || nv == 0) {
				return fmt.Errorf("metadata key %q out of order or without values", k)
			}
			prevKey = k
			tl := &termList{post: map[string]*roaring.Bitmap{}}
			for j := uint64(0); tr.err == nil && j < nv; j++ {
				v := tr.string("metadata value")
				raw := tr.bytes("posting list", maxBitmap)
				if tr.err != nil {
					break
				}
				if len(tl.sorted) > 0 && v <= tl.sorted[len(tl.sorted)-1] {
					return fmt.Errorf("metadata key %q: values out of order", k)
				}
				bm, err := decodeBitmap(raw)
				if err != nil {
					return fmt.Errorf("posting list %s=%q: %w", k, v, err)
				}
				t := metaTerm{key: k, val: v, num: space == 1}
				ok := !bm.IsEmpty()
				bm.Iterate(func(doc uint32) bool {
					ok = int(doc) < len(ix.docs) && ix.docs[doc].id != "" && hasTerm(ix.docs[doc].meta, t)
					return ok
				})
				if !ok {
					return fmt.Errorf("posting list %s=%q is empty or names a document without that metadata", k, v)
				}
				postings += int(bm.GetCardinality())
				tl.post[v] = bm
				tl.sorted = append(tl.sorted, v)
			}
			m[k] = tl
		}
	}
	if tr.err != nil {
		return tr.err
	}
	// Every posting names a document with that pair: with as many
	// postings as pairs, every pair is posted.
	if postings != pairs {
		return fmt.Errorf("the posting lists hold %d documents' pairs, the documents have %d", postings, pairs)
	}
	return nil
}

// decodeBitmap decodes a roaring bitmap, turning the library's panics on
// malformed input into errors.
func decodeBitmap(raw []byte) (bm *roaring.Bitmap, err error) {
	defer func() {
		if r := recover(); r != nil {
			bm, err = nil, fmt.Errorf("malformed roaring bitmap: %v", r)
		}
	}()
	bm = roaring.New()
	if err := bm.UnmarshalBinary(raw); err != nil {
		return nil, err
	}
	if err := bm.Validate(); err != nil {
		return nil, err
	}
	return bm, nil
}

// ReadMeta reads the Meta of a saved index without loading its graph (and
// so without verifying its checksum: Load does that).
func ReadMeta(path string) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, fmt.Errorf("dense: read meta: %w", err)
	}
	defer f.Close()
	hr := &hashingReader{r: bufio.NewReaderSize(f, 4096), h: crc32.New(castagnoli)}
	meta, _, _, err := readHeader(hr)
	if err != nil {
		return Meta{}, fmt.Errorf("dense: read meta of %s: %w: %w", path, ErrCorrupt, err)
	}
	return meta, nil
}

// ReadIDs reads the document IDs of a saved index without verifying its
// checksum: for telling which documents a damaged file held (IDs read from
// a damaged file may themselves be damaged). It fails when the document
// table (the graph, in files of version 1 and 2) cannot be parsed at all.
func ReadIDs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dense: read ids: %w", err)
	}
	defer f.Close()
	hr := &hashingReader{r: bufio.NewReaderSize(f, 1<<16), h: crc32.New(castagnoli)}
	_, cfg, version, err := readHeader(hr)
	if err != nil {
		return nil, fmt.Errorf("dense: read ids of %s: %w", path, err)
	}
	ix := New(cfg)
	if version >= 3 {
		err = ix.readTables(hr, version, true)
	} else {
		err = ix.importByID(hr)
	}
	if err != nil {
		return nil, fmt.Errorf("dense: read ids of %s: %w", path, err)
	}
	return ix.IDs(), nil
}
