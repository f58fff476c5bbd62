package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/anna-search/anna/internal/safe"
)

// Problem is one kind of inconsistency found by Check, with the documents it
// concerns.
type Problem struct {
	What string   // what is wrong, in words
	IDs  []string // documents involved, at most MaxIDs of them, in the order found
	N    int      // how many documents are involved in all (0 when none are)
}

func (p Problem) String() string {
	if p.N == 0 {
		return p.What
	}
	s := fmt.Sprintf("%s: %d document(s): %q", p.What, p.N, p.IDs)
	if p.N > len(p.IDs) {
		s += fmt.Sprintf(" and %d more", p.N-len(p.IDs))
	}
	return s
}

// MaxIDs is how many document IDs a Problem lists.
const MaxIDs = 20

// Problems collects problems, grouping the documents of each kind.
type Problems struct {
	list  []Problem
	index map[string]int
}

// Add records a problem without documents.
func (ps *Problems) Add(format string, args ...any) {
	ps.list = append(ps.list, Problem{What: fmt.Sprintf(format, args...)})
}

// AddID records that document id has the problem what.
func (ps *Problems) AddID(what, id string) {
	if ps.index == nil {
		ps.index = map[string]int{}
	}
	i, ok := ps.index[what]
	if !ok {
		i = len(ps.list)
		ps.index[what] = i
		ps.list = append(ps.list, Problem{What: what})
	}
	p := &ps.list[i]
	p.N++
	if len(p.IDs) < MaxIDs {
		p.IDs = append(p.IDs, id)
	}
}

// List returns the problems in the order first found.
func (ps *Problems) List() []Problem { return ps.list }

// CheckOptions configure Check.
type CheckOptions struct {
	// Fingerprint is the model every document must have a vector for, at
	// least as new as its text ("" skips that check).
	Fingerprint string
}

// Check verifies the store, modelled on bbolt's tx.Check, whose page-level
// check it runs first. It then reads every record and verifies its checksum,
// and that documents, vectors, the change log and the counters agree:
//
//   - both bbolt meta pages are valid, and the file is as long as they say;
//   - every document and vector decodes; every vector has the dimension
//     recorded for its model and belongs to an existing document;
//   - every document has exactly one change-log entry, a put or vectors
//     entry whose text seq is the document's; every deleted ID's entry is a
//     delete; change_ids and the log point at each other;
//   - the document counter equals the number of documents; no change is
//     numbered past the log's sequence;
//   - with opts.Fingerprint, every document has a vector for that model no
//     older than its text.
//
// Damage is reported as problems; the error is for a check that could not
// run (a cancelled context). Writers must not run during Check: its walks
// are not one snapshot.
func (s *Store) Check(ctx context.Context, opts CheckOptions) ([]Problem, error) {
	ctx = safe.Ctx(ctx)
	var ps Problems
	if info, err := readMetaInfo(s.path); err != nil {
		ps.Add("reading bbolt's meta pages: %v", err)
	} else if d := info.damage(); d != "" {
		ps.Add("%s", d)
	} else if s.warning != "" {
		ps.Add("%s (found when the store was opened)", s.warning)
	}
	sections := []struct {
		name string
		fn   func(*bolt.Tx) error
	}{
		{"file size", func(tx *bolt.Tx) error {
			fi, err := os.Stat(s.path)
			if err != nil {
				return err
			}
			if fi.Size() < tx.Size() {
				ps.Add("the file is truncated: %d bytes, its meta page says %d", fi.Size(), tx.Size())
			}
			return nil
		}},
		{"bbolt page check", func(tx *bolt.Tx) error {
			n := 0
			for err := range tx.Check() {
				if n++; n <= 20 {
					ps.Add("bbolt: %v", err)
				}
			}
			if n > 20 {
				ps.Add("bbolt: %d more page errors", n-20)
			}
			return nil
		}},
		{"documents", func(tx *bolt.Tx) error { return checkDocs(ctx, tx, opts.Fingerprint, &ps) }},
		{"change log", func(tx *bolt.Tx) error { return checkChanges(ctx, tx, &ps) }},
		{"state", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketState).ForEach(func(k, v []byte) error {
				if _, _, err := decodeState(string(k), v); err != nil {
					ps.Add("%v", err)
				}
				return nil
			})
		}},
	}
	for _, sec := range sections {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.view(sec.fn); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			ps.Add("%s: %v", sec.name, err)
		}
	}
	return ps.List(), nil
}

// cursorWalk steps through a bucket in key order, skipping nested buckets.
type cursorWalk struct {
	c    *bolt.Cursor
	k, v []byte
}

func newWalk(b *bolt.Bucket) *cursorWalk {
	w := &cursorWalk{}
	if b == nil {
		return w
	}
	w.c = b.Cursor()
	w.k, w.v = w.c.First()
	w.skip()
	return w
}

func (w *cursorWalk) skip() {
	for w.k != nil && w.v == nil {
		w.k, w.v = w.c.Next()
	}
}

func (w *cursorWalk) next() {
	w.k, w.v = w.c.Next()
	w.skip()
}

// at reports whether the walk stands on key.
func (w *cursorWalk) at(key []byte) bool { return w.k != nil && bytes.Equal(w.k, key) }

