package hnsw

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func newTestGraph(seed int64) *Graph[int] {
	g := NewGraph[int]()
	g.Distance = DotDistance
	g.M = 8
	g.EfConstruction = 64
	g.EfSearch = 64
	g.Rng = rand.New(rand.NewSource(seed))
	return g
}

func keysOf(res []SearchResult[int]) []int {
	out := make([]int, len(res))
	for i, r := range res {
		out[i] = r.Key
	}
	return out
}

func TestEmptyGraph(t *testing.T) {
	var g Graph[int] // the zero value is usable
	if got := g.Search([]float32{1, 0}, 3); len(got) != 0 {
		t.Fatalf("Search on empty graph = %v", got)
	}
	if g.Delete(1) {
		t.Fatal("Delete on empty graph reported true")
	}
	g.Add(MakeNode(1, []float32{1, 0}))
	if got := g.Search([]float32{1, 0}, 3); len(got) != 1 || got[0].Key != 1 {
		t.Fatalf("Search = %v, want [1]", got)
	}
}

// TestRandomOps runs random add / re-add / delete / search sequences and
// checks every search against brute force over the live set. Upstream
// panicked on re-add ("node not added") and with nil pointers after a few
// deletes.
func TestRandomOps(t *testing.T) {
	const dim = 16
	for seed := int64(0); seed < 6; seed++ {
		rng := rand.New(rand.NewSource(seed))
		g := newTestGraph(seed)
		ref := map[int][]float32{}
		pool := clustered(rng, 3000, dim, 8, 0.5)
		var hits, total int
		for step := 0; step < 3000; step++ {
			switch op := rng.Intn(10); {
			case op < 5: // add or re-add a batch
				var batch []Node[int]
				for j := 0; j < 1+rng.Intn(5); j++ {
					k := rng.Intn(400)
					v := pool[rng.Intn(len(pool))]
					batch = append(batch, MakeNode(k, v))
				}
				g.Add(batch...)
				for _, n := range batch {
					ref[n.Key] = n.Value
				}
			case op < 8: // delete
				k := rng.Intn(400)
				_, want := ref[k]
				if got := g.Delete(k); got != want {
					t.Fatalf("seed %d step %d: Delete(%d) = %v, want %v", seed, step, k, got, want)
				}
				delete(ref, k)
			case op < 9 && step%97 == 0: // delete everything
				for k := range ref {
					g.Delete(k)
				}
				clear(ref)
			default:
				q := pool[rng.Intn(len(pool))]
				res := g.SearchEf(q, 10, 50)
				want := exactKNN(ref, q, 10, DotDistance)
				if len(res) != len(want) {
					t.Fatalf("seed %d step %d: %d results, want %d (Len %d)", seed, step, len(res), len(want), g.Len())
				}
				for _, r := range res {
					if _, ok := ref[r.Key]; !ok {
						t.Fatalf("seed %d step %d: deleted key %d returned", seed, step, r.Key)
					}
				}
				hits += overlap(keysOf(res), want)
				total += len(want)
			}
			if g.Len() != len(ref) {
				t.Fatalf("seed %d step %d: Len = %d, want %d", seed, step, g.Len(), len(ref))
			}
		}
		for k, v := range ref {
			got, ok := g.Lookup(k)
			if !ok || !slices.Equal(got, v) {
				t.Fatalf("seed %d: Lookup(%d) = %v, %v", seed, k, ok, got)
			}
		}
		recall := float64(hits) / float64(max(total, 1))
		t.Logf("seed %d: recall@10 over %d searches = %.4f, final Len %d", seed, total/10, recall, g.Len())
		if recall < 0.95 {
			t.Errorf("seed %d: recall@10 = %.4f, want >= 0.95", seed, recall)
		}
	}
}

func TestDeleteAllThenSearchAndAdd(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	g := newTestGraph(3)
	data := clustered(rng, 500, 8, 4, 0.5)
	for i, v := range data {
		g.Add(MakeNode(i, v))
	}
	for _, i := range rng.Perm(len(data)) {
		if !g.Delete(i) {
			t.Fatalf("Delete(%d) = false", i)
		}
		if i%50 == 0 {
			for _, r := range g.SearchEf(data[i], 5, 20) {
				if r.Key == i {
					t.Fatalf("deleted key %d returned", i)
				}
			}
		}
	}
	if g.Len() != 0 {
		t.Fatalf("Len = %d after deleting all", g.Len())
	}
	if got := g.Search(data[0], 5); len(got) != 0 {
		t.Fatalf("Search after deleting all = %v", got)
	}
	g.Add(MakeNode(7, data[7]), MakeNode(8, data[8]))
	if got := g.Search(data[7], 5); len(got) != 2 || got[0].Key != 7 {
		t.Fatalf("Search after re-adding = %v", got)
	}
}

func TestReAddReplacesVector(t *testing.T) {
	g := newTestGraph(1)
	g.Add(MakeNode(1, []float32{1, 0}), MakeNode(2, []float32{0, 1}))
	g.Add(MakeNode(1, []float32{0, 1}))
	if g.Len() != 2 {
		t.Fatalf("Len = %d, want 2", g.Len())
	}
	res := g.SearchEf([]float32{1, 0}, 2, 10)
	if len(res) != 2 || res[0].Distance < 0.99 {
		t.Fatalf("old vector of key 1 still found: %+v", res)
	}
	if v, _ := g.Lookup(1); !slices.Equal(v, []float32{0, 1}) {
		t.Fatalf("Lookup(1) = %v", v)
	}
}

