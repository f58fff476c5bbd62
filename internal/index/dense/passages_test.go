package dense

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/index/dense/densetest"
	"github.com/anna-search/anna/internal/index/dense/hnsw"
)

// TestPassagesFoundByAnyRankedByBest: a document of several passages is
// found through any of them, ranked by DocScore of its first and best
// ones, and reported with the best one's number.
func TestPassagesFoundByAnyRankedByBest(t *testing.T) {
	ix := New(Config{Dim: 3})
	mustAddDocs(t, ix,
		Doc{ID: "long", Vectors: [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}},
		Doc{ID: "x", Vectors: [][]float32{{1, 0.2, 0}}},
		Doc{ID: "y", Vectors: [][]float32{{0.2, 1, 0}}},
		Doc{ID: "z", Vectors: [][]float32{{0, 0.2, 1}}})
	for p, q := range [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {
		hits := search(t, ix, q, 4, SearchOptions{})
		// The first passage's cosine is 1 along it, 0 along the others.
		score := DocScore(0, 1, 3)
		if p == 0 {
			score = 1
		}
		var long *Hit
		for i := range hits {
			if hits[i].ID == "long" {
				long = &hits[i]
			}
		}
		if len(hits) != 4 || long == nil || long.Passage != p || math.Abs(float64(long.Score-score)) > 1e-5 {
			t.Fatalf("query along passage %d: %+v, want long at passage %d scoring %v", p, hits, p, score)
		}
		want := ExactDocs([]Doc{
			{ID: "long", Vectors: [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}},
			{ID: "x", Vectors: [][]float32{{1, 0.2, 0}}},
			{ID: "y", Vectors: [][]float32{{0.2, 1, 0}}},
			{ID: "z", Vectors: [][]float32{{0, 0.2, 1}}}}, q, 4)
		if !sameHits(hits, want) {
			t.Fatalf("query %d: %+v, exact %+v", p, hits, want)
		}
	}
	if ix.Len() != 4 || ix.Passages() != 6 {
		t.Fatalf("Len %d, Passages %d", ix.Len(), ix.Passages())
	}
	mustCheck(t, ix, "passages")
}

// TestPassagesUpsertAndDelete: an upsert with fewer passages removes the
// extra ones, with more adds them; a delete removes them all.
func TestPassagesUpsertAndDelete(t *testing.T) {
	ix := New(Config{Dim: 2})
	mustAddDocs(t, ix,
		Doc{ID: "a", Vectors: [][]float32{{1, 0}, {0, 1}, {-1, 0}}},
		Doc{ID: "b", Vectors: [][]float32{{1, 1}}})
	mustAddDocs(t, ix, Doc{ID: "a", Vectors: [][]float32{{1, 0}}})
	mustCheck(t, ix, "after shrinking")
	if v, ok := ix.Vectors("a"); !ok || len(v) != 1 || ix.Passages() != 2 {
		t.Fatalf("after shrinking: Vectors(a) %v, Passages %d", v, ix.Passages())
	}
	if hits := search(t, ix, []float32{-1, 0}, 2, SearchOptions{}); hits[0].ID != "b" || hits[1].Passage != 0 {
		t.Fatalf("removed passage still found: %+v", hits)
	}
	mustAddDocs(t, ix, Doc{ID: "a", Vectors: [][]float32{{1, 0}, {0, -1}}})
	mustCheck(t, ix, "after growing")
	if hits := search(t, ix, []float32{0, -1}, 1, SearchOptions{}); hits[0].ID != "a" || hits[0].Passage != 1 {
		t.Fatalf("new passage not found: %+v", hits)
	}
	ix.Delete([]string{"a"})
	mustCheck(t, ix, "after delete")
	if ix.Len() != 1 || ix.Passages() != 1 || ix.g.Len() != 1 {
		t.Fatalf("after delete: Len %d Passages %d graph %d", ix.Len(), ix.Passages(), ix.g.Len())
	}
	if _, ok := ix.Vectors("a"); ok {
		t.Fatal("deleted document still has vectors")
	}
	// Within one Add a repeated ID keeps its last document.
	mustAddDocs(t, ix, Doc{ID: "c", Vectors: [][]float32{{1, 0}, {0, 1}}, Meta: map[string]string{"n": "1"}},
		Doc{ID: "c", Vectors: [][]float32{{-1, -1}}, Meta: map[string]string{"n": "2"}})
	mustCheck(t, ix, "after a repeated ID")
	if v, _ := ix.Vectors("c"); len(v) != 1 || v[0][0] >= 0 {
		t.Fatalf("repeated ID: Vectors(c) = %v", v)
	}
	if m, _, _ := ix.Meta("c"); m["n"] != "2" {
		t.Fatalf("repeated ID: Meta(c) = %v", m)
	}
	ix.Delete([]string{"b", "c"})
	mustCheck(t, ix, "after deleting all")
	if ix.Len() != 0 || ix.g.Len() != 0 || len(ix.docs) != 0 {
		t.Fatalf("after deleting all: Len %d graph %d table %d", ix.Len(), ix.g.Len(), len(ix.docs))
	}
}

// TestSearchDistinctDocuments: when one document's passages crowd the
// nearest ones, Search widens its request until it has k distinct
// documents, with and without a filter, whatever the strategy.
func TestSearchDistinctDocuments(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	const dim = 16
	near := func(c []float32, noise float64) []float32 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = c[j] + float32(noise*rng.NormFloat64())
		}
		return v
	}
	centres := densetest.Clustered(14, 40, dim, 3, 0.5)
	var docs []Doc
	// 40 documents of 40 passages close together, 200 of one passage.
	for i, c := range centres {
		d := Doc{ID: fmt.Sprintf("long%02d", i), Meta: map[string]string{"kind": "long"}}
		for p := 0; p < 40; p++ {
			d.Vectors = append(d.Vectors, near(c, 0.05))
		}
		docs = append(docs, d)
	}
	for i := 0; i < 200; i++ {
		kind := []string{"short", "long"}[rng.Intn(2)]
		docs = append(docs, Doc{ID: fmt.Sprintf("short%03d", i), Vectors: [][]float32{near(centres[rng.Intn(len(centres))], 0.3)},
			Meta: map[string]string{"kind": kind}})
	}
	ix := New(Config{Dim: dim, M: 8, EfSearch: 16})
	mustAddDocs(t, ix, docs...)
	mustCheck(t, ix, "built")
	fetches := map[Strategy]int{}
	for qi := 0; qi < 50; qi++ {
		q := near(centres[qi%len(centres)], 0.05)
		for _, f := range []testFilter{nil, eq{"kind", "long"}} {
			sub := matching(docs, f)
			want := ExactDocs(sub, q, 10)
			for _, s := range []Strategy{StrategyAuto, StrategyTraverse, StrategyScan} {
				var st SearchStats
				opts := SearchOptions{Strategy: s, Stats: &st}
				if f != nil {
					opts.Filter = f
				}
				hits := search(t, ix, q, 10, opts)
				if len(hits) != 10 {
					t.Fatalf("query %d filter %v %v: %d hits, want 10", qi, f, s, len(hits))
				}
				seen := map[string]bool{}
				for _, h := range hits {
					if seen[h.ID] {
						t.Fatalf("query %d: %s twice", qi, h.ID)
					}
					seen[h.ID] = true
				}
				if s == StrategyScan && !sameHits(hits, want) {
					t.Fatalf("query %d filter %v scan: %v\nwant %v", qi, f, hits, want)
				}
				fetches[st.Strategy] += st.Fetches
			}
		}
	}
	t.Logf("fetches per strategy over 50 queries (each strategy run 2 or 4 times per query): %v", fetches)
	if fetches[StrategyScan] <= 100 {
		t.Errorf("the passages never crowded the list (%v fetches): the test does not test widening", fetches)
	}
}