// checkDocs walks docs, change_ids and every model's vectors together in ID
// order (all are keyed by doc ID), so no ID set is held in memory.
func checkDocs(ctx context.Context, tx *bolt.Tx, fp string, ps *Problems) error {
	dims := map[string]int{}
	if err := tx.Bucket(bucketDims).ForEach(func(k, v []byte) error {
		if len(v) != 4 {
			ps.Add("model %q: malformed dimension record %x", k, v)
			return nil
		}
		dims[string(k)] = int(binary.LittleEndian.Uint32(v))
		return nil
	}); err != nil {
		return err
	}
	var fps []string
	vb := tx.Bucket(bucketVectors)
	if err := vb.ForEach(func(k, v []byte) error {
		if v != nil {
			ps.Add("vectors bucket holds a loose entry %q", k)
			return nil
		}
		if _, ok := dims[string(k)]; !ok {
			ps.Add("model %q has vectors but no recorded dimension", k)
		}
		fps = append(fps, string(k))
		return nil
	}); err != nil {
		return err
	}
	for f := range dims {
		if vb.Bucket([]byte(f)) == nil {
			ps.Add("model %q has a recorded dimension but no vectors bucket", f)
		}
	}
	sort.Strings(fps)

	docs := newWalk(tx.Bucket(bucketDocs))
	ids := newWalk(tx.Bucket(bucketChangeIDs))
	vecs := make([]*cursorWalk, len(fps))
	for i, f := range fps {
		vecs[i] = newWalk(vb.Bucket([]byte(f)))
	}
	changes := tx.Bucket(bucketChanges)
	count := 0
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// The next ID is the smallest key any walk stands on.
		var key []byte
		for _, w := range append([]*cursorWalk{docs, ids}, vecs...) {
			if w.k != nil && (key == nil || bytes.Compare(w.k, key) < 0) {
				key = w.k
			}
		}
		if key == nil {
			break
		}
		key = bytes.Clone(key)
		id := string(key)
		live := docs.at(key)
		var textSeq uint64
		docOK := false
		if live {
			count++
			var err error
			if _, textSeq, err = decodeDoc(id, docs.v); err != nil {
				ps.AddID("document record damaged (checksum or encoding)", id)
			} else {
				docOK = true
			}
			docs.next()
		}
		if ids.at(key) {
			checkLogEntry(changes, id, ids.v, live, docOK, textSeq, ps)
			ids.next()
		} else {
			ps.AddID("no change-log entry (change_ids)", id)
		}
		for i, w := range vecs {
			f := fps[i]
			if !w.at(key) {
				if live && f == fp {
					ps.AddID(fmt.Sprintf("no vector for the current model %s", fp), id)
				}
				continue
			}
			e, vseq, err := decodeVector(f, id, w.v)
			switch {
			case err != nil:
				ps.AddID(fmt.Sprintf("vector record of model %s damaged", f), id)
			case !live:
				ps.AddID(fmt.Sprintf("vector of model %s for a document that does not exist", f), id)
			case e.Dim() != dims[f]:
				ps.AddID(fmt.Sprintf("vector of model %s has the wrong dimension (recorded %d)", f, dims[f]), id)
			case f == fp && docOK && vseq < textSeq:
				ps.AddID(fmt.Sprintf("vector of the current model %s is older than the document's text", fp), id)
			}
			w.next()
		}
	}
	var stored uint64
	if v := tx.Bucket(bucketMeta).Get(keyDocCount); len(v) == 8 {
		stored = binary.BigEndian.Uint64(v)
	} else if v != nil {
		ps.Add("document counter is malformed: %x", v)
	}
	if stored != uint64(count) {
		ps.Add("document counter says %d, the store holds %d documents", stored, count)
	}
	return nil
}

// checkLogEntry checks the change-log entry that change_ids points at for id.
func checkLogEntry(changes *bolt.Bucket, id string, sk []byte, live, docOK bool, textSeq uint64, ps *Problems) {
	if len(sk) != 8 {
		ps.AddID("change_ids entry malformed", id)
		return
	}
	raw := changes.Get(sk)
	if raw == nil {
		ps.AddID("change_ids points at a missing change-log entry", id)
		return
	}
	ch, err := decodeChange(sk, raw)
	switch {
	case err != nil:
		ps.AddID("change-log entry damaged (checksum or encoding)", id)
	case ch.ID != id:
		ps.AddID(fmt.Sprintf("change_ids points at the entry of another document (%q)", ch.ID), id)
	case live && ch.Op == OpDelete:
		ps.AddID("the document exists but its last change is a delete", id)
	case !live && ch.Op != OpDelete:
		ps.AddID("the document does not exist but its last change is not a delete (lost document?)", id)
	case live && docOK && ch.TextSeq != textSeq:
		ps.AddID(fmt.Sprintf("the change log's text seq (%d) disagrees with the document's (%d)", ch.TextSeq, textSeq), id)
	}
}

// checkChanges checks that every log entry decodes, is pointed at by its
// ID's change_ids entry, and is numbered within the log's sequence.
func checkChanges(ctx context.Context, tx *bolt.Tx, ps *Problems) error {
	changes, ids := tx.Bucket(bucketChanges), tx.Bucket(bucketChangeIDs)
	last := changes.Sequence()
	c := changes.Cursor()
	n := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		ch, err := decodeChange(k, v)
		if err != nil {
			ps.Add("%v", err)
			continue
		}
		if ch.Seq > last {
			ps.AddID(fmt.Sprintf("change-log entry numbered past the log's sequence %d", last), ch.ID)
		}
		if p := ids.Get([]byte(ch.ID)); !bytes.Equal(p, k) {
			ps.AddID("change-log entry not pointed at by change_ids (a stale duplicate)", ch.ID)
		}
	}
	return nil
}
