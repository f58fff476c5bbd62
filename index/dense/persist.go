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
	"os"

	"github.com/anna-search/anna/index/dense/hnsw"
)

// Meta is what the engine records with a saved graph to tell whether it is
// still current: the store it was built from, the vectors' model
// fingerprint and the storage sequence number the graph reflects.
type Meta struct {
	StoreID     string // storage.Store.ID of the store the graph was built from
	Fingerprint string
	AppliedSeq  uint64
}

// File layout (little-endian):
//
//	magic "ANNADNS\x00" | u32 format version
//	u32 len + fingerprint | u64 applied seq
//	u32 Dim, M, EfSearch, EfConstruction
//	u32 len + store id (version 2; version 1 files load with StoreID "")
//	hnsw graph (hnsw.Graph.Export, format 2)
//	trailer: u32 CRC-32C of everything above, magic "ANNADEND"
var (
	fileMagic    = [8]byte{'A', 'N', 'N', 'A', 'D', 'N', 'S', 0}
	trailerMagic = [8]byte{'A', 'N', 'N', 'A', 'D', 'E', 'N', 'D'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

const (
	fileVersion    = 2 // 1 had no store id: it loads with StoreID ""
	maxFingerprint = 4096
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
	err := hnsw.WriteFileAtomic(path, func(w io.Writer) error {
		h := crc32.New(castagnoli)
		mw := io.MultiWriter(w, h)
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
		if err := ix.g.Export(mw); err != nil {
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

// hashingReader hashes exactly the bytes its user consumes (a bufio.Reader
// underneath reads ahead, so hashing below it would include the trailer).
type hashingReader struct {
	r *bufio.Reader
	h hash.Hash32
	b [1]byte
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	return n, err
}

func (hr *hashingReader) ReadByte() (byte, error) {
	c, err := hr.r.ReadByte()
	if err == nil {
		hr.b[0] = c
		hr.h.Write(hr.b[:])
	}
	return c, err
}

// Load reads an index written by Save. A missing file gives an error
// wrapping fs.ErrNotExist and creates nothing; a damaged one gives an error
// wrapping ErrCorrupt.
func Load(path string) (*Index, Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("dense: load: %w", err)
	}
	defer f.Close()
	hr := &hashingReader{r: bufio.NewReaderSize(f, 1<<16), h: crc32.New(castagnoli)}
	ix, meta, err := load(hr)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("dense: load %s: %w: %w", path, ErrCorrupt, err)
	}
	return ix, meta, nil
}

// readHeader reads everything before the graph.
func readHeader(hr *hashingReader) (Meta, Config, error) {
	le := binary.LittleEndian
	var fixed [16]byte
	if _, err := io.ReadFull(hr, fixed[:]); err != nil {
		return Meta{}, Config{}, fmt.Errorf("read header: %w", err)
	}
	if !bytes.Equal(fixed[:8], fileMagic[:]) {
		return Meta{}, Config{}, errors.New("not a dense index file (bad magic)")
	}
	version := le.Uint32(fixed[8:12])
	if version != 1 && version != fileVersion {
		return Meta{}, Config{}, fmt.Errorf("unsupported format version %d (want %d)", version, fileVersion)
	}
	fpLen := le.Uint32(fixed[12:16])
	if fpLen > maxFingerprint {
		return Meta{}, Config{}, fmt.Errorf("fingerprint length %d out of range", fpLen)
	}
	rest := make([]byte, int(fpLen)+8+16)
	if _, err := io.ReadFull(hr, rest); err != nil {
		return Meta{}, Config{}, fmt.Errorf("read header: %w", err)
	}
	meta := Meta{Fingerprint: string(rest[:fpLen]), AppliedSeq: le.Uint64(rest[fpLen:])}
	p := rest[fpLen+8:]
	if version >= 2 {
		var n [4]byte
		if _, err := io.ReadFull(hr, n[:]); err != nil {
			return Meta{}, Config{}, fmt.Errorf("read header: %w", err)
		}
		idLen := le.Uint32(n[:])
		if idLen > maxFingerprint {
			return Meta{}, Config{}, fmt.Errorf("store id length %d out of range", idLen)
		}
		id := make([]byte, idLen)
		if _, err := io.ReadFull(hr, id); err != nil {
			return Meta{}, Config{}, fmt.Errorf("read header: %w", err)
		}
		meta.StoreID = string(id)
	}
	var cfg Config
	for i, dst := range []*int{&cfg.Dim, &cfg.M, &cfg.EfSearch, &cfg.EfConstruction} {
		v := le.Uint32(p[4*i:])
		if v > 1<<20 {
			return Meta{}, Config{}, fmt.Errorf("config field %d = %d out of range", i, v)
		}
		*dst = int(v)
	}
	return meta, cfg, nil
}

func load(hr *hashingReader) (*Index, Meta, error) {
	meta, cfg, err := readHeader(hr)
	if err != nil {
		return nil, Meta{}, err
	}
	ix := New(cfg)
	if err := ix.g.Import(hr); err != nil {
		return nil, Meta{}, fmt.Errorf("import graph: %w", err)
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
	return ix, meta, nil
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
	meta, _, err := readHeader(hr)
	if err != nil {
		return Meta{}, fmt.Errorf("dense: read meta of %s: %w: %w", path, ErrCorrupt, err)
	}
	return meta, nil
}

// ReadIDs reads the document IDs of a saved index without verifying its
// checksum: for telling which documents a damaged file held (IDs read from
// a damaged file may themselves be damaged). It fails when the graph
// cannot be parsed at all.
func ReadIDs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dense: read ids: %w", err)
	}
	defer f.Close()
	hr := &hashingReader{r: bufio.NewReaderSize(f, 1<<16), h: crc32.New(castagnoli)}
	_, cfg, err := readHeader(hr)
	if err != nil {
		return nil, fmt.Errorf("dense: read ids of %s: %w", path, err)
	}
	ix := New(cfg)
	if err := ix.g.Import(hr); err != nil {
		return nil, fmt.Errorf("dense: read ids of %s: %w", path, err)
	}
	return ix.IDs(), nil
}
