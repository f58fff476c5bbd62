package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "anna.db")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

type change struct {
	seq     uint64
	id      string
	deleted bool
}

func changes(t *testing.T, s *Store, since uint64) []change {
	t.Helper()
	var out []change
	err := s.ChangesSince(context.Background(), since, func(c Change) error {
		out = append(out, change{c.Seq, c.ID, c.Op == OpDelete})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	s, _ := openTemp(t)
	docs := []Doc{
		{ID: "a", Title: "Alpha", Text: "first", Meta: map[string]string{"lang": "en", "k": ""}},
		{ID: "b", Text: "no title"},
		{ID: "ünï\x00code", Title: "bad utf8 \xff\xfe kept", Text: ""},
	}
	vecs := [][]float32{{1, 0, -0.5}, {0, 1, 3.25}, {-1e-30, 1e30, 0}}
	seq, err := s.Put(docs, "fp1", one(vecs), nil)
	if err != nil {
		t.Fatal(err)
	}
	if seq != 3 {
		t.Fatalf("seq = %d, want 3", seq)
	}
	for i, want := range docs {
		got, ok, err := s.Get(want.ID)
		if err != nil || !ok {
			t.Fatalf("get %q: ok=%v err=%v", want.ID, ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("get %q = %#v, want %#v", want.ID, got, want)
		}
		v, ok, err := s.Vector("fp1", want.ID)
		if err != nil || !ok || !reflect.DeepEqual(v.Vectors[0], vecs[i]) {
			t.Fatalf("vector %q = %v ok=%v err=%v, want %v", want.ID, v, ok, err, vecs[i])
		}
	}
	if _, ok, _ := s.Get("zzz"); ok {
		t.Fatal("unknown id found")
	}
	if _, ok, _ := s.Vector("other", "a"); ok {
		t.Fatal("vector found under unknown fingerprint")
	}
	got, err := s.GetMany([]string{"b", "missing", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "b" || got[1].ID != "a" {
		t.Fatalf("GetMany = %+v", got)
	}
	if n, _ := s.Count(); n != 3 {
		t.Fatalf("count = %d", n)
	}
	if d, _ := s.VectorDim("fp1"); d != 3 {
		t.Fatalf("dim = %d", d)
	}
	// Vectors are the seq (uint64) then little-endian float32s, then the
	// checksum: check the raw bytes of one.
	raw := encodeVector("fp", "id", 7, Embedding{Vectors: [][]float32{{1}}, Spans: []Span{{0, 3}}})
	if !reflect.DeepEqual(raw[:15], []byte{7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0x80, 0x3f}) || len(raw) != 19 {
		t.Fatalf("encoding of 1.0 = %x", raw)
	}
}

func TestUpsertDeleteAndChanges(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if seq, _ := s.Seq(); seq != 0 {
		t.Fatalf("fresh seq = %d", seq)
	}
	if cs := changes(t, s, 0); len(cs) != 0 {
		t.Fatalf("fresh changes = %v", cs)
	}
	mustPut := func(docs ...Doc) uint64 {
		seq, err := s.Put(docs, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	mustPut(Doc{ID: "a", Text: "a1"}, Doc{ID: "b", Text: "b1"}, Doc{ID: "c", Text: "c1"}) // 1..3
	mid, _ := s.Seq()
	mustPut(Doc{ID: "a", Text: "a2"}) // 4
	seq, err := s.Delete([]string{"b", "nope"})
	if err != nil || seq != 5 {
		t.Fatalf("delete: seq=%d err=%v", seq, err)
	}
	if seq, _ := s.Delete([]string{"nope"}); seq != 5 {
		t.Fatalf("deleting an unknown id moved seq to %d", seq)
	}
	mustPut(Doc{ID: "d", Text: "d1"})                           // 6
	mustPut(Doc{ID: "c", Text: "c2"}, Doc{ID: "c", Text: "c3"}) // 7, 8: later wins
	if d, _, _ := s.Get("a"); d.Text != "a2" {
		t.Fatalf("upsert: a = %q", d.Text)
	}
	if d, _, _ := s.Get("c"); d.Text != "c3" {
		t.Fatalf("duplicate in batch: c = %q", d.Text)
	}
	if n, _ := s.Count(); n != 3 {
		t.Fatalf("count = %d, want 3 (a, c, d)", n)
	}

	want := []change{{4, "a", false}, {5, "b", true}, {6, "d", false}, {8, "c", false}}
	if got := changes(t, s, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("changes since 0 = %v, want %v", got, want)
	}
	if got := changes(t, s, mid); !reflect.DeepEqual(got, want) {
		t.Fatalf("changes since %d = %v, want %v", mid, got, want)
	}
	if got := changes(t, s, 5); !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("changes since 5 = %v, want %v", got, want[2:])
	}
	if got := changes(t, s, 8); len(got) != 0 {
		t.Fatalf("changes since last = %v", got)
	}

	// Re-adding a deleted doc turns its tombstone into a put.
	mustPut(Doc{ID: "b", Text: "b2"})
	if got := changes(t, s, 8); !reflect.DeepEqual(got, []change{{9, "b", false}}) {
		t.Fatalf("re-add: %v", got)
	}

	var ids []string
	if err := s.ForEachDoc(ctx, func(d Doc) error { ids = append(ids, d.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b", "c", "d"}) {
		t.Fatalf("ForEachDoc ids = %v", ids)
	}
	stop := errors.New("stop")
	if err := s.ForEachDoc(ctx, func(Doc) error { return stop }); err != stop {
		t.Fatalf("callback error not returned: %v", err)
	}
}

func TestVectors(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if _, err := s.Put([]Doc{{ID: "x"}, {ID: "y"}}, "m1", one([][]float32{{1, 2}, {3, 4}}), nil); err != nil {
		t.Fatal(err)
	}
	seq, err := s.PutVectors("m2", []string{"x", "y"}, one([][]float32{{5, 6, 7}, {8, 9, 10}}))
	if err != nil || seq != 4 {
		t.Fatalf("PutVectors: seq=%d err=%v", seq, err)
	}
	if _, err := s.PutVectors("m2", []string{"x", "ghost"}, one([][]float32{{1, 1, 1}, {1, 1, 1}})); err == nil || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("PutVectors for a missing doc: %v", err)
	}
	if v, _, _ := s.Vector("m2", "x"); !reflect.DeepEqual(v.Vectors[0], []float32{5, 6, 7}) {
		t.Fatalf("the failed PutVectors was not rolled back: %v", v)
	}
	if _, err := s.PutVectors("m2", []string{"x"}, one([][]float32{{1, 2}})); err == nil || !strings.Contains(err.Error(), "3-dim") {
		t.Fatalf("dimension change accepted: %v", err)
	}
	if _, err := s.Put([]Doc{{ID: "z"}}, "m1", one([][]float32{{1, 2}, {3, 4}}), nil); err == nil {
		t.Fatal("docs/vectors length mismatch accepted")
	}
	if _, err := s.Put([]Doc{{ID: "z"}}, "", one([][]float32{{1, 2}}), nil); err == nil {
		t.Fatal("vectors without fingerprint accepted")
	}
	// Upsert without vectors keeps the old ones.
	if _, err := s.Put([]Doc{{ID: "x", Text: "new"}}, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Vector("m1", "x"); !ok {
		t.Fatal("upsert without vectors dropped them")
	}

	got := map[string][]float32{}
	if err := s.ForEachVector(ctx, "m2", func(id string, e Embedding) error { got[id] = e.Vectors[0]; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got["y"], []float32{8, 9, 10}) {
		t.Fatalf("ForEachVector = %v", got)
	}
	if err := s.ForEachVector(ctx, "unknown", func(string, Embedding) error { t.Fatal("visited"); return nil }); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Delete([]string{"y"}); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{"m1", "m2"} {
		if _, ok, _ := s.Vector(fp, "y"); ok {
			t.Fatalf("vector %s of deleted doc kept", fp)
		}
	}
	if err := s.DeleteVectors("m1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Vector("m1", "x"); ok {
		t.Fatal("DeleteVectors left a vector")
	}
	if d, _ := s.VectorDim("m1"); d != 0 {
		t.Fatal("DeleteVectors left the dimension")
	}
	if _, err := s.Put([]Doc{{ID: "x"}}, "m1", one([][]float32{{1, 2, 3, 4}}), nil); err != nil {
		t.Fatalf("a dropped fingerprint should accept a new dimension: %v", err)
	}
	if _, ok, _ := s.Vector("m2", "x"); !ok {
		t.Fatal("DeleteVectors(m1) touched m2")
	}
}

func TestBadInput(t *testing.T) {
	s, _ := openTemp(t)
	for name, fn := range map[string]func() error{
		"put":         func() error { _, err := s.Put([]Doc{{ID: "ok"}, {ID: "", Title: "T"}}, "", nil, nil); return err },
		"putvectors":  func() error { _, err := s.PutVectors("fp", []string{""}, one([][]float32{{1}})); return err },
		"delete":      func() error { _, err := s.Delete([]string{"a", ""}); return err },
		"emptyvector": func() error { _, err := s.Put([]Doc{{ID: "a"}}, "fp", one([][]float32{{}}), nil); return err },
		"ragged": func() error {
			_, err := s.Put([]Doc{{ID: "a"}, {ID: "b"}}, "fp", one([][]float32{{1}, {1, 2}}), nil)
			return err
		},
		"state": func() error { return s.SetState("", []byte("x")) },
	} {
		err := fn()
		if err == nil {
			t.Errorf("%s: bad input accepted", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	if _, err := s.Put([]Doc{{ID: "ok"}, {ID: ""}}, "", nil, nil); !strings.Contains(err.Error(), "doc 1") || !strings.Contains(err.Error(), "empty ID") {
		t.Errorf("error does not say which doc: %v", err)
	}
	if n, _ := s.Count(); n != 0 {
		t.Fatalf("a refused put wrote %d docs", n)
	}
}

// TestLockWait: Options.LockWait bounds the wait for another open's lock;
// negative tries once. Readers share the lock.
func TestLockWait(t *testing.T) {
	_, path := openTemp(t)
	for _, c := range []struct {
		ro   bool
		wait time.Duration
		says string
	}{{true, -1, "(waited 0s)"}, {false, -1, "(waited 0s)"}, {true, 120 * time.Millisecond, "(waited 120ms)"}} {
		if _, err := Open(path, Options{ReadOnly: c.ro, LockWait: c.wait}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("read-only %v, LockWait %v beside a writer: %v", c.ro, c.wait, err)
		}
	}
}

func TestReadersShareTheLock(t *testing.T) {
	s, path := openTemp(t)
	s.Close()
	r1, err := Open(path, Options{ReadOnly: true, LockWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Open(path, Options{ReadOnly: true, LockWait: -1})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	r2.Close()
	if _, err := Open(path, Options{LockWait: -1}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a writer beside a reader: %v", err)
	}
}

func TestReopenAndLock(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.Put([]Doc{{ID: "a", Text: "kept"}}, "fp", one([][]float32{{0.25}}), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetState("lexical", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	// flock is per open file description, so a second Open in this process
	// behaves like one from another process.
	if _, err := Open(path, Options{}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if d, ok, _ := s2.Get("a"); !ok || d.Text != "kept" {
		t.Fatalf("after reopen: %+v %v", d, ok)
	}
	if v, _, _ := s2.Vector("fp", "a"); !reflect.DeepEqual(v.Vectors[0], []float32{0.25}) {
		t.Fatalf("vector after reopen: %v", v)
	}
	if seq, _ := s2.Seq(); seq != 1 {
		t.Fatalf("seq after reopen = %d", seq)
	}
	if v, _ := s2.State("lexical"); string(v) != "v1" {
		t.Fatalf("state after reopen = %q", v)
	}
	if v, err := s2.State("unset"); v != nil || err != nil {
		t.Fatalf("unset state = %q, %v", v, err)
	}
	if n, _ := s2.Count(); n != 1 {
		t.Fatalf("count after reopen = %d", n)
	}
}

// TestLargeAndChunked stores large documents and more docs than one scan
// chunk, and writes from inside a scan callback (allowed by design).
func TestLargeAndChunked(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	big := strings.Repeat("large document text ", 1<<16) // ~1.3 MB
	if _, err := s.Put([]Doc{{ID: "big", Title: "big", Text: big}}, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if d, _, _ := s.Get("big"); d.Text != big {
		t.Fatal("large doc did not round-trip")
	}
	n := 3*iterChunk + 7
	docs := make([]Doc, n)
	for i := range docs {
		docs[i] = Doc{ID: fmt.Sprintf("d%05d", i), Text: fmt.Sprint(i)}
	}
	if _, err := s.Put(docs, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err := s.ForEachDoc(ctx, func(d Doc) error {
		seen++
		if d.ID == "d00010" { // a write during the scan must not deadlock
			_, err := s.Put([]Doc{{ID: "d00010", Text: "edited"}}, "", nil, nil)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != n+1 {
		t.Fatalf("scan saw %d docs, want %d", seen, n+1)
	}
	var last uint64
	count := 0
	err = s.ChangesSince(ctx, 0, func(c Change) error {
		if c.Seq <= last {
			return fmt.Errorf("seq %d after %d", c.Seq, last)
		}
		last = c.Seq
		count++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count != n+1 {
		t.Fatalf("changes visited %d ids, want %d", count, n+1)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.ForEachDoc(cctx, func(Doc) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled scan: %v", err)
	}
}

// one makes single-passage embeddings of vecs.
func one(vecs [][]float32) []Embedding {
	out := make([]Embedding, len(vecs))
	for i, v := range vecs {
		out[i] = Embedding{Vectors: [][]float32{v}, Spans: []Span{{0, 0}}}
	}
	return out
}

// TestPassages: an embedding of several passages round-trips with its
// spans; upserting with fewer passages replaces them all; check and
// salvage handle them.
func TestPassages(t *testing.T) {
	s, path := openTemp(t)
	three := Embedding{Vectors: [][]float32{{1, 2}, {3, 4}, {5, 6}}, Spans: []Span{{0, 10}, {5, 20}, {15, 30}}}
	if _, err := s.Put([]Doc{{ID: "long", Text: strings.Repeat("x", 30)}, {ID: "short", Text: "y"}}, "m", []Embedding{three, one([][]float32{{7, 8}})[0]}, nil); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Vector("m", "long")
	if err != nil || !ok || !reflect.DeepEqual(got, three) {
		t.Fatalf("long: %+v %v %v", got, ok, err)
	}
	if _, err := s.Put([]Doc{{ID: "x"}}, "m", []Embedding{{Vectors: [][]float32{{1, 2}, {3}}, Spans: []Span{{0, 1}, {1, 2}}}}, nil); err == nil {
		t.Fatal("passages of different dimensions accepted")
	}
	if _, err := s.Put([]Doc{{ID: "x"}}, "m", []Embedding{{Vectors: [][]float32{{1, 2}}}}, nil); err == nil {
		t.Fatal("an embedding without spans accepted")
	}
	shorter := Embedding{Vectors: [][]float32{{9, 9}}, Spans: []Span{{0, 30}}}
	if _, err := s.Put([]Doc{{ID: "long", Text: strings.Repeat("z", 30)}}, "m", []Embedding{shorter}, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Vector("m", "long"); !reflect.DeepEqual(got, shorter) {
		t.Fatalf("after the upsert: %+v", got)
	}
	mustCheckClean(t, s, "m")
	s.Close()
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	if _, err := Salvage(context.Background(), path, dst); err != nil {
		t.Fatal(err)
	}
	sv, err := Open(dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	if got, _, _ := sv.Vector("m", "long"); !reflect.DeepEqual(got, shorter) {
		t.Fatalf("salvaged: %+v (a stale copy of three passages?)", got)
	}
}
