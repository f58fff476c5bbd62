// Package storage keeps anna's documents, their vectors and the engine's
// state in one bbolt file. It is the source of truth: the lexical and dense
// indexes are derived from it and can be rebuilt from it at any time.
//
// Layout (bbolt buckets, all at the top level):
//
//	docs        doc ID (bytes as given) -> encoded Doc (see encodeDoc)
//	vectors     one nested bucket per model fingerprint:
//	              fp -> { doc ID -> vector as little-endian float32 bytes }
//	vector_dims fp -> dimension (uint32 little-endian), fixed by the first
//	            vector stored for fp; later vectors of another length are refused
//	changes     seq (uint64 big-endian) -> op byte ('p' put, 'd' delete) + doc ID
//	change_ids  doc ID -> seq of its entry in changes
//	state       engine key -> value (opaque bytes)
//	meta        "doc_count" -> number of docs (uint64 big-endian), kept so
//	            Count need not walk the docs bucket
//
// Seq: every change to a document (Put, PutVectors, Delete of an existing ID)
// takes the next number from the changes bucket's sequence, so seq is a
// monotonically increasing version of the store; Seq returns the last one and
// an empty store is at 0. The change log keeps only the latest entry per doc
// ID: writing an ID removes its previous entry (found through change_ids).
// The log therefore holds at most one entry per ID ever written (deletions
// stay as tombstones), and ChangesSince(s) visits exactly the IDs whose last
// change is after s. A derived index that records the seq it has applied can
// catch up by replaying ChangesSince(applied) and is then exactly in sync.
//
// Every write method is one bbolt transaction: documents, vectors and change
// entries commit together or not at all.
package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Doc is one document. ID is required and unique; Meta is free-form.
type Doc struct {
	ID, Title, Text string
	Meta            map[string]string
}

var (
	bucketDocs      = []byte("docs")
	bucketVectors   = []byte("vectors")
	bucketDims      = []byte("vector_dims")
	bucketChanges   = []byte("changes")
	bucketChangeIDs = []byte("change_ids")
	bucketState     = []byte("state")
	bucketMeta      = []byte("meta")

	keyDocCount = []byte("doc_count")
)

const (
	opPut    byte = 'p'
	opDelete byte = 'd'
)

// lockTimeout is how long Open waits for another process to release the
// file lock before giving up with ErrLocked.
const lockTimeout = 500 * time.Millisecond

// iterChunk is how many entries the ForEach methods read per read
// transaction. Callbacks run outside transactions, so they may write to the
// store, and long scans never pin old pages for long.
const iterChunk = 512

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = errors.New("database is locked by another process")

// Store is an open anna database. Its methods are safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
}

// Open opens the database file at path, creating it (and its directory) if
// needed. If another process has it open, Open fails with an error wrapping
// ErrLocked after a short wait.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("storage: open: empty path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("storage: open %s: %w", path, err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("storage: open %s: %w (waited %v)", path, ErrLocked, lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketDocs, bucketVectors, bucketDims, bucketChanges, bucketChangeIDs, bucketState, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Close releases the database file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", s.path, err)
	}
	return nil
}