func TestDimensionMismatchPanicsBeforeInserting(t *testing.T) {
	g := newTestGraph(1)
	g.Add(MakeNode(1, []float32{1, 0}))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic on dimension mismatch")
			}
		}()
		g.Add(MakeNode(2, []float32{0, 1}), MakeNode(3, []float32{1, 2, 3}))
	}()
	if g.Len() != 1 {
		t.Fatalf("Len = %d after rejected batch, want 1", g.Len())
	}
}

// TestConcurrentSearchDuringAdd is meant for -race: upstream had no locking.
func TestConcurrentSearchDuringAdd(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	data := clustered(rng, 1200, 16, 4, 0.5)
	g := newTestGraph(4)
	g.Add(MakeNode(0, data[0]))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res := g.SearchEf(data[(i*7+r)%len(data)], 5, 20)
				if len(res) == 0 {
					t.Error("search returned nothing on a non-empty graph")
					return
				}
				g.Lookup(res[0].Key)
				g.Len()
			}
		}(r)
	}
	for i := 1; i < len(data); i++ {
		g.Add(MakeNode(i, data[i]))
		if i%5 == 0 {
			g.Delete(i - 3)
		}
	}
	close(stop)
	wg.Wait()
}

func TestExportImportRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	data := clustered(rng, 800, 16, 4, 0.5)
	g := newTestGraph(5)
	for i, v := range data {
		g.Add(MakeNode(i, v))
	}
	for i := 0; i < 100; i++ { // leave tombstones in the export
		g.Delete(i * 3)
	}
	var buf bytes.Buffer
	if err := g.Export(&buf); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	h := NewGraph[int]()
	if err := h.Import(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if h.Len() != g.Len() || h.M != 8 || h.EfSearch != 64 {
		t.Fatalf("imported Len %d M %d EfSearch %d", h.Len(), h.M, h.EfSearch)
	}
	for i := 0; i < 50; i++ {
		q := data[rng.Intn(len(data))]
		a, b := g.SearchEf(q, 10, 40), h.SearchEf(q, 10, 40)
		if !slices.Equal(keysOf(a), keysOf(b)) {
			t.Fatalf("imported graph answers differently: %v vs %v", keysOf(a), keysOf(b))
		}
	}
	// Every truncation must fail cleanly, never panic.
	for cut := 0; cut < len(raw); cut += 1 + cut/3 {
		if err := NewGraph[int]().Import(bytes.NewReader(raw[:cut])); err == nil {
			t.Fatalf("Import of %d/%d bytes succeeded", cut, len(raw))
		}
	}
	// Random byte flips must not panic (they may or may not be detected:
	// a flipped vector component is still a valid graph).
	for i := 0; i < 200; i++ {
		bad := slices.Clone(raw)
		bad[rng.Intn(len(bad))] ^= byte(1 + rng.Intn(255))
		h := NewGraph[int]()
		if err := h.Import(bytes.NewReader(bad)); err == nil {
			h.SearchEf(data[0], 5, 20)
		}
	}
}

func TestStringKeysExportImport(t *testing.T) {
	g := NewGraph[string]()
	g.Distance = EuclideanDistance
	g.Add(MakeNode("a", []float32{1, 2}), MakeNode("b", []float32{3, 4}))
	var buf bytes.Buffer
	if err := g.Export(&buf); err != nil {
		t.Fatal(err)
	}
	h := NewGraph[string]()
	if err := h.Import(&buf); err != nil {
		t.Fatal(err)
	}
	if got := h.Search([]float32{3, 4}, 1); len(got) != 1 || got[0].Key != "b" {
		t.Fatalf("Search = %v", got)
	}
}

func TestLoadSavedGraphMissingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g.hnsw")
	sg, err := LoadSavedGraph[int](path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadSavedGraph created %s (stat err %v)", path, err)
	}
	sg.Add(MakeNode(1, []float32{1, 0}), MakeNode(2, []float32{0, 1}))
	if err := sg.Save(); err != nil {
		t.Fatal(err)
	}
	sg2, err := LoadSavedGraph[int](path)
	if err != nil {
		t.Fatal(err)
	}
	if sg2.Len() != 2 {
		t.Fatalf("reloaded Len = %d", sg2.Len())
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSavedGraph[int](path); err == nil {
		t.Fatal("LoadSavedGraph of garbage succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

// TestImportV1 reads a stream in upstream v0.6.1's format (written here
// field by field as its Export did) and gets a working graph.
func TestImportV1(t *testing.T) {
	var buf bytes.Buffer
	vecs := map[int][]float32{1: {1, 0}, 2: {0, 1}, 3: {1, 1}}
	multiBinaryWrite(&buf, encodingVersionV1, 6, 0.5, 20, "euclidean")
	binaryWrite(&buf, 2) // layers
	binaryWrite(&buf, 3) // base layer nodes
	for _, k := range []int{1, 2, 3} {
		multiBinaryWrite(&buf, k, vecs[k], 1, k%3+1)
	}
	binaryWrite(&buf, 1) // layer 1
	multiBinaryWrite(&buf, 3, vecs[3], 0)
	g := NewGraph[int]()
	if err := g.Import(&buf); err != nil {
		t.Fatal(err)
	}
	if g.Len() != 3 || g.M != 6 || g.EfSearch != 20 {
		t.Fatalf("Len %d M %d EfSearch %d", g.Len(), g.M, g.EfSearch)
	}
	if got := g.Search([]float32{0, 0.9}, 1); len(got) != 1 || got[0].Key != 2 {
		t.Fatalf("Search = %v", got)
	}
}
