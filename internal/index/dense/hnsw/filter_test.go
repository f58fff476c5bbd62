package hnsw

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"testing"
)

// filledGraph returns a test graph of vecs keyed by index, and vecs by key.
func filledGraph(seed int64, vecs [][]float32) (*Graph[int], map[int][]float32) {
	g := newTestGraph(seed)
	ref := map[int][]float32{}
	for i, v := range vecs {
		g.Add(MakeNode(i, v))
		ref[i] = v
	}
	return g, ref
}

// filteredRef returns the vectors of ref whose key is in set.
func filteredRef(ref map[int][]float32, set map[int]bool) map[int][]float32 {
	out := map[int][]float32{}
	for k, v := range ref {
		if set[k] {
			out[k] = v
		}
	}
	return out
}

// TestSearchFilterAgainstExact compares filtered search with exact
// filtered search over graphs with tombstones, at selectivities from one
// node in a thousand to all of them. When the filter admits no more nodes
// than the candidate list holds, the search must find all of them (the
// stopping rule keeps it going until the graph is exhausted), so the
// answer is exactly the exact one; above that, recall@10 must stay >= 0.95.
func TestSearchFilterAgainstExact(t *testing.T) {
	const n, dim, nq, k, ef = 3000, 32, 40, 10, 32
	rng := rand.New(rand.NewSource(11))
	data := clustered(rng, n+nq, dim, 40, 1.2)
	g, ref := filledGraph(11, data[:n])
	// Tombstones that stay (fewer than a quarter of the slots).
	for i := 0; i < n; i += 7 {
		g.Delete(i)
		delete(ref, i)
	}
	for _, sel := range []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1} {
		set := map[int]bool{}
		for i := 0; i < n; i++ {
			// Tombstones are offered too: they must never come back.
			if rng.Float64() < sel {
				set[i] = true
			}
		}
		accept := func(key int) bool {
			if _, live := ref[key]; !live {
				t.Fatalf("accept called on tombstone %d", key)
			}
			return set[key]
		}
		sub := filteredRef(ref, set)
		hits, total := 0, 0
		for _, q := range data[n:] {
			got := g.SearchFilter(q, k, ef, accept)
			want := exactKNN(sub, q, k, DotDistance)
			for _, r := range got {
				if !set[r.Key] {
					t.Fatalf("sel %v: key %d not admitted by the filter", sel, r.Key)
				}
				if _, live := ref[r.Key]; !live {
					t.Fatalf("sel %v: deleted key %d returned", sel, r.Key)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("sel %v: %d results, want %d (%d nodes admitted)", sel, len(got), len(want), len(sub))
			}
			if len(sub) <= ef && !slices.Equal(keysOf(got), want) {
				t.Fatalf("sel %v (%d admitted): got %v, want %v", sel, len(sub), keysOf(got), want)
			}
			if !slices.IsSortedFunc(got, func(a, b SearchResult[int]) int { return cmp.Compare(a.Distance, b.Distance) }) {
				t.Fatalf("sel %v: results not sorted: %v", sel, got)
			}
			hits += overlap(keysOf(got), want)
			total += len(want)
		}
		r := float64(hits) / float64(max(total, 1))
		t.Logf("selectivity %v (%d live nodes admitted): recall@%d %.4f", sel, len(sub), k, r)
		if r < 0.95 {
			t.Errorf("selectivity %v: recall@%d %.4f < 0.95", sel, k, r)
		}
	}
}

// TestSearchFilterFewAndNone: a filter admitting fewer than k nodes gives
// exactly those, closest first; one admitting nothing gives nothing; nil
// admits everything.
func TestSearchFilterFewAndNone(t *testing.T) {
	const n, dim = 2000, 16
	rng := rand.New(rand.NewSource(3))
	data := clustered(rng, n+1, dim, 10, 0.5)
	g, ref := filledGraph(3, data[:n])
	q := data[n]
	few := map[int]bool{17: true, 512: true, 1999: true, 1000: true}
	g.Delete(1000) // admitted but deleted
	delete(ref, 1000)
	got := g.SearchFilter(q, 10, 20, func(k int) bool { return few[k] })
	want := exactKNN(filteredRef(ref, few), q, 10, DotDistance)
	if len(want) != 3 || !slices.Equal(keysOf(got), want) {
		t.Fatalf("few: got %v, want %v", keysOf(got), want)
	}
	if got := g.SearchFilter(q, 10, 20, func(int) bool { return false }); len(got) != 0 {
		t.Fatalf("none: got %v", got)
	}
	if a, b := g.SearchFilter(q, 10, 40, nil), g.SearchEf(q, 10, 40); !slices.Equal(a, b) {
		t.Fatalf("nil filter %v differs from SearchEf %v", a, b)
	}
	// k larger than the graph: every admitted live node.
	odd := g.SearchFilter(q, 5000, 0, func(k int) bool { return k%2 == 1 })
	if len(odd) != n/2 {
		t.Fatalf("k > Len: %d results, want %d", len(odd), n/2)
	}
}