// TestLoadVersion2 loads a file written by the version-2 code (commit
// eebd959; testdata/v2.json holds its answers to 30 queries): documents of
// one passage without metadata, tombstones included, answering as the old
// code did, then saved as version 3 and loaded again.
func TestLoadVersion2(t *testing.T) {
	ix, meta, err := Load(filepath.Join("testdata", "v2.dense"))
	if err != nil {
		t.Fatal(err)
	}
	if meta != (Meta{StoreID: "store-v2", Fingerprint: "fp-v2", AppliedSeq: 77}) {
		t.Fatalf("meta %+v", meta)
	}
	if ix.Len() != 270 || ix.Passages() != 270 {
		t.Fatalf("Len %d Passages %d, want 270", ix.Len(), ix.Passages())
	}
	mustCheck(t, ix, "version 2 loaded")
	raw, err := os.ReadFile(filepath.Join("testdata", "v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var old []struct {
		Query []float32
		Hits  []Hit
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	again, _ := roundTrip(t, ix, filepath.Join(t.TempDir(), "v3.dense"), meta)
	for i, o := range old {
		for _, x := range []*Index{ix, again} {
			if got := search(t, x, o.Query, 5, SearchOptions{}); !slices.Equal(got, o.Hits) {
				t.Fatalf("query %d: %v, version 2 code answered %v", i, got, o.Hits)
			}
		}
	}
	if got := search(t, ix, old[0].Query, 5, SearchOptions{Filter: eq{"any", "thing"}}); len(got) != 0 {
		t.Fatalf("metadata filter on a version 2 index: %v", got)
	}
	ids, err := ReadIDs(filepath.Join("testdata", "v2.dense"))
	if err != nil || len(ids) != 270 {
		t.Fatalf("ReadIDs: %d IDs, %v", len(ids), err)
	}
	// It keeps working: an upsert, a delete, a new document.
	mustAddDocs(t, ix, Doc{ID: "v2-001", Vectors: [][]float32{old[0].Query}, Meta: map[string]string{"k": "v"}},
		Doc{ID: "new", Vectors: [][]float32{old[1].Query, old[2].Query}})
	ix.Delete([]string{"v2-002"})
	mustCheck(t, ix, "version 2 changed")
	if got := search(t, ix, old[0].Query, 1, SearchOptions{Filter: eq{"k", "v"}}); len(got) != 1 || got[0].ID != "v2-001" {
		t.Fatalf("filter after upsert: %v", got)
	}
}

// sameHits compares hits to float32 rounding of the scores.
func sameHits(a, b []Hit) bool {
	return slices.EqualFunc(a, b, func(x, y Hit) bool {
		return x.ID == y.ID && x.Passage == y.Passage && math.Abs(float64(x.Score-y.Score)) < 1e-6
	})
}

// TestRandomOpsDocs runs random upserts (1 to 4 passages, random
// metadata), deletes, filtered searches and save/load round trips against
// ExactDocs over the live documents: recall@10 >= 0.95, only matching
// documents, k of them whenever k match, Check clean throughout.
func TestRandomOpsDocs(t *testing.T) {
	const dim = 24
	pool := densetest.Clustered(31, 3000, dim, 15, 1.0)
	filters := []testFilter{nil, eq{"c", "0"}, prefix{"p", "x1"}, or{eq{"c", "1"}, eq{"c", "2"}}, not{eq{"c", "0"}},
		and{prefix{"p", "x"}, not{eq{"c", "3"}}}, eq{"rare", "1"}}
	for seed := int64(0); seed < 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		ix := New(Config{Dim: dim, M: 8, EfConstruction: 64})
		ref := map[string]Doc{}
		hits, total := 0, 0
		for step := 0; step < 1200; step++ {
			switch op := rng.Intn(20); {
			case op < 9:
				var docs []Doc
				for j := 0; j < 1+rng.Intn(6); j++ {
					d := Doc{ID: fmt.Sprintf("d%d", rng.Intn(400)), Meta: map[string]string{"c": fmt.Sprint(rng.Intn(4))}}
					for p := 0; p < 1+rng.Intn(4); p++ {
						d.Vectors = append(d.Vectors, pool[rng.Intn(len(pool))])
					}
					if rng.Intn(2) == 0 {
						d.Meta["p"] = fmt.Sprintf("x%d", rng.Intn(30))
					}
					if rng.Intn(50) == 0 {
						d.Meta["rare"] = "1"
					}
					docs = append(docs, d)
				}
				mustAddDocs(t, ix, docs...)
				for _, d := range docs {
					ref[d.ID] = d
				}
			case op < 13:
				var ids []string
				for j := 0; j < 1+rng.Intn(4); j++ {
					ids = append(ids, fmt.Sprintf("d%d", rng.Intn(400)))
				}
				ix.Delete(ids)
				for _, id := range ids {
					delete(ref, id)
				}
			case op == 13 && rng.Intn(8) == 0:
				ix, _ = roundTrip(t, ix, filepath.Join(t.TempDir(), "ix"), Meta{})
			default:
				q := pool[rng.Intn(len(pool))]
				f := filters[rng.Intn(len(filters))]
				opts := SearchOptions{Ef: 40, Strategy: []Strategy{StrategyAuto, StrategyTraverse, StrategyScan}[rng.Intn(3)]}
				if f != nil {
					opts.Filter = f
				}
				got := search(t, ix, q, 10, opts)
				sub := matching(slices.Collect(maps.Values(ref)), f)
				want := ExactDocs(sub, q, 10)
				if len(got) != len(want) {
					t.Fatalf("seed %d step %d filter %v: %d hits, want %d", seed, step, f, len(got), len(want))
				}
				wantIDs := hitIDs(want)
				for _, h := range got {
					d, ok := ref[h.ID]
					if !ok || (f != nil && !f.match(d.Meta)) {
						t.Fatalf("seed %d step %d: hit %s deleted or not matching %v", seed, step, h.ID, f)
					}
					if slices.Contains(wantIDs, h.ID) {
						hits++
					}
				}
				total += len(want)
			}
			if ix.Len() != len(ref) {
				t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, ix.Len(), len(ref))
			}
			if step%100 == 0 {
				mustCheck(t, ix, fmt.Sprintf("seed %d step %d", seed, step))
			}
		}
		mustCheck(t, ix, fmt.Sprintf("seed %d end", seed))
		r := float64(hits) / float64(max(total, 1))
		t.Logf("seed %d: recall@10 %.4f over %d results", seed, r, total)
		if r < 0.95 {
			t.Errorf("seed %d: recall@10 %.4f < 0.95", seed, r)
		}
	}
}

