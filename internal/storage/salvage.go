package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/anna-search/anna/internal/safe"
)

// SalvageReport tells what Salvage found and kept.
type SalvageReport struct {
	Pages int // pages read
	// MissingPages counts pages the meta page says are in use but the file
	// no longer holds (it was truncated).
	MissingPages int
	Docs         int      // documents written to the new store
	Vectors      int      // vectors written (all models)
	Deleted      int      // IDs whose newest record is a delete (not restored)
	Lost         []string // IDs whose newest change is a put but whose document record was not found whole
	// Older lists documents restored at an older version than their newest
	// change (the record of the newer text was not found whole).
	Older []string
	// Unconfirmed lists documents restored without their change-log entry:
	// they may have been changed or deleted later, by a change whose record
	// is gone.
	Unconfirmed []string
	Stale       int    // vectors older than their document's text, dropped (the engine re-embeds)
	Seq         uint64 // the new store's change seq
}

// Salvage reads every page of the store file src, damaged or not, keeps the
// records whose checksums prove them whole, and writes them into a new store
// created at dst (which must not exist).
//
// It does not go through bbolt's B+tree, so a truncated file, a damaged
// branch page or meta page loses only the records on the pages that are
// gone. The file also holds stale copies of records on freed pages; every
// record carries the seq of the change that wrote it (state values their
// version), and Salvage keeps the newest copy of each: a document whose
// newest change-log entry is a delete newer than its text stays deleted, a
// vector older than its document's text is dropped. Documents whose newest
// change is a put but whose record was not found are listed in Lost.
//
// The new store has a new ID (derived indexes must be rebuilt from it), a
// change log of one entry per document and per known deletion, and counters
// recomputed from what was kept.
func Salvage(ctx context.Context, src, dst string) (SalvageReport, error) {
	ctx = safe.Ctx(ctx)
	var rep SalvageReport
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("storage: salvage: %s already exists", dst)
	}
	f, err := os.Open(src)
	if err != nil {
		return rep, fmt.Errorf("storage: salvage: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("storage: salvage: %w", err)
	}
	pageSize := 4096
	if info, err := readMetaInfo(src); err == nil && info.current() >= 0 {
		cur := info.Pages[info.current()]
		pageSize = cur.PageSize
		if have := uint64(fi.Size()) / uint64(pageSize); cur.Pgid > have {
			rep.MissingPages = int(cur.Pgid - have)
		}
	}
	sv := newSalvager()
	// Pass 1 finds documents, the change log, state and the model
	// fingerprints; pass 2 the vectors, whose checksums need a fingerprint.
	for pass := 1; pass <= 2; pass++ {
		sv.pass = pass
		rep.Pages = 0
		for off := int64(2 * pageSize); off < fi.Size(); {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			n, err := sv.page(f, off, pageSize, fi.Size())
			if err != nil {
				return rep, fmt.Errorf("storage: salvage %s: %w", src, err)
			}
			rep.Pages++
			off += int64(n * pageSize)
		}
	}
	if err := sv.write(dst, &rep); err != nil {
		os.Remove(dst)
		return rep, fmt.Errorf("storage: salvage into %s: %w", dst, err)
	}
	return rep, nil
}

type docCopy struct {
	rec []byte // the sealed record as found
	seq uint64 // text seq
}

type vecCopy struct {
	rec []byte
	seq uint64
	dim int
}

type stateCopy struct {
	val     []byte // nil: deleted
	version uint64
}

type salvager struct {
	pass    int
	docs    map[string]docCopy
	changes map[string]Change // newest per ID
	state   map[string]stateCopy
	fps     map[string]bool
	vecs    map[string]map[string]vecCopy // fp -> id -> newest
	maxSeq  uint64
}

func newSalvager() *salvager {
	return &salvager{docs: map[string]docCopy{}, changes: map[string]Change{}, state: map[string]stateCopy{}, fps: map[string]bool{}, vecs: map[string]map[string]vecCopy{}}
}