// TestScanKeys: exact search over a key list, skipping keys that are not
// live and counting repeated ones once.
func TestScanKeys(t *testing.T) {
	const n, dim = 500, 8
	rng := rand.New(rand.NewSource(5))
	data := clustered(rng, n+1, dim, 5, 0.5)
	g, ref := filledGraph(5, data[:n])
	g.Delete(3)
	delete(ref, 3)
	keys := []int{3, 9, 9, 40, 41, 42, 100, 7777, 250, 251, 252, 499}
	set := map[int]bool{}
	for _, k := range keys {
		set[k] = true
	}
	q := data[n]
	for _, k := range []int{0, 1, 5, 20} {
		got := g.ScanKeys(q, keys, k)
		want := exactKNN(filteredRef(ref, set), q, k, DotDistance)
		if !slices.Equal(keysOf(got), want) {
			t.Fatalf("k=%d: got %v, want %v", k, keysOf(got), want)
		}
		for _, r := range got {
			if d := DotDistance(q, ref[r.Key]); d != r.Distance {
				t.Fatalf("key %d: distance %v, want %v", r.Key, r.Distance, d)
			}
		}
	}
	if got := g.ScanKeys(q, nil, 5); len(got) != 0 {
		t.Fatalf("no keys: %v", got)
	}
	var empty Graph[int]
	if got := empty.ScanKeys(q, keys, 5); len(got) != 0 {
		t.Fatalf("empty graph: %v", got)
	}
}

// TestKeyHashLevels: with KeyHash the levels come from it, so two graphs
// whose keys differ but hash alike get the same shape.
func TestKeyHashLevels(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	data := clustered(rng, 400, 8, 4, 0.5)
	a := NewGraph[string]()
	a.KeyLevels = true
	b := NewGraph[int]()
	b.KeyLevels = true
	b.KeyHash = func(k int) uint64 { return fnvString(fmt.Sprint("n", k)) }
	for i, v := range data {
		a.Add(MakeNode(fmt.Sprint("n", i), v))
		b.Add(MakeNode(i, v))
	}
	if !slices.Equal(a.levels, b.levels) {
		t.Fatal("levels differ between FNV of the key text and the same hash through KeyHash")
	}
}

func fnvString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// TestRekey: the rekeyed graph answers as the original did, passes Check,
// keeps working, and a mapping that merges two live keys is refused
// without touching the graph.
func TestRekey(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	data := clustered(rng, 1200, 16, 8, 0.8)
	g := NewGraph[string]()
	g.Distance = DotDistance
	g.KeyLevels = true
	for i, v := range data[:1000] {
		g.Add(MakeNode(fmt.Sprint("k", i), v))
	}
	for i := 0; i < 1000; i += 9 {
		g.Delete(fmt.Sprint("k", i))
	}
	var before [][]SearchResult[string]
	for _, q := range data[1000:] {
		before = append(before, g.SearchEf(q, 10, 40))
	}
	if _, err := Rekey(g, func(string, bool) int { return 1 }); err == nil {
		t.Fatal("Rekey merging live keys succeeded")
	}
	if g.Len() != 1000-112 {
		t.Fatalf("failed Rekey changed the graph: Len %d", g.Len())
	}
	num := func(k string, live bool) int {
		if !live {
			return -1
		}
		var i int
		fmt.Sscanf(k, "k%d", &i)
		return i
	}
	h, err := Rekey(g, num)
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 0 || h.Len() != 1000-112 {
		t.Fatalf("after Rekey: old Len %d, new Len %d", g.Len(), h.Len())
	}
	if is := h.Check(); len(is) != 0 {
		t.Fatalf("rekeyed graph: %v", is)
	}
	for i, q := range data[1000:] {
		got := h.SearchEf(q, 10, 40)
		if len(got) != len(before[i]) {
			t.Fatalf("query %d: %d results, want %d", i, len(got), len(before[i]))
		}
		for j, r := range got {
			if r.Key != num(before[i][j].Key, true) || r.Distance != before[i][j].Distance {
				t.Fatalf("query %d result %d: %v, want %v", i, j, r, before[i][j])
			}
		}
	}
	h.Add(MakeNode(5000, data[0]))
	h.Delete(1)
	if is := h.Check(); len(is) != 0 || h.Len() != 1000-112 {
		t.Fatalf("rekeyed graph after changes: Len %d, %v", h.Len(), is)
	}
}
