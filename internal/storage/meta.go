package storage

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt keeps two meta pages (pages 0 and 1) and writes them alternately,
// transaction id modulo 2. If one is damaged it silently opens the file at
// the other one, which may be the older: the last committed transaction is
// then gone without a word. metaPages reads both itself so the store can say
// so. The layout is bbolt's (internal/common/meta.go, page.go), little-endian
// on the platforms anna builds for:
//
//	page header  id u64 | flags u16 | count u16 | overflow u32   (16 bytes)
//	meta         magic u32 | version u32 | pageSize u32 | flags u32 |
//	             root {pgid u64, sequence u64} | freelist u64 | pgid u64 |
//	             txid u64 | checksum u64 (FNV-64a of the 56 bytes before it)
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltPageHeader = 16
	boltMetaSize   = 64
	boltMetaFlag   = 0x04
)

// metaPage is what one of bbolt's meta pages says, or why it is unusable.
type metaPage struct {
	OK       bool
	Problem  string // why it is unusable ("" when OK)
	PageSize int
	Pgid     uint64 // high-water mark: pages in use
	TxID     uint64
}

// metaInfo describes both meta pages of a file.
type metaInfo struct {
	Pages [2]metaPage
}

// current is the page bbolt opens the file at: the valid one with the higher
// transaction id (-1 when neither is valid).
func (m metaInfo) current() int {
	switch {
	case m.Pages[0].OK && m.Pages[1].OK:
		if m.Pages[1].TxID > m.Pages[0].TxID {
			return 1
		}
		return 0
	case m.Pages[0].OK:
		return 0
	case m.Pages[1].OK:
		return 1
	}
	return -1
}

// damage describes a damaged meta page next to a good one, "" when both are
// good or neither is.
func (m metaInfo) damage() string {
	cur := m.current()
	if cur < 0 || m.Pages[1-cur].OK {
		return ""
	}
	return fmt.Sprintf("bbolt meta page %d is damaged (%s); the file opens at meta page %d (transaction %d), which may be older than the last commit: committed changes may be lost",
		1-cur, m.Pages[1-cur].Problem, cur, m.Pages[cur].TxID)
}

// readMeta parses the meta page at offset off of f.
func readMeta(f io.ReaderAt, off int64, wantPage int) metaPage {
	buf := make([]byte, boltPageHeader+boltMetaSize)
	if n, err := f.ReadAt(buf, off); n < len(buf) {
		return metaPage{Problem: fmt.Sprintf("cannot read %d bytes at offset %d: %v", len(buf), off, err)}
	}
	le := binary.LittleEndian
	if flags := le.Uint16(buf[8:10]); flags != boltMetaFlag {
		return metaPage{Problem: fmt.Sprintf("page flags %#x, not a meta page", flags)}
	}
	m := buf[boltPageHeader:]
	if magic := le.Uint32(m[0:4]); magic != boltMagic {
		return metaPage{Problem: fmt.Sprintf("bad magic %#x", magic)}
	}
	if v := le.Uint32(m[4:8]); v != boltVersion {
		return metaPage{Problem: fmt.Sprintf("bbolt format version %d", v)}
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if sum := le.Uint64(m[56:64]); sum != h.Sum64() {
		return metaPage{Problem: "checksum mismatch"}
	}
	if id := le.Uint64(buf[0:8]); id != uint64(wantPage) {
		return metaPage{Problem: fmt.Sprintf("page id %d at the place of page %d", id, wantPage)}
	}
	return metaPage{OK: true, PageSize: int(le.Uint32(m[8:12])), Pgid: le.Uint64(m[40:48]), TxID: le.Uint64(m[48:56])}
}

// readMetaInfo reads both meta pages of the bbolt file at path. Page 1's
// offset is the page size, taken from page 0 when that is valid, else found
// by trying the sizes bbolt may have used.
func readMetaInfo(path string) (metaInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return metaInfo{}, err
	}
	defer f.Close()
	var info metaInfo
	info.Pages[0] = readMeta(f, 0, 0)
	if info.Pages[0].OK {
		info.Pages[1] = readMeta(f, int64(info.Pages[0].PageSize), 1)
		return info, nil
	}
	info.Pages[1] = metaPage{Problem: "not found at any page size"}
	for _, size := range []int{os.Getpagesize(), 4096, 8192, 16384, 32768, 65536} {
		if p := readMeta(f, int64(size), 1); p.OK && p.PageSize == size {
			info.Pages[1] = p
			break
		}
	}
	return info, nil
}
