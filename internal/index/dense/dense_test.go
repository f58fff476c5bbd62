package dense

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/index/dense/densetest"
)

var bg = context.Background()

func mustAdd(t *testing.T, ix *Index, ids []string, vecs [][]float32) {
	t.Helper()
	if err := ix.Add(bg, singles(ids, vecs)); err != nil {
		t.Fatal(err)
	}
}

// singles makes one single-passage document without metadata per ID.
func singles(ids []string, vecs [][]float32) []Doc {
	docs := make([]Doc, len(ids))
	for i, id := range ids {
		docs[i] = Doc{ID: id}
		if i < len(vecs) {
			docs[i].Vectors = [][]float32{vecs[i]}
		}
	}
	return docs
}

func hitIDs(hs []Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func TestEmptyIndex(t *testing.T) {
	ix := New(Config{Dim: 4})
	hits, err := ix.Search(bg, []float32{1, 0, 0, 0}, 10, SearchOptions{})
	if err != nil || len(hits) != 0 {
		t.Fatalf("Search on empty index = %v, %v", hits, err)
	}
	if err := ix.Delete([]string{"nope"}); err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 0 {
		t.Fatalf("Len = %d", ix.Len())
	}
	if got := Exact(nil, []float32{1, 0}, 3); len(got) != 0 {
		t.Fatalf("Exact on nothing = %v", got)
	}
}

func TestSearchBasics(t *testing.T) {
	ix := New(Config{Dim: 3})
	mustAdd(t, ix, []string{"x", "y", "z"}, [][]float32{{1, 0, 0}, {0, 2, 0}, {1, 1, 0}})
	hits, err := ix.Search(bg, []float32{3, 0, 0}, 10, SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 3 {
		t.Fatalf("k > Len gave %d hits, want 3", len(hits))
	}
	if !slices.Equal(hitIDs(hits), []string{"x", "z", "y"}) {
		t.Fatalf("order %v", hitIDs(hits))
	}
	// Scores are cosines even though the inputs were not unit length.
	want := []float32{1, float32(1 / math.Sqrt2), 0}
	for i, h := range hits {
		if math.Abs(float64(h.Score-want[i])) > 1e-6 {
			t.Errorf("hit %d %s score %v, want %v", i, h.ID, h.Score, want[i])
		}
	}
	if hits, _ := ix.Search(bg, []float32{0, 1, 0}, 0, SearchOptions{}); len(hits) != 0 {
		t.Fatalf("k=0 gave %v", hits)
	}
	if v, ok := ix.Vectors("y"); !ok || len(v) != 1 || !slices.Equal(v[0], []float32{0, 1, 0}) {
		t.Fatalf("Vectors(y) = %v %v", v, ok)
	}
}

func TestBadInput(t *testing.T) {
	ix := New(Config{Dim: 2})
	mustAdd(t, ix, []string{"a"}, [][]float32{{1, 0}})
	cases := []struct {
		name string
		ids  []string
		vecs [][]float32
	}{
		{"count mismatch", []string{"b", "c"}, [][]float32{{1, 0}}},
		{"wrong dim", []string{"b", "c"}, [][]float32{{1, 0}, {1, 0, 0}}},
		{"empty id", []string{""}, [][]float32{{1, 0}}},
		{"zero vector", []string{"b"}, [][]float32{{0, 0}}},
		{"NaN", []string{"b"}, [][]float32{{float32(math.NaN()), 1}}},
		{"Inf", []string{"b"}, [][]float32{{float32(math.Inf(1)), 1}}},
	}
	for _, c := range cases {
		if err := ix.Add(bg, singles(c.ids, c.vecs)); err == nil {
			t.Errorf("%s: Add accepted it", c.name)
		}
	}
	if ix.Len() != 1 {
		t.Fatalf("rejected batches inserted something: Len %d", ix.Len())
	}
	if _, err := ix.Search(bg, []float32{1, 0, 0}, 1, SearchOptions{}); err == nil {
		t.Error("query of wrong dimension accepted")
	}
	if _, err := ix.Search(bg, []float32{1, 0}, -1, SearchOptions{}); err == nil {
		t.Error("negative k accepted")
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := ix.Search(ctx, []float32{1, 0}, 1, SearchOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Search: %v", err)
	}
	if err := ix.Add(ctx, singles([]string{"b"}, [][]float32{{0, 1}})); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Add: %v", err)
	}
}

func TestUpsertReplacesVector(t *testing.T) {
	ix := New(Config{Dim: 2})
	mustAdd(t, ix, []string{"a", "b"}, [][]float32{{1, 0}, {0, 1}})
	mustAdd(t, ix, []string{"a"}, [][]float32{{0, 1}})
	if ix.Len() != 2 {
		t.Fatalf("Len = %d after upsert, want 2", ix.Len())
	}
	hits, _ := ix.Search(bg, []float32{1, 0}, 2, SearchOptions{})
	for _, h := range hits {
		if h.Score > 0.5 {
			t.Fatalf("old vector of a still found: %+v", hits)
		}
	}
}

// TestRandomOps checks random add / upsert / delete / search sequences
// against Exact over the live set, including deleting everything.
func TestRandomOps(t *testing.T) {
	const dim = 32
	pool := densetest.Clustered(7, 4000, dim, 20, 1.0)
	for seed := int64(0); seed < 4; seed++ {
		rng := rand.New(rand.NewSource(seed))
		ix := New(Config{Dim: dim, M: 8, EfConstruction: 64})
		ref := map[string][]float32{}
		hits, total := 0, 0
		for step := 0; step < 1500; step++ {
			switch op := rng.Intn(20); {
			case op < 9:
				var ids []string
				var vecs [][]float32
				for j := 0; j < 1+rng.Intn(8); j++ {
					ids = append(ids, fmt.Sprintf("d%d", rng.Intn(600)))
					vecs = append(vecs, pool[rng.Intn(len(pool))])
				}
				mustAdd(t, ix, ids, vecs)
				for j, id := range ids {
					ref[id] = vecs[j]
				}
			case op < 14:
				var ids []string
				for j := 0; j < 1+rng.Intn(4); j++ {
					ids = append(ids, fmt.Sprintf("d%d", rng.Intn(600)))
				}
				if err := ix.Delete(ids); err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					delete(ref, id)
				}
			case op == 14 && rng.Intn(10) == 0:
				var ids []string
				for id := range ref {
					ids = append(ids, id)
				}
				if err := ix.Delete(ids); err != nil {
					t.Fatal(err)
				}
				clear(ref)
				if got, err := ix.Search(bg, pool[0], 5, SearchOptions{}); err != nil || len(got) != 0 {
					t.Fatalf("search after deleting all: %v %v", got, err)
				}
			default:
				q := pool[rng.Intn(len(pool))]
				got, err := ix.Search(bg, q, 10, SearchOptions{Ef: 40})
				if err != nil {
					t.Fatal(err)
				}
				want := Exact(ref, q, 10)
				if len(got) != len(want) {
					t.Fatalf("seed %d step %d: %d hits, want %d", seed, step, len(got), len(want))
				}
				for _, h := range got {
					if _, ok := ref[h.ID]; !ok {
						t.Fatalf("seed %d step %d: deleted id %s returned", seed, step, h.ID)
					}
				}
				wantIDs := hitIDs(want)
				for _, h := range got {
					if slices.Contains(wantIDs, h.ID) {
						hits++
					}
				}
				total += len(want)
			}
			if ix.Len() != len(ref) {
				t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, ix.Len(), len(ref))
			}
		}
		r := float64(hits) / float64(max(total, 1))
		t.Logf("seed %d: recall@10 %.4f over %d searches", seed, r, total/10)
		if r < 0.95 {
			t.Errorf("seed %d: recall@10 %.4f < 0.95", seed, r)
		}
	}
}

