package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/safe"
)

// Doc is one document. ID is required and unique; Meta and MetaValues
// are free-form metadata (see engine.Document). Its fields are in the order
// of engine.Document's and beir.Doc's, so each converts to the others.
type Doc struct {
	ID, Title, Text string
	Meta            map[string]string
	MetaValues      map[string]filter.Value
	// Language is the language the document was given in (an ISO 639-1
	// code, package lang), "" when none was: the indexes then choose
	// (detect) it, as they can again whenever they are rebuilt.
	Language string
}

// Span is a byte range [Start, End) of a document's text.
type Span struct{ Start, End int }

// Embedding is a document's vectors for one model: one per passage — a
// window of the document as the model embeds it; a document that fits the
// model is one passage — with each passage's span in the document's text.
// Every vector of an embedding has the model's dimension.
type Embedding struct {
	Vectors [][]float32
	Spans   []Span // len(Spans) == len(Vectors)
}

// Dim is the dimension of e's vectors (0 when it has none).
func (e Embedding) Dim() int {
	if len(e.Vectors) == 0 {
		return 0
	}
	return len(e.Vectors[0])
}

// Op is the kind of a change-log entry.
type Op byte

const (
	OpPut     Op = 'p' // the document was written (its text may have changed)
	OpDelete  Op = 'd' // the document was removed
	OpVectors Op = 'v' // only vectors were written (a reindex); the text is as of TextSeq
)

// Change is the latest change-log entry of one document.
type Change struct {
	Seq     uint64
	ID      string
	Op      Op
	TextSeq uint64 // seq of the last change to the doc's text (OpPut: Seq itself)
}

var (
	bucketDocs      = []byte("docs")
	bucketVectors   = []byte("vectors")
	bucketDims      = []byte("vector_dims")
	bucketChanges   = []byte("changes")
	bucketChangeIDs = []byte("change_ids")
	bucketState     = []byte("state")
	bucketMeta      = []byte("meta")

	allBuckets = [][]byte{bucketDocs, bucketVectors, bucketDims, bucketChanges, bucketChangeIDs, bucketState, bucketMeta}

	keyDocCount = []byte("doc_count")
	keyFormat   = []byte("format")
	keyStoreID  = []byte("store_id")
)

// storeFormat is written once at creation. 1 was the layout before records
// carried seqs and checksums (no "format" key).
const storeFormat = "2"

// lockTimeout is how long Open waits for another process to release the
// file lock before giving up with ErrLocked.
const lockTimeout = 500 * time.Millisecond

// iterChunk is how many entries the ForEach methods read per read
// transaction. Callbacks run outside transactions, so they may write to the
// store, and long scans never pin old pages for long.
const iterChunk = 512

var (
	// ErrLocked is returned by Open when another process holds the database.
	ErrLocked = errors.New("database is locked by another process")
	// ErrEmptyFile is returned by Open for a zero-length file: anna creates
	// stores whole (see Create), so an empty one is always damage.
	ErrEmptyFile = errors.New("store file is empty (0 bytes)")
	// ErrCorrupt is wrapped by every error that reports damage: a file that
	// is not a store, a truncated one, a record whose checksum fails, a page
	// bbolt cannot read.
	ErrCorrupt = errors.New("store is damaged")
	// ErrFormat is returned by Open for a store of another format version.
	ErrFormat = errors.New("unsupported store format")
	// ErrReadOnly is returned by writes to a store opened read-only.
	ErrReadOnly = errors.New("store is open read-only")
)

// Options configure Open.
type Options struct {
	// ReadOnly opens without writing anything (a shared lock: other readers
	// may open the file at the same time, writers wait).
	ReadOnly bool
	// Create creates the store when path does not exist. A path that exists
	// is never re-created, whatever it holds.
	Create bool
	// LockWait is how long Open waits for the file lock while another open
	// holds it (0: 500 ms; negative: one try, no wait).
	LockWait time.Duration
}

// Store is an open anna database. Its methods are safe for concurrent use.
type Store struct {
	db       *bolt.DB
	path     string
	id       string
	readOnly bool
	warning  string // a damaged meta page found at Open ("" if none)
}