// page reads the page at off and returns how many pages it spans (a leaf
// with overflow pages is read whole; anything implausible counts as one).
func (sv *salvager) page(f io.ReaderAt, off int64, pageSize int, size int64) (int, error) {
	hdr := make([]byte, boltPageHeader)
	if _, err := f.ReadAt(hdr, off); err != nil {
		return 1, nil // a short last page
	}
	le := binary.LittleEndian
	flags, count, overflow := le.Uint16(hdr[8:10]), int(le.Uint16(hdr[10:12])), int(le.Uint32(hdr[12:16]))
	const leafFlag = 0x02
	span := 1 + overflow
	if flags != leafFlag || count == 0 || off+int64(span*pageSize) > size || span > 1<<20 {
		return 1, nil
	}
	buf := make([]byte, span*pageSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		return 1, nil
	}
	sv.leaf(buf, count)
	return span, nil
}

// leaf visits the elements of a leaf page (or an inline bucket's page).
func (sv *salvager) leaf(p []byte, count int) {
	le := binary.LittleEndian
	for i := 0; i < count; i++ {
		e := boltPageHeader + 16*i
		if e+16 > len(p) {
			return
		}
		flags, pos, ks, vs := le.Uint32(p[e:]), int(le.Uint32(p[e+4:])), int(le.Uint32(p[e+8:])), int(le.Uint32(p[e+12:]))
		k0 := e + pos
		if pos < 0 || ks < 0 || vs < 0 || k0 < 0 || k0+ks+vs > len(p) || k0+ks+vs < k0 {
			continue
		}
		key, val := p[k0:k0+ks], p[k0+ks:k0+ks+vs]
		if flags&1 != 0 {
			sv.bucket(key, val)
			continue
		}
		sv.entry(key, val)
	}
}

// bucket notes a nested bucket: a model's vectors bucket names a
// fingerprint, the change log's header holds its sequence, and an inline
// bucket carries its page in the value.
func (sv *salvager) bucket(name, val []byte) {
	if len(val) < 16 {
		return
	}
	root, seq := binary.LittleEndian.Uint64(val), binary.LittleEndian.Uint64(val[8:])
	if sv.pass == 1 && bytes.Equal(name, bucketChanges) && seq > sv.maxSeq && seq < 1<<62 {
		sv.maxSeq = seq
	}
	if sv.pass == 1 && len(name) > 0 && !isAnnaBucket(name) {
		sv.fps[string(name)] = true
	}
	if root == 0 && len(val) >= 16+boltPageHeader {
		page := val[16:]
		if binary.LittleEndian.Uint16(page[8:10]) == 0x02 {
			sv.leaf(page, int(binary.LittleEndian.Uint16(page[10:12])))
		}
	}
}

func isAnnaBucket(name []byte) bool {
	for _, b := range allBuckets {
		if bytes.Equal(name, b) {
			return true
		}
	}
	return false
}

// entry classifies one key/value pair by the checksum it satisfies.
func (sv *salvager) entry(key, val []byte) {
	if sv.pass == 2 {
		for fp := range sv.fps {
			e, seq, err := decodeVector(fp, string(key), val)
			if err != nil {
				continue
			}
			m := sv.vecs[fp]
			if m == nil {
				m = map[string]vecCopy{}
				sv.vecs[fp] = m
			}
			if old, ok := m[string(key)]; !ok || seq > old.seq {
				m[string(key)] = vecCopy{rec: bytes.Clone(val), seq: seq, dim: e.Dim()}
			}
			return
		}
		return
	}
	if _, seq, err := decodeDoc(string(key), val); err == nil {
		id := string(key)
		if old, ok := sv.docs[id]; !ok || seq > old.seq {
			sv.docs[id] = docCopy{rec: bytes.Clone(val), seq: seq}
		}
		sv.seen(seq)
		return
	}
	if ch, err := decodeChange(key, val); err == nil {
		if old, ok := sv.changes[ch.ID]; !ok || ch.Seq > old.Seq {
			sv.changes[ch.ID] = ch
		}
		sv.seen(ch.Seq)
		return
	}
	if v, version, err := decodeState(string(key), val); err == nil {
		if old, ok := sv.state[string(key)]; !ok || version > old.version {
			sv.state[string(key)] = stateCopy{val: bytes.Clone(v), version: version}
		}
		// A short state value may name a model (the engine records its
		// fingerprint there): a candidate whose vectors pass 2 can prove.
		if len(v) > 0 && len(v) <= 256 {
			sv.fps[string(v)] = true
		}
		return
	}
	if len(val) == 4 && len(key) > 0 {
		// vector_dims: fingerprint -> dimension (checked against the
		// vectors themselves when they are written).
		sv.fps[string(key)] = true
	}
}