// Put upserts docs in one transaction and appends one change entry per doc.
// When fp is not empty, vecs[i] is stored as the vector of docs[i] for model
// fingerprint fp (len(vecs) must equal len(docs)); when fp is empty vecs must
// be empty. Upserting a doc without vectors keeps its old vectors: callers
// that change a doc's text must pass fresh vectors or PutVectors them.
// It returns the seq of the last entry written (the current Seq if docs is
// empty). If the same ID appears twice, the later doc wins.
func (s *Store) Put(docs []Doc, fp string, vecs [][]float32) (uint64, error) {
	if fp == "" && len(vecs) != 0 {
		return 0, fmt.Errorf("storage: put: %d vectors given without a model fingerprint", len(vecs))
	}
	if fp != "" && len(vecs) != len(docs) {
		return 0, fmt.Errorf("storage: put: %d docs but %d vectors for fingerprint %q", len(docs), len(vecs), fp)
	}
	for i, d := range docs {
		if d.ID == "" {
			return 0, fmt.Errorf("storage: put: doc %d (title %q) has an empty ID", i, truncate(d.Title, 40))
		}
	}
	if fp != "" {
		if err := checkVectors(vecs); err != nil {
			return 0, fmt.Errorf("storage: put: %w", err)
		}
	}
	var seq uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		var vb *bolt.Bucket
		if fp != "" && len(vecs) > 0 {
			var err error
			if vb, err = vectorBucket(tx, fp, len(vecs[0])); err != nil {
				return err
			}
		}
		docsB := tx.Bucket(bucketDocs)
		added := 0
		for i, d := range docs {
			if docsB.Get([]byte(d.ID)) == nil {
				added++
			}
			if err := docsB.Put([]byte(d.ID), encodeDoc(d)); err != nil {
				return fmt.Errorf("doc %q: %w", d.ID, err)
			}
			if vb != nil {
				if err := vb.Put([]byte(d.ID), encodeVector(vecs[i])); err != nil {
					return fmt.Errorf("vector of doc %q: %w", d.ID, err)
				}
			}
			var err error
			if seq, err = logChange(tx, opPut, d.ID); err != nil {
				return err
			}
		}
		if len(docs) == 0 {
			seq = tx.Bucket(bucketChanges).Sequence()
		}
		return addDocCount(tx, added)
	})
	if err != nil {
		return 0, fmt.Errorf("storage: put %d docs: %w", len(docs), err)
	}
	return seq, nil
}

// PutVectors stores vectors for existing docs under model fingerprint fp (a
// reindex with a new model) and appends one change entry per ID, so an index
// catching up through ChangesSince sees them. Every ID must exist.
func (s *Store) PutVectors(fp string, ids []string, vecs [][]float32) (uint64, error) {
	if fp == "" {
		return 0, errors.New("storage: put vectors: empty model fingerprint")
	}
	if len(ids) != len(vecs) {
		return 0, fmt.Errorf("storage: put vectors: %d ids but %d vectors", len(ids), len(vecs))
	}
	if err := checkIDs(ids); err != nil {
		return 0, fmt.Errorf("storage: put vectors: %w", err)
	}
	if err := checkVectors(vecs); err != nil {
		return 0, fmt.Errorf("storage: put vectors: %w", err)
	}
	var seq uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		if len(ids) == 0 {
			return nil
		}
		vb, err := vectorBucket(tx, fp, len(vecs[0]))
		if err != nil {
			return err
		}
		docsB := tx.Bucket(bucketDocs)
		for i, id := range ids {
			if docsB.Get([]byte(id)) == nil {
				return fmt.Errorf("doc %q (index %d) does not exist", id, i)
			}
			if err := vb.Put([]byte(id), encodeVector(vecs[i])); err != nil {
				return fmt.Errorf("vector of doc %q: %w", id, err)
			}
			if seq, err = logChange(tx, opPut, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: put vectors for %q: %w", fp, err)
	}
	return seq, nil
}

// Delete removes docs and all their vectors (every fingerprint) and appends a
// delete entry per removed doc. Unknown IDs are ignored and logged nowhere, so
// deleting twice is harmless. It returns the seq of the last entry, or the
// current Seq when nothing was removed.
func (s *Store) Delete(ids []string) (uint64, error) {
	if err := checkIDs(ids); err != nil {
		return 0, fmt.Errorf("storage: delete: %w", err)
	}
	var seq uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		docsB := tx.Bucket(bucketDocs)
		var fps [][]byte
		if err := tx.Bucket(bucketDims).ForEach(func(k, _ []byte) error {
			fps = append(fps, bytes.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		vecsB := tx.Bucket(bucketVectors)
		removed := 0
		for _, id := range ids {
			key := []byte(id)
			if docsB.Get(key) == nil {
				continue
			}
			if err := docsB.Delete(key); err != nil {
				return fmt.Errorf("doc %q: %w", id, err)
			}
			for _, fp := range fps {
				if vb := vecsB.Bucket(fp); vb != nil {
					if err := vb.Delete(key); err != nil {
						return fmt.Errorf("vector %q of doc %q: %w", fp, id, err)
					}
				}
			}
			removed++
			var err error
			if seq, err = logChange(tx, opDelete, id); err != nil {
				return err
			}
		}
		return addDocCount(tx, -removed)
	})
	if err != nil {
		return 0, fmt.Errorf("storage: delete %d ids: %w", len(ids), err)
	}
	return seq, nil
}

// Get returns the doc with the given ID; ok is false if there is none.
func (s *Store) Get(id string) (d Doc, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDocs).Get([]byte(id))
		if v == nil {
			return nil
		}
		ok = true
		d, err = decodeDoc(id, v)
		return err
	})
	if err != nil {
		return Doc{}, false, fmt.Errorf("storage: get %q: %w", id, err)
	}
	return d, ok, nil
}