// TestCheckFindsDamage breaks the document table, the passages and the
// metadata index one at a time behind the index's back: Check reports
// each, and a file saved from such an index does not load.
func TestCheckFindsDamage(t *testing.T) {
	build := func() *Index {
		ix := New(Config{Dim: 2})
		mustAddDocs(t, ix,
			Doc{ID: "a", Vectors: [][]float32{{1, 0}, {0, 1}}, Meta: map[string]string{"k": "v", "n": "1"}},
			Doc{ID: "b", Vectors: [][]float32{{1, 1}}, Meta: map[string]string{"k": "w"}},
			Doc{ID: "c", Vectors: [][]float32{{1, 2}}})
		ix.Delete([]string{"c"})
		mustCheck(t, ix, "sound")
		return ix
	}
	cases := []struct {
		name, want string
		damage     func(ix *Index)
		loads      bool // the damage does not reach the file's checks
	}{
		{"posting list lost a document", "posting list k=v", func(ix *Index) { ix.meta.keys["k"].post["v"].Remove(0) }, false},
		{"posting list gained a document", "posting list k=w", func(ix *Index) { ix.meta.keys["k"].post["w"].Add(0) }, false},
		{"metadata changed under the postings", "posting list n=1", func(ix *Index) { ix.docs[0].meta[1].val = "2" }, false},
		{"live set", "live documents", func(ix *Index) { ix.meta.live.Add(2) }, true},
		{"passage count", "passage", func(ix *Index) { ix.docs[0].passages = 3; ix.nPassages++ }, false},
		{"graph node missing", "lacks passages", func(ix *Index) { ix.g.Delete(nodeKey(0, 1)) }, false},
		{"stray graph node", "does not hold", func(ix *Index) { ix.g.Add(hnsw.MakeNode(nodeKey(2, 0), []float32{0, 1})) }, false},
		{"free list", "free", func(ix *Index) { ix.free.Clear() }, true},
		{"ID map", "ID map", func(ix *Index) { ix.byID["b"] = 0 }, true},
	}
	for _, c := range cases {
		ix := build()
		c.damage(ix)
		is := ix.Check()
		found := false
		for _, i := range is {
			found = found || strings.Contains(i.What, c.want)
		}
		if !found {
			t.Errorf("%s: Check says %+v, want an issue with %q", c.name, is, c.want)
		}
		path := filepath.Join(t.TempDir(), "ix")
		if err := ix.Save(path, Meta{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Load(path); (err == nil) != c.loads || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: Load error %v", c.name, err)
		}
	}
}