// Open opens the store at path. A missing file gives an error wrapping
// fs.ErrNotExist unless opts.Create; a zero-length one ErrEmptyFile; a file
// that is not a store, or is truncated, ErrCorrupt; another anna format
// ErrFormat. If another open has the file for writing (or, for a writer,
// open at all), Open fails with ErrLocked after opts.LockWait. The lock is
// bbolt's flock, held per open file: a second Open of the same file in one
// process conflicts with the first as another process's would.
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("storage: open: empty path")
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && opts.Create && !opts.ReadOnly:
		if err := create(path); err != nil {
			return nil, fmt.Errorf("storage: create %s: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	case fi.IsDir():
		return nil, fmt.Errorf("storage: open %s: is a directory", path)
	case fi.Size() == 0:
		return nil, fmt.Errorf("storage: open %s: %w", path, ErrEmptyFile)
	}
	info, err := readMetaInfo(path)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if info.current() < 0 {
		return nil, fmt.Errorf("storage: open %s: %w: not a bbolt file, or both of its meta pages are damaged (page 0: %s; page 1: %s)",
			path, ErrCorrupt, info.Pages[0].Problem, info.Pages[1].Problem)
	}
	// bbolt would read past the end of a truncated file (a fault, or a
	// panic on the zeros of a sparse one): refuse it first.
	if fi, err := os.Stat(path); err == nil {
		cur := info.Pages[info.current()]
		if inUse := int64(cur.Pgid) * int64(cur.PageSize); fi.Size() < inUse {
			return nil, fmt.Errorf("storage: open %s: %w: the file is truncated: %d bytes, its meta page says %d are in use", path, ErrCorrupt, fi.Size(), inUse)
		}
	}
	wait, waited := opts.LockWait, opts.LockWait
	switch {
	case wait == 0:
		wait, waited = lockTimeout, lockTimeout
	case wait < 0:
		wait, waited = time.Nanosecond, 0 // bbolt tries once: 0 would wait forever
	}
	db, err := openBolt(path, opts.ReadOnly, wait)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("storage: open %s: %w (waited %v)", path, ErrLocked, waited)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("storage: open %s: %w: %w", path, ErrCorrupt, err)
	case err != nil:
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, readOnly: opts.ReadOnly, warning: info.damage()}
	if err := s.view(s.checkOpen); err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return s, nil
}

// openBolt is bolt.Open with a panic or memory fault inside it (bbolt's
// reaction to a damaged page) turned into ErrCorrupt.
func openBolt(path string, readOnly bool, wait time.Duration) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: bbolt cannot open it: %v", ErrCorrupt, r)
		}
	}()
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: wait, FreelistType: bolt.FreelistMapType, ReadOnly: readOnly})
}

// checkOpen refuses a truncated file (bbolt would fault reading past its
// end), a store without anna's buckets, and another format; it reads the
// store's id.
func (s *Store) checkOpen(tx *bolt.Tx) error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return err
	}
	if fi.Size() < tx.Size() {
		return fmt.Errorf("%w: the file is truncated: %d bytes, its meta page says %d", ErrCorrupt, fi.Size(), tx.Size())
	}
	for _, b := range allBuckets {
		if tx.Bucket(b) == nil {
			return fmt.Errorf("%w: bucket %q is missing (not an anna store?)", ErrCorrupt, b)
		}
	}
	meta := tx.Bucket(bucketMeta)
	switch f := meta.Get(keyFormat); {
	case f == nil:
		return fmt.Errorf("%w: format 1 (written by an older anna); index the documents again into a new directory", ErrFormat)
	case string(f) != storeFormat:
		return fmt.Errorf("%w: format %q, this anna reads %q", ErrFormat, f, storeFormat)
	}
	id := meta.Get(keyStoreID)
	if len(id) != 32 {
		return fmt.Errorf("%w: store id %q is malformed", ErrCorrupt, id)
	}
	s.id = string(id)
	return nil
}

// create makes a new store whole under a temporary name and renames it into
// place, so path either does not exist or holds a complete, empty store.
func create(path string) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := path + ".creating"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		db.Close()
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyFormat, []byte(storeFormat)); err != nil {
			return err
		}
		return meta.Put(keyStoreID, []byte(hex.EncodeToString(id[:])))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// view and update run bbolt transactions, turning a panic inside bbolt (how
// it reacts to a damaged page) or a memory fault (a page past the end of a
// file truncated under us) into an error wrapping ErrCorrupt. bbolt rolls
// the transaction back either way.
func (s *Store) view(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverDamage(&err)
	return s.db.View(fn)
}