// GetMany returns the docs with the given IDs, in the order given; missing
// IDs are skipped.
func (s *Store) GetMany(ids []string) ([]Doc, error) {
	out := make([]Doc, 0, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDocs)
		for _, id := range ids {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			d, err := decodeDoc(id, v)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: get %d docs: %w", len(ids), err)
	}
	return out, nil
}

// Vector returns the vector of doc id for fingerprint fp.
func (s *Store) Vector(fp, id string) (v []float32, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		vb := tx.Bucket(bucketVectors).Bucket([]byte(fp))
		if vb == nil {
			return nil
		}
		raw := vb.Get([]byte(id))
		if raw == nil {
			return nil
		}
		ok = true
		v, err = decodeVector(raw)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("storage: vector %q of doc %q: %w", fp, id, err)
	}
	return v, ok, nil
}

// VectorDim returns the dimension of fingerprint fp's vectors, 0 if it has none.
func (s *Store) VectorDim(fp string) (int, error) {
	var dim int
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketDims).Get([]byte(fp)); len(v) == 4 {
			dim = int(binary.LittleEndian.Uint32(v))
		}
		return nil
	})
	return dim, err
}

// ForEachDoc calls fn for every doc in ID byte order. It reads in chunks of
// short read transactions and calls fn outside them, so fn may write to the
// store; a scan is then not a snapshot (docs written during it may or may not
// be seen). Pair it with Seq taken before the scan and ChangesSince after it
// to get a consistent view. An error from fn stops the scan and is returned.
func (s *Store) ForEachDoc(ctx context.Context, fn func(Doc) error) error {
	return s.scan(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketDocs) }, func(k, v []byte) (func() error, error) {
		d, err := decodeDoc(string(k), v)
		if err != nil {
			return nil, err
		}
		return func() error { return fn(d) }, nil
	})
}

// ForEachVector calls fn for every vector of fingerprint fp in ID byte order,
// with the same chunked semantics as ForEachDoc. An unknown fp visits nothing.
func (s *Store) ForEachVector(ctx context.Context, fp string, fn func(id string, v []float32) error) error {
	return s.scan(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketVectors).Bucket([]byte(fp)) }, func(k, raw []byte) (func() error, error) {
		v, err := decodeVector(raw)
		if err != nil {
			return nil, fmt.Errorf("vector of doc %q: %w", k, err)
		}
		id := string(k)
		return func() error { return fn(id, v) }, nil
	})
}