func (sv *salvager) seen(seq uint64) {
	if seq > sv.maxSeq {
		sv.maxSeq = seq
	}
}

// write resolves the newest copies and writes the new store.
func (sv *salvager) write(dst string, rep *SalvageReport) error {
	type liveDoc struct {
		id  string
		rec []byte
		seq uint64
	}
	var live []liveDoc
	var deleted []Change
	for id, ch := range sv.changes {
		d, ok := sv.docs[id]
		switch {
		case ch.Op == OpDelete && (!ok || d.seq < ch.Seq):
			deleted = append(deleted, ch)
		case ch.Op != OpDelete && !ok:
			rep.Lost = append(rep.Lost, id)
		}
	}
	for id, d := range sv.docs {
		ch, ok := sv.changes[id]
		switch {
		case ok && ch.Op == OpDelete && ch.Seq > d.seq:
			continue
		case !ok || ch.Op == OpDelete:
			rep.Unconfirmed = append(rep.Unconfirmed, id)
		case ch.TextSeq > d.seq:
			rep.Older = append(rep.Older, id)
		}
		live = append(live, liveDoc{id, d.rec, d.seq})
	}
	sort.Strings(rep.Unconfirmed)
	sort.Strings(rep.Older)
	sort.Strings(rep.Lost)
	sort.Slice(live, func(i, j int) bool { return live[i].id < live[j].id })
	rep.Deleted = len(deleted)

	if err := create(dst); err != nil {
		return err
	}
	db, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: lockTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err
	}
	defer db.Close()
	// Per model: the dimension most of its vectors have.
	dims := map[string]int{}
	for fp, m := range sv.vecs {
		count := map[int]int{}
		for _, v := range m {
			count[v.dim]++
		}
		for d, n := range count {
			if n > count[dims[fp]] {
				dims[fp] = d
			}
		}
	}
	const chunk = 2000
	for start := 0; start < len(live) || start == 0; start += chunk {
		part := live[start:min(start+chunk, len(live))]
		err := db.Update(func(tx *bolt.Tx) error {
			docsB, changes, ids := tx.Bucket(bucketDocs), tx.Bucket(bucketChanges), tx.Bucket(bucketChangeIDs)
			for _, d := range part {
				if err := docsB.Put([]byte(d.id), d.rec); err != nil {
					return err
				}
				entrySeq, op := d.seq, OpPut
				for fp, m := range sv.vecs {
					v, ok := m[d.id]
					if !ok || v.dim != dims[fp] {
						continue
					}
					if v.seq < d.seq {
						rep.Stale++
						continue
					}
					vb, err := vectorBucket(tx, fp, v.dim)
					if err != nil {
						return err
					}
					if err := vb.Put([]byte(d.id), v.rec); err != nil {
						return err
					}
					rep.Vectors++
					if v.seq > entrySeq {
						entrySeq, op = v.seq, OpVectors
					}
				}
				sk := seqKey(entrySeq)
				if err := changes.Put(sk, encodeChange(sk, op, d.seq, d.id)); err != nil {
					return err
				}
				if err := ids.Put([]byte(d.id), sk); err != nil {
					return err
				}
			}
			return addDocCount(tx, len(part))
		})
		if err != nil {
			return err
		}
		rep.Docs += len(part)
		if len(live) == 0 {
			break
		}
	}
	return db.Update(func(tx *bolt.Tx) error {
		changes, ids := tx.Bucket(bucketChanges), tx.Bucket(bucketChangeIDs)
		for _, ch := range deleted {
			sk := seqKey(ch.Seq)
			if err := changes.Put(sk, encodeChange(sk, OpDelete, 0, ch.ID)); err != nil {
				return err
			}
			if err := ids.Put([]byte(ch.ID), sk); err != nil {
				return err
			}
		}
		if err := changes.SetSequence(sv.maxSeq); err != nil {
			return err
		}
		rep.Seq = sv.maxSeq
		st := tx.Bucket(bucketState)
		var version uint64
		for _, c := range sv.state {
			version = max(version, c.version)
		}
		if err := st.SetSequence(version); err != nil {
			return err
		}
		for k, c := range sv.state {
			if err := st.Put([]byte(k), encodeState(k, c.version, c.val)); err != nil {
				return err
			}
		}
		return nil
	})
}