// TestConcurrentSearchDuringAdd is for -race.
func TestConcurrentSearchDuringAdd(t *testing.T) {
	const dim = 16
	data := densetest.Clustered(3, 1500, dim, 10, 1.0)
	ix := New(Config{Dim: dim, M: 8, EfConstruction: 32})
	mustAddDocs(t, ix, Doc{ID: "seed", Vectors: data[:1], Meta: map[string]string{"v": "x0"}})
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				// Unfiltered, and filtered on the "seed" document's
				// metadata by both strategies (prefix queries merge the
				// sorted value lists lazily, under their own lock).
				opts := SearchOptions{}
				switch i % 3 {
				case 1:
					opts = SearchOptions{Filter: prefix{"v", "x"}, Strategy: StrategyTraverse}
				case 2:
					opts = SearchOptions{Filter: or{eq{"v", "x0"}, prefix{"v", "x"}}, Strategy: StrategyScan}
				}
				hits, err := ix.Search(bg, data[(i*13+r)%len(data)], 5, opts)
				if err != nil || len(hits) == 0 {
					t.Errorf("concurrent search: %v %v", hits, err)
					return
				}
				ix.Len()
			}
		}(r)
	}
	for i := 1; i < len(data); i += 10 {
		ids := make([]string, 0, 10)
		for j := i; j < min(i+10, len(data)); j++ {
			ids = append(ids, fmt.Sprint(j))
		}
		docs := singles(ids, data[i:i+len(ids)])
		for j := range docs {
			docs[j].Meta = map[string]string{"v": fmt.Sprint("x", i%40)}
		}
		mustAddDocs(t, ix, docs...)
		if i%50 == 1 {
			ix.Delete(ids[:2])
		}
	}
	if err := ix.Save(filepath.Join(t.TempDir(), "ix"), Meta{}); err != nil {
		t.Error(err)
	}
	close(done)
	wg.Wait()
}

