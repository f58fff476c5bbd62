package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// fill writes a store with puts, upserts, deletes, a second model's vectors
// and state, the mix the engine produces, and returns the live docs.
func fill(t *testing.T, s *Store) map[string]Doc {
	t.Helper()
	live := map[string]Doc{}
	vec := func(i, dim int) []float32 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(i*dim + j)
		}
		return v
	}
	for b := 0; b < 6; b++ {
		var docs []Doc
		var vecs [][]float32
		for i := 0; i < 40; i++ {
			n := b*40 + i
			d := Doc{ID: fmt.Sprintf("doc-%04d", n), Title: fmt.Sprint("title ", n), Text: strings.Repeat(fmt.Sprint("word", n, " "), 20+n%7)}
			if n%5 == 0 {
				d.Meta = map[string]string{"k": fmt.Sprint(n)}
			}
			docs = append(docs, d)
			vecs = append(vecs, vec(n, 8))
			live[d.ID] = d
		}
		if _, err := s.Put(docs, "model-a", one(vecs), map[string][]byte{"model": []byte("model-a")}); err != nil {
			t.Fatal(err)
		}
	}
	// Upserts, deletes, a re-add.
	var up []Doc
	var upv [][]float32
	for n := 0; n < 240; n += 9 {
		d := live[fmt.Sprintf("doc-%04d", n)]
		d.Text += " edited"
		up = append(up, d)
		upv = append(upv, vec(n+1000, 8))
		live[d.ID] = d
	}
	if _, err := s.Put(up, "model-a", one(upv), nil); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for n := 3; n < 240; n += 11 {
		id := fmt.Sprintf("doc-%04d", n)
		gone = append(gone, id)
		delete(live, id)
	}
	if _, err := s.Delete(gone); err != nil {
		t.Fatal(err)
	}
	readd := Doc{ID: "doc-0003", Text: "back again"}
	if _, err := s.Put([]Doc{readd}, "model-a", one([][]float32{vec(3, 8)}), nil); err != nil {
		t.Fatal(err)
	}
	live[readd.ID] = readd
	// A second model's vectors for every live doc (a reindex).
	var ids []string
	var vb [][]float32
	for id := range live {
		ids = append(ids, id)
		vb = append(vb, vec(len(ids), 4))
	}
	if _, err := s.PutVectors("model-b", ids, one(vb)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStates(map[string][]byte{"model": []byte("model-b"), "pending": nil}); err != nil {
		t.Fatal(err)
	}
	return live
}