// scan walks a bucket in chunks: decode copies each entry out of the
// transaction and returns the call to make once the transaction is closed.
func (s *Store) scan(ctx context.Context, bucket func(*bolt.Tx) *bolt.Bucket, decode func(k, v []byte) (func() error, error)) error {
	var after []byte // last key visited; nil before the first chunk
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		calls := make([]func() error, 0, iterChunk)
		err := s.db.View(func(tx *bolt.Tx) error {
			b := bucket(tx)
			if b == nil {
				return nil
			}
			c := b.Cursor()
			var k, v []byte
			if after == nil {
				k, v = c.First()
			} else {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(calls) < iterChunk; k, v = c.Next() {
				if v == nil { // nested bucket, not an entry
					continue
				}
				call, err := decode(k, v)
				if err != nil {
					return err
				}
				calls = append(calls, call)
				after = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: scan: %w", err)
		}
		for _, call := range calls {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := call(); err != nil {
				return err
			}
		}
		if len(calls) < iterChunk {
			return nil
		}
	}
}

// Count returns the number of docs.
func (s *Store) Count() (int, error) {
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyDocCount); len(v) == 8 {
			n = int(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, err
}

// Seq returns the seq of the last change, 0 for a store never written.
func (s *Store) Seq() (uint64, error) {
	var seq uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		return nil
	})
	return seq, err
}

// ChangesSince calls fn, in seq order, once for every doc ID whose latest
// change has a seq greater than seq: the log is collapsed to the latest entry
// per ID, so intermediate states are not replayed. deleted is true when that
// latest change removed the doc (it no longer exists). Like ForEachDoc it
// reads in chunks and calls fn outside transactions; changes made during the
// walk with seqs beyond the chunk being read are visited too.
func (s *Store) ChangesSince(ctx context.Context, seq uint64, fn func(seq uint64, id string, deleted bool) error) error {
	type change struct {
		seq     uint64
		id      string
		deleted bool
	}
	next := seq + 1
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := make([]change, 0, iterChunk)
		err := s.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketChanges).Cursor()
			for k, v := c.Seek(seqKey(next)); k != nil && len(batch) < iterChunk; k, v = c.Next() {
				if len(k) != 8 || len(v) < 1 {
					return fmt.Errorf("corrupt change entry %x", k)
				}
				batch = append(batch, change{binary.BigEndian.Uint64(k), string(v[1:]), v[0] == opDelete})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: changes since %d: %w", seq, err)
		}
		for _, ch := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(ch.seq, ch.id, ch.deleted); err != nil {
				return err
			}
		}
		if len(batch) < iterChunk {
			return nil
		}
		next = batch[len(batch)-1].seq + 1
	}
}

// SetState stores an engine value under key.
func (s *Store) SetState(key string, val []byte) error {
	if key == "" {
		return errors.New("storage: set state: empty key")
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketState).Put([]byte(key), val)
	})
	if err != nil {
		return fmt.Errorf("storage: set state %q: %w", key, err)
	}
	return nil
}

// State returns the value stored under key, nil if unset.
func (s *Store) State(key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketState).Get([]byte(key)); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: state %q: %w", key, err)
	}
	return out, nil
}

// DeleteVectors drops every vector of fingerprint fp and its recorded
// dimension. It writes no change entries: it retires a model, it does not
// change any doc.
func (s *Store) DeleteVectors(fp string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketVectors).Bucket([]byte(fp)) != nil {
			if err := tx.Bucket(bucketVectors).DeleteBucket([]byte(fp)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketDims).Delete([]byte(fp))
	})
	if err != nil {
		return fmt.Errorf("storage: delete vectors %q: %w", fp, err)
	}
	return nil
}