func (s *Store) update(fn func(*bolt.Tx) error) (err error) {
	if s.readOnly {
		return ErrReadOnly
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverDamage(&err)
	return s.db.Update(fn)
}

func (s *Store) recoverDamage(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: reading %s failed: %v", ErrCorrupt, s.path, r)
	}
}

// Close releases the database file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", s.path, err)
	}
	return nil
}

// ID is the store's identity: random, written once when the store was
// created. Derived indexes record it to tell their own store from another.
func (s *Store) ID() string { return s.id }

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Warning describes damage found when the store was opened that did not
// stop it from opening (a damaged bbolt meta page), "" when none.
func (s *Store) Warning() string { return s.warning }

// Put upserts docs in one transaction and appends one change entry per doc.
// When fp is not empty, embs[i] is stored as the embedding of docs[i] for
// model fingerprint fp (len(embs) must equal len(docs)); when fp is empty
// embs must be empty. Upserting a doc without an embedding keeps its old
// ones: callers that change a doc's text must pass fresh embeddings or
// PutVectors them.
// state entries are written in the same transaction (nil values delete).
// It returns the seq of the last entry written (the current Seq if docs is
// empty). If the same ID appears twice, the later doc wins.
func (s *Store) Put(docs []Doc, fp string, embs []Embedding, state map[string][]byte) (uint64, error) {
	if err := checkPut(docs, fp, embs, state); err != nil {
		return 0, fmt.Errorf("storage: put: %w", err)
	}
	var seq uint64
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		seq, err = putTx(tx, docs, fp, embs, state)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("storage: put %d docs: %w", len(docs), err)
	}
	return seq, nil
}

// checkPut says what is wrong with Put's arguments.
func checkPut(docs []Doc, fp string, embs []Embedding, state map[string][]byte) error {
	if fp == "" && len(embs) != 0 {
		return fmt.Errorf("%d embeddings given without a model fingerprint", len(embs))
	}
	if fp != "" && len(embs) != len(docs) {
		return fmt.Errorf("%d docs but %d embeddings for fingerprint %q", len(docs), len(embs), fp)
	}
	for i, d := range docs {
		if d.ID == "" {
			return fmt.Errorf("doc %d (title %q) has an empty ID", i, truncate(d.Title, 40))
		}
	}
	if err := checkState(state); err != nil {
		return err
	}
	if fp != "" {
		return checkEmbeddings(embs)
	}
	return nil
}

// putTx is Put's transaction.
func putTx(tx *bolt.Tx, docs []Doc, fp string, embs []Embedding, state map[string][]byte) (seq uint64, err error) {
	var vb *bolt.Bucket
	if fp != "" && len(embs) > 0 {
		if vb, err = vectorBucket(tx, fp, embs[0].Dim()); err != nil {
			return 0, err
		}
	}
	docsB := tx.Bucket(bucketDocs)
	added := 0
	for i, d := range docs {
		if docsB.Get([]byte(d.ID)) == nil {
			added++
		}
		if seq, err = logChange(tx, OpPut, d.ID, 0); err != nil {
			return 0, err
		}
		if err := docsB.Put([]byte(d.ID), encodeDoc(d, seq)); err != nil {
			return 0, fmt.Errorf("doc %q: %w", d.ID, err)
		}
		if vb != nil {
			if err := vb.Put([]byte(d.ID), encodeVector(fp, d.ID, seq, embs[i])); err != nil {
				return 0, fmt.Errorf("vector of doc %q: %w", d.ID, err)
			}
		}
	}
	if len(docs) == 0 {
		seq = tx.Bucket(bucketChanges).Sequence()
	}
	if err := putState(tx, state); err != nil {
		return 0, err
	}
	return seq, addDocCount(tx, added)
}