func mustCheckClean(t *testing.T, s *Store, fp string) {
	t.Helper()
	ps, err := s.Check(context.Background(), CheckOptions{Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		t.Errorf("problem: %s", p)
	}
}

func TestCheckCleanStore(t *testing.T) {
	s, _ := openTemp(t)
	fill(t, s)
	mustCheckClean(t, s, "model-a")
	mustCheckClean(t, s, "model-b")
	// A doc upserted without vectors has a vector older than its text: fine
	// for the store, a problem for the model that must cover it.
	if _, err := s.Put([]Doc{{ID: "doc-0001", Text: "changed, no vector"}}, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	mustCheckClean(t, s, "")
	ps, _ := s.Check(context.Background(), CheckOptions{Fingerprint: "model-a"})
	if len(ps) != 1 || ps[0].N != 1 || ps[0].IDs[0] != "doc-0001" || !strings.Contains(ps[0].What, "older than the document's text") {
		t.Fatalf("stale vector not reported: %v", ps)
	}
}

func TestOpenRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "anna.db")
	if _, err := Open(path, Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file without Create: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Open without Create created the file")
	}
	if _, err := Open(path, Options{Create: true, ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only Create: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{Create: true}); !errors.Is(err, ErrEmptyFile) {
		t.Fatalf("zero-length file: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatal("a zero-length file was initialised")
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{Create: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage file: %v", err)
	}
}

func TestOpenRefusesTruncated(t *testing.T) {
	s, path := openTemp(t)
	fill(t, s)
	s.Close()
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated file: %v", err)
	}
	t.Log(err)
}

func TestReadOnlyWritesNothing(t *testing.T) {
	s, path := openTemp(t)
	fill(t, s)
	s.Close()
	before, _ := os.ReadFile(path)
	fi0, _ := os.Stat(path)
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	// Two readers at once (shared lock).
	ro2, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	ro2.Close()
	if n, _ := ro.Count(); n == 0 {
		t.Fatal("read-only store reads nothing")
	}
	for name, fn := range map[string]func() error{
		"put":    func() error { _, err := ro.Put([]Doc{{ID: "x"}}, "", nil, nil); return err },
		"delete": func() error { _, err := ro.Delete([]string{"doc-0001"}); return err },
		"state":  func() error { return ro.SetState("k", []byte("v")) },
		"vecs":   func() error { _, err := ro.PutVectors("m", []string{"doc-0001"}, one([][]float32{{1}})); return err },
		"drop":   func() error { return ro.DeleteVectors("model-a") },
	} {
		if err := fn(); !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v", name, err)
		}
	}
	mustCheckClean(t, ro, "model-b")
	ro.Close()
	after, _ := os.ReadFile(path)
	fi1, _ := os.Stat(path)
	if !bytes.Equal(before, after) || !fi0.ModTime().Equal(fi1.ModTime()) {
		t.Fatal("a read-only open changed the file")
	}
}

// TestDamagedRecordIsReported flips one byte inside a document's text in
// the file: reading that document fails with ErrCorrupt (never returns the
// damaged text), and Check names it.
func TestDamagedRecordIsReported(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.Put([]Doc{{ID: "victim", Text: "the quick brown fox jumps over the lazy dog"}, {ID: "bystander", Text: "fine"}}, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, _ := os.ReadFile(path)
	i := bytes.LastIndex(raw, []byte("quick brown"))
	if i < 0 {
		t.Fatal("text not found in the file")
	}
	raw[i] ^= 0x20
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Get("victim"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged record read: %v", err)
	}
	if d, ok, err := s.Get("bystander"); err != nil || !ok || d.Text != "fine" {
		t.Fatalf("undamaged record: %v %v %v", d, ok, err)
	}
	ps, err := s.Check(context.Background(), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].N != 1 || ps[0].IDs[0] != "victim" {
		t.Fatalf("check: %v", ps)
	}
	t.Log(ps[0])
}

// TestMetaPageFallbackReported overwrites the first 64 bytes of the file
// (meta page 0): bbolt silently opens at meta page 1, one transaction older.
// The store says so, and Check reports it.
func TestMetaPageFallbackReported(t *testing.T) {
	s, path := openTemp(t)
	for i := 0; i < 5; i++ {
		if _, err := s.Put([]Doc{{ID: fmt.Sprint("d", i), Text: "x"}}, "", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	seq, _ := s.Seq()
	s.Close()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 64), 0)
	f.Close()
	s, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(s.Warning(), "meta page 0 is damaged") {
		t.Fatalf("warning = %q", s.Warning())
	}
	got, _ := s.Seq()
	t.Logf("seq before %d, after the fallback %d; %s", seq, got, s.Warning())
	ps, _ := s.Check(context.Background(), CheckOptions{})
	found := false
	for _, p := range ps {
		found = found || strings.Contains(p.What, "meta page 0 is damaged")
	}
	if !found {
		t.Fatalf("check did not report the meta page: %v", ps)
	}
}

func snapshot(t *testing.T, s *Store) (docs map[string]Doc, vecs map[string]map[string][]float32, changes map[string]Change) {
	t.Helper()
	ctx := context.Background()
	docs = map[string]Doc{}
	if err := s.ForEachDoc(ctx, func(d Doc) error { docs[d.ID] = d; return nil }); err != nil {
		t.Fatal(err)
	}
	vecs = map[string]map[string][]float32{}
	fps, _ := s.Fingerprints()
	for _, fp := range fps {
		vecs[fp] = map[string][]float32{}
		if err := s.ForEachVector(ctx, fp, func(id string, e Embedding) error { vecs[fp][id] = e.Vectors[0]; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	changes = map[string]Change{}
	if err := s.ChangesSince(ctx, 0, func(c Change) error { changes[c.ID] = c; return nil }); err != nil {
		t.Fatal(err)
	}
	return docs, vecs, changes
}

// TestSalvageIntactFile: salvaging an undamaged file (freed pages full of
// stale copies included) gives back exactly the store.
func TestSalvageIntactFile(t *testing.T) {
	s, path := openTemp(t)
	live := fill(t, s)
	wantDocs, wantVecs, wantChanges := snapshot(t, s)
	wantSeq, _ := s.Seq()
	s.Close()
	if len(wantDocs) != len(live) {
		t.Fatalf("fill: %d docs, want %d", len(wantDocs), len(live))
	}
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	rep, err := Salvage(context.Background(), path, dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if len(rep.Lost)+len(rep.Older)+len(rep.Unconfirmed) != 0 || rep.Docs != len(live) {
		t.Fatalf("report %+v", rep)
	}
	got, err := Open(dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	mustCheckClean(t, got, "model-b")
	docs, vecs, changes := snapshot(t, got)
	if !reflect.DeepEqual(docs, wantDocs) {
		t.Fatal("salvaged docs differ")
	}
	if !reflect.DeepEqual(vecs, wantVecs) {
		t.Fatal("salvaged vectors differ")
	}
	for id, c := range wantChanges {
		if g := changes[id]; g.Op != c.Op || g.TextSeq != c.TextSeq || (c.Op == OpDelete) != (g.Op == OpDelete) {
			t.Fatalf("change of %s: %+v, want %+v", id, g, c)
		}
	}
	if seq, _ := got.Seq(); seq != wantSeq {
		t.Fatalf("seq %d, want %d", seq, wantSeq)
	}
	if v, _ := got.State("model"); string(v) != "model-b" {
		t.Fatalf("state model = %q (a stale copy won?)", v)
	}
	if v, _ := got.State("pending"); v != nil {
		t.Fatalf("deleted state came back: %q", v)
	}
	if got.ID() == "" {
		t.Fatal("salvaged store has no id")
	}
}

// TestSalvageTruncatedFile: with the second half of the file gone, Salvage
// keeps every whole record that is left, names the documents it lost, and
// writes a store that passes Check.
func TestSalvageTruncatedFile(t *testing.T) {
	s, path := openTemp(t)
	fill(t, s)
	wantDocs, _, _ := snapshot(t, s)
	s.Close()
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	rep, err := Salvage(context.Background(), path, dst)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	mustCheckClean(t, got, "")
	docs, _, _ := snapshot(t, got)
	flagged := map[string]bool{}
	for _, id := range append(rep.Older, rep.Unconfirmed...) {
		flagged[id] = true
	}
	for id, d := range docs {
		if !reflect.DeepEqual(d, wantDocs[id]) && !flagged[id] {
			t.Fatalf("salvaged %s = %+v, want %+v: a stale copy not reported as such", id, d, wantDocs[id])
		}
	}
	var missing []string
	for id := range wantDocs {
		if _, ok := docs[id]; !ok {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	t.Logf("kept %d of %d docs (%d older, %d unconfirmed); lost and named: %d; lost without a trace: %d", len(docs), len(wantDocs), len(rep.Older), len(rep.Unconfirmed), len(rep.Lost), len(missing)-len(rep.Lost))
	lost := map[string]bool{}
	for _, id := range rep.Lost {
		lost[id] = true
		if _, ok := wantDocs[id]; !ok {
			t.Fatalf("lost %q was not a live document", id)
		}
	}
	if len(docs) == 0 {
		t.Fatal("nothing salvaged from half a file")
	}
}