func TestSaveLoad(t *testing.T) {
	const dim = 24
	data := densetest.Clustered(5, 600, dim, 8, 1.0)
	ix := New(Config{Dim: dim, M: 8, EfSearch: 30, EfConstruction: 50})
	ids := make([]string, len(data))
	for i := range ids {
		ids[i] = fmt.Sprintf("doc-%d", i)
	}
	mustAdd(t, ix, ids, data)
	ix.Delete(ids[:50])
	// Passages and metadata, so that damage to their tables is caught too.
	for i := 60; i < 600; i += 3 {
		mustAddDocs(t, ix, Doc{ID: ids[i], Vectors: data[i-2 : i+1], Meta: map[string]string{"k": fmt.Sprint(i % 7), "id": ids[i]}})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "dense.idx")
	meta := Meta{Fingerprint: "minilm-abc123", AppliedSeq: 42}
	if err := ix.Save(path, meta); err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotMeta != meta {
		t.Fatalf("meta %+v, want %+v", gotMeta, meta)
	}
	if got.Len() != ix.Len() || got.Config() != ix.Config() {
		t.Fatalf("loaded Len %d cfg %+v, want %d %+v", got.Len(), got.Config(), ix.Len(), ix.Config())
	}
	for _, q := range data[:40] {
		a, _ := ix.Search(bg, q, 10, SearchOptions{})
		b, _ := got.Search(bg, q, 10, SearchOptions{})
		if !slices.Equal(a, b) {
			t.Fatalf("loaded index answers differently:\n%v\n%v", a, b)
		}
	}
	// The loaded index keeps working.
	mustAdd(t, got, []string{"new"}, data[:1])
	if got.Len() != ix.Len()+1 {
		t.Fatalf("Len after add to loaded index %d", got.Len())
	}
	// An empty index round-trips too.
	empty := filepath.Join(dir, "empty.idx")
	if err := New(Config{Dim: 3}).Save(empty, Meta{AppliedSeq: 1}); err != nil {
		t.Fatal(err)
	}
	if e, m, err := Load(empty); err != nil || e.Len() != 0 || m.AppliedSeq != 1 {
		t.Fatalf("empty round trip: %v %v %v", e, m, err)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	bad := filepath.Join(dir, "bad.idx")
	check := func(what string, content []byte) {
		t.Helper()
		if err := os.WriteFile(bad, content, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(bad)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Load error %v, want ErrCorrupt", what, err)
		}
	}
	check("empty file", nil)
	check("garbage", []byte("not an index at all"))
	for _, cut := range []int{10, 40, len(raw) / 2, len(raw) - 13, len(raw) - 1} {
		check(fmt.Sprintf("truncated to %d", cut), raw[:cut])
	}
	check("trailing bytes", append(slices.Clone(raw), 0))
	rng := rand.New(rand.NewSource(1))
	// The document table and posting lists follow the header.
	var tables bytes.Buffer
	bw := bufio.NewWriter(&tables)
	ix.writeTables(bw)
	bw.Flush()
	hdr := 8 + 4 + 4 + len(meta.Fingerprint) + 8 + 16 + 4 + len(meta.StoreID)
	if !bytes.Equal(raw[hdr:hdr+tables.Len()], tables.Bytes()) {
		t.Fatal("the tables are not where the test expects them")
	}
	for i := 0; i < 100; i++ {
		flipped := slices.Clone(raw)
		at := rng.Intn(len(flipped))
		if i%2 == 0 {
			at = hdr + rng.Intn(tables.Len())
		}
		flipped[at] ^= byte(1 + rng.Intn(255))
		check("flipped byte", flipped) // the checksum catches what structure checks miss
	}
}

func TestLoadMissingCreatesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "missing.idx")
	_, _, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load created %s", path)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load created the directory")
	}
}

func TestExact(t *testing.T) {
	vecs := map[string][]float32{
		"a": {1, 0}, "b": {0, 1}, "c": {2, 2}, "z": {0, 0}, "short": {1},
	}
	got := Exact(vecs, []float32{1, 0}, 10)
	if !slices.Equal(hitIDs(got), []string{"a", "c", "b"}) {
		t.Fatalf("Exact = %v", got)
	}
	if math.Abs(float64(got[1].Score)-1/math.Sqrt2) > 1e-6 {
		t.Fatalf("score %v", got[1].Score)
	}
	if got := Exact(vecs, []float32{1, 0}, 1); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("Exact k=1 = %v", got)
	}
}