// Replace is Put of docs and Delete of deletes in one transaction: both
// happen or neither. An ID in both is put, not deleted. It returns the seq
// of the last entry written.
func (s *Store) Replace(docs []Doc, fp string, embs []Embedding, state map[string][]byte, deletes []string) (uint64, error) {
	if len(deletes) == 0 {
		return s.Put(docs, fp, embs, state)
	}
	if err := checkIDs(deletes); err != nil {
		return 0, fmt.Errorf("storage: replace: %w", err)
	}
	if err := checkPut(docs, fp, embs, state); err != nil {
		return 0, fmt.Errorf("storage: replace: %w", err)
	}
	put := make(map[string]bool, len(docs))
	for _, d := range docs {
		put[d.ID] = true
	}
	var gone []string
	for _, id := range deletes {
		if !put[id] {
			gone = append(gone, id)
		}
	}
	var seq uint64
	err := s.update(func(tx *bolt.Tx) error {
		if _, err := deleteTx(tx, gone); err != nil {
			return err
		}
		var err error
		seq, err = putTx(tx, docs, fp, embs, state)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("storage: replace %d docs, delete %d: %w", len(docs), len(gone), err)
	}
	return seq, nil
}

// PutVectors stores embeddings for existing docs under model fingerprint fp
// (a reindex with a new model) and appends one OpVectors change entry per
// ID, so an index catching up through ChangesSince sees them. Every ID must
// exist.
func (s *Store) PutVectors(fp string, ids []string, embs []Embedding) (uint64, error) {
	if fp == "" {
		return 0, errors.New("storage: put vectors: empty model fingerprint")
	}
	if len(ids) != len(embs) {
		return 0, fmt.Errorf("storage: put vectors: %d ids but %d embeddings", len(ids), len(embs))
	}
	if err := checkIDs(ids); err != nil {
		return 0, fmt.Errorf("storage: put vectors: %w", err)
	}
	if err := checkEmbeddings(embs); err != nil {
		return 0, fmt.Errorf("storage: put vectors: %w", err)
	}
	var seq uint64
	err := s.update(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		if len(ids) == 0 {
			return nil
		}
		vb, err := vectorBucket(tx, fp, embs[0].Dim())
		if err != nil {
			return err
		}
		docsB := tx.Bucket(bucketDocs)
		for i, id := range ids {
			raw := docsB.Get([]byte(id))
			if raw == nil {
				return fmt.Errorf("doc %q (index %d) does not exist", id, i)
			}
			_, textSeq, err := decodeDoc(id, raw)
			if err != nil {
				return err
			}
			if seq, err = logChange(tx, OpVectors, id, textSeq); err != nil {
				return err
			}
			if err := vb.Put([]byte(id), encodeVector(fp, id, seq, embs[i])); err != nil {
				return fmt.Errorf("vector of doc %q: %w", id, err)
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
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		seq, err = deleteTx(tx, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("storage: delete %d ids: %w", len(ids), err)
	}
	return seq, nil
}

// deleteTx is Delete's transaction.
func deleteTx(tx *bolt.Tx, ids []string) (uint64, error) {
	seq := tx.Bucket(bucketChanges).Sequence()
	docsB := tx.Bucket(bucketDocs)
	fps, err := fingerprints(tx)
	if err != nil {
		return 0, err
	}
	vecsB := tx.Bucket(bucketVectors)
	removed := 0
	for _, id := range ids {
		key := []byte(id)
		if docsB.Get(key) == nil {
			continue
		}
		if err := docsB.Delete(key); err != nil {
			return 0, fmt.Errorf("doc %q: %w", id, err)
		}
		for _, fp := range fps {
			if vb := vecsB.Bucket([]byte(fp)); vb != nil {
				if err := vb.Delete(key); err != nil {
					return 0, fmt.Errorf("vector %q of doc %q: %w", fp, id, err)
				}
			}
		}
		removed++
		if seq, err = logChange(tx, OpDelete, id, 0); err != nil {
			return 0, err
		}
	}
	return seq, addDocCount(tx, -removed)
}

// Get returns the doc with the given ID; ok is false if there is none.
func (s *Store) Get(id string) (d Doc, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDocs).Get([]byte(id))
		if v == nil {
			return nil
		}
		ok = true
		d, _, err = decodeDoc(id, v)
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
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDocs)
		for _, id := range ids {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			d, _, err := decodeDoc(id, v)
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

// Vector returns the embedding of doc id for fingerprint fp.
func (s *Store) Vector(fp, id string) (e Embedding, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		vb := tx.Bucket(bucketVectors).Bucket([]byte(fp))
		if vb == nil {
			return nil
		}
		raw := vb.Get([]byte(id))
		if raw == nil {
			return nil
		}
		ok = true
		e, _, err = decodeVector(fp, id, raw)
		return err
	})
	if err != nil {
		return Embedding{}, false, fmt.Errorf("storage: vector %q of doc %q: %w", fp, id, err)
	}
	return e, ok, nil
}

// Vectors returns the embeddings of fingerprint fp for ids, in the order
// given; an empty Embedding for an id without one.
func (s *Store) Vectors(fp string, ids []string) ([]Embedding, error) {
	out := make([]Embedding, len(ids))
	err := s.view(func(tx *bolt.Tx) error {
		vb := tx.Bucket(bucketVectors).Bucket([]byte(fp))
		if vb == nil {
			return nil
		}
		for i, id := range ids {
			if raw := vb.Get([]byte(id)); raw != nil {
				e, _, err := decodeVector(fp, id, raw)
				if err != nil {
					return fmt.Errorf("vector of doc %q: %w", id, err)
				}
				out[i] = e
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: vectors %q of %d docs: %w", fp, len(ids), err)
	}
	return out, nil
}

// NeedVectors returns the IDs among ids (in order) whose document exists
// but has no vector for fp, or one older than its text (the document
// changed since); unknown IDs are skipped.
func (s *Store) NeedVectors(fp string, ids []string) ([]string, error) {
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		docs := tx.Bucket(bucketDocs)
		vb := tx.Bucket(bucketVectors).Bucket([]byte(fp))
		for _, id := range ids {
			raw := docs.Get([]byte(id))
			if raw == nil {
				continue
			}
			_, textSeq, err := decodeDoc(id, raw)
			if err != nil {
				return err
			}
			var vraw []byte
			if vb != nil {
				vraw = vb.Get([]byte(id))
			}
			if vraw == nil {
				out = append(out, id)
				continue
			}
			_, vseq, err := decodeVector(fp, id, vraw)
			if err != nil {
				return fmt.Errorf("vector of doc %q: %w", id, err)
			}
			if vseq < textSeq {
				out = append(out, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: vectors needed for %q: %w", fp, err)
	}
	return out, nil
}

// VectorDim returns the dimension of fingerprint fp's vectors, 0 if it has none.
func (s *Store) VectorDim(fp string) (int, error) {
	var dim int
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketDims).Get([]byte(fp)); len(v) == 4 {
			dim = int(binary.LittleEndian.Uint32(v))
		}
		return nil
	})
	return dim, err
}

// Fingerprints lists the model fingerprints that have vectors.
func (s *Store) Fingerprints() ([]string, error) {
	var fps []string
	err := s.view(func(tx *bolt.Tx) (err error) {
		fps, err = fingerprints(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storage: fingerprints: %w", err)
	}
	return fps, nil
}

func fingerprints(tx *bolt.Tx) ([]string, error) {
	var fps []string
	err := tx.Bucket(bucketDims).ForEach(func(k, _ []byte) error {
		fps = append(fps, string(k))
		return nil
	})
	return fps, err
}

// ForEachDoc calls fn for every doc in ID byte order. It reads in chunks of
// short read transactions and calls fn outside them, so fn may write to the
// store; a scan is then not a snapshot (docs written during it may or may not
// be seen). Pair it with Seq taken before the scan and ChangesSince after it
// to get a consistent view. An error from fn stops the scan and is returned.
func (s *Store) ForEachDoc(ctx context.Context, fn func(Doc) error) error {
	ctx = safe.Ctx(ctx)
	return s.scan(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketDocs) }, func(k, v []byte) (func() error, error) {
		d, _, err := decodeDoc(string(k), v)
		if err != nil {
			return nil, err
		}
		return func() error { return fn(d) }, nil
	})
}

// ForEachID calls fn with every document ID in byte order, without
// decoding the documents (so a damaged record does not stop the walk), with
// the same chunked semantics as ForEachDoc.
func (s *Store) ForEachID(ctx context.Context, fn func(id string) error) error {
	ctx = safe.Ctx(ctx)
	return s.scan(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketDocs) }, func(k, _ []byte) (func() error, error) {
		id := string(k)
		return func() error { return fn(id) }, nil
	})
}

// ForEachVector calls fn for every embedding of fingerprint fp in ID byte
// order, with the same chunked semantics as ForEachDoc. An unknown fp
// visits nothing.
func (s *Store) ForEachVector(ctx context.Context, fp string, fn func(id string, e Embedding) error) error {
	ctx = safe.Ctx(ctx)
	return s.scan(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketVectors).Bucket([]byte(fp)) }, func(k, raw []byte) (func() error, error) {
		id := string(k)
		e, _, err := decodeVector(fp, id, raw)
		if err != nil {
			return nil, fmt.Errorf("vector of doc %q: %w", k, err)
		}
		return func() error { return fn(id, e) }, nil
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
		err := s.view(func(tx *bolt.Tx) error {
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
	err := s.view(func(tx *bolt.Tx) error {
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
	err := s.view(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		return nil
	})
	return seq, err
}

// ChangesSince calls fn, in seq order, once for every doc ID whose latest
// change has a seq greater than seq: the log is collapsed to the latest entry
// per ID, so intermediate states are not replayed. An OpDelete entry means
// the doc no longer exists. Like ForEachDoc it reads in chunks and calls fn
// outside transactions; changes made during the walk with seqs beyond the
// chunk being read are visited too.
func (s *Store) ChangesSince(ctx context.Context, seq uint64, fn func(Change) error) error {
	ctx = safe.Ctx(ctx)
	next := seq + 1
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := make([]Change, 0, iterChunk)
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketChanges).Cursor()
			for k, v := c.Seek(seqKey(next)); k != nil && len(batch) < iterChunk; k, v = c.Next() {
				ch, err := decodeChange(k, v)
				if err != nil {
					return err
				}
				batch = append(batch, ch)
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
			if err := fn(ch); err != nil {
				return err
			}
		}
		if len(batch) < iterChunk {
			return nil
		}
		next = batch[len(batch)-1].Seq + 1
	}
}

// SetState stores an engine value under key (nil deletes it).
func (s *Store) SetState(key string, val []byte) error {
	return s.SetStates(map[string][]byte{key: val})
}

// SetStates stores several engine values in one transaction (nil values
// delete their key).
func (s *Store) SetStates(state map[string][]byte) error {
	if err := checkState(state); err != nil {
		return fmt.Errorf("storage: set state: %w", err)
	}
	if err := s.update(func(tx *bolt.Tx) error { return putState(tx, state) }); err != nil {
		return fmt.Errorf("storage: set state: %w", err)
	}
	return nil
}

func checkState(state map[string][]byte) error {
	for k := range state {
		if k == "" {
			return errors.New("empty key")
		}
	}
	return nil
}

func putState(tx *bolt.Tx, state map[string][]byte) error {
	if len(state) == 0 {
		return nil
	}
	b := tx.Bucket(bucketState)
	version, err := b.NextSequence()
	if err != nil {
		return err
	}
	for k, v := range state {
		if err := b.Put([]byte(k), encodeState(k, version, v)); err != nil {
			return fmt.Errorf("state %q: %w", k, err)
		}
	}
	return nil
}

// State returns the value stored under key, nil if unset.
func (s *Store) State(key string) ([]byte, error) {
	var out []byte
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketState).Get([]byte(key)); v != nil {
			val, _, err := decodeState(key, v)
			if err != nil {
				return err
			}
			out = bytes.Clone(val)
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
	err := s.update(func(tx *bolt.Tx) error {
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
		return fmt.Errorf("%w: doc count would drop to %d", ErrCorrupt, n)
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return b.Put(keyDocCount, v[:])
}

// logChange appends an entry for id, removes its previous one, and returns
// the new entry's seq. textSeq is recorded for OpVectors entries; an OpPut
// entry's text seq is its own seq.
func logChange(tx *bolt.Tx, op Op, id string, textSeq uint64) (uint64, error) {
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
	if op == OpPut {
		textSeq = seq
	}
	sk := seqKey(seq)
	if err := changes.Put(sk, encodeChange(sk, op, textSeq, id)); err != nil {
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

// checkEmbeddings refuses an embedding without vectors, spans that do not
// match the vectors, and vectors of different dimensions.
func checkEmbeddings(embs []Embedding) error {
	if len(embs) == 0 {
		return nil
	}
	dim := embs[0].Dim()
	if dim == 0 {
		return errors.New("embedding 0 has no vector, or an empty one")
	}
	for i, e := range embs {
		if len(e.Vectors) == 0 {
			return fmt.Errorf("embedding %d has no vector", i)
		}
		if len(e.Spans) != len(e.Vectors) {
			return fmt.Errorf("embedding %d has %d vectors but %d spans", i, len(e.Vectors), len(e.Spans))
		}
		for j, v := range e.Vectors {
			if len(v) != dim {
				return fmt.Errorf("embedding %d vector %d has %d dims, embedding 0 has %d", i, j, len(v), dim)
			}
			if sp := e.Spans[j]; sp.Start < 0 || sp.End < sp.Start {
				return fmt.Errorf("embedding %d passage %d: span [%d, %d)", i, j, sp.Start, sp.End)
			}
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