func addDocCount(tx *bolt.Tx, delta int) error {
	if delta == 0 {
		return nil
	}
	b := tx.Bucket(bucketMeta)
	var n int64
	if v := b.Get(keyDocCount); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += int64(delta)
	if n < 0 {
		return fmt.Errorf("doc count would drop to %d", n)
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return b.Put(keyDocCount, v[:])
}

// logChange appends an entry for id and removes its previous one.
func logChange(tx *bolt.Tx, op byte, id string) (uint64, error) {
	changes, ids := tx.Bucket(bucketChanges), tx.Bucket(bucketChangeIDs)
	key := []byte(id)
	if prev := ids.Get(key); prev != nil {
		if err := changes.Delete(prev); err != nil {
			return 0, fmt.Errorf("change log for %q: %w", id, err)
		}
	}
	seq, err := changes.NextSequence()
	if err != nil {
		return 0, fmt.Errorf("change log for %q: %w", id, err)
	}
	val := make([]byte, 1+len(id))
	val[0] = op
	copy(val[1:], id)
	sk := seqKey(seq)
	if err := changes.Put(sk, val); err != nil {
		return 0, fmt.Errorf("change log for %q: %w", id, err)
	}
	if err := ids.Put(key, sk); err != nil {
		return 0, fmt.Errorf("change log for %q: %w", id, err)
	}
	return seq, nil
}

// vectorBucket returns fp's vector bucket, checking (and on first use
// recording) its dimension.
func vectorBucket(tx *bolt.Tx, fp string, dim int) (*bolt.Bucket, error) {
	dims := tx.Bucket(bucketDims)
	if v := dims.Get([]byte(fp)); len(v) == 4 {
		if have := int(binary.LittleEndian.Uint32(v)); have != dim {
			return nil, fmt.Errorf("fingerprint %q holds %d-dim vectors, got %d", fp, have, dim)
		}
	} else {
		var v [4]byte
		binary.LittleEndian.PutUint32(v[:], uint32(dim))
		if err := dims.Put([]byte(fp), v[:]); err != nil {
			return nil, err
		}
	}
	return tx.Bucket(bucketVectors).CreateBucketIfNotExists([]byte(fp))
}

func checkIDs(ids []string) error {
	for i, id := range ids {
		if id == "" {
			return fmt.Errorf("id %d is empty", i)
		}
	}
	return nil
}

func checkVectors(vecs [][]float32) error {
	if len(vecs) == 0 {
		return nil
	}
	dim := len(vecs[0])
	if dim == 0 {
		return errors.New("vector 0 is empty")
	}
	for i, v := range vecs {
		if len(v) != dim {
			return fmt.Errorf("vector %d has %d dims, vector 0 has %d", i, len(v), dim)
		}
	}
	return nil
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func encodeVector(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

func decodeVector(raw []byte) ([]float32, error) {
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("vector of %d bytes is not a whole number of float32s", len(raw))
	}
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v, nil
}

// docVersion tags the doc encoding so it can change later.
const docVersion = 1

// encodeDoc writes version, title, text, then the meta pairs sorted by key,
// every string as uvarint length + bytes. Binary rather than JSON so any
// bytes round-trip exactly (JSON would replace invalid UTF-8).
func encodeDoc(d Doc) []byte {
	n := 1 + 2*binary.MaxVarintLen64 + len(d.Title) + len(d.Text) + binary.MaxVarintLen64
	keys := make([]string, 0, len(d.Meta))
	for k, v := range d.Meta {
		keys = append(keys, k)
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	sort.Strings(keys)
	buf := make([]byte, 0, n)
	buf = append(buf, docVersion)
	buf = appendString(buf, d.Title)
	buf = appendString(buf, d.Text)
	buf = binary.AppendUvarint(buf, uint64(len(keys)))
	for _, k := range keys {
		buf = appendString(buf, k)
		buf = appendString(buf, d.Meta[k])
	}
	return buf
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func decodeDoc(id string, raw []byte) (Doc, error) {
	if len(raw) == 0 || raw[0] != docVersion {
		return Doc{}, fmt.Errorf("doc %q: unknown encoding", id)
	}
	r := reader{buf: raw[1:]}
	d := Doc{ID: id, Title: r.string(), Text: r.string()}
	if n := r.uvarint(); n > 0 && r.err == nil {
		if n > uint64(len(r.buf)) {
			return Doc{}, fmt.Errorf("doc %q: corrupt meta count %d", id, n)
		}
		d.Meta = make(map[string]string, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := r.string()
			d.Meta[k] = r.string()
		}
	}
	if r.err != nil {
		return Doc{}, fmt.Errorf("doc %q: %w", id, r.err)
	}
	return d, nil
}

type reader struct {
	buf []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.err = errors.New("corrupt length")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.buf)) {
		r.err = fmt.Errorf("string of %d bytes overruns record", n)
		return ""
	}
	s := string(r.buf[:n])
	r.buf = r.buf[n:]
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
