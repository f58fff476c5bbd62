package dense

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/filtertest"
	"github.com/anna-search/anna/internal/index/dense/densetest"
)

// TestFilterValues: through random upserts and deletes of documents with
// string, number and list metadata, filter.Eval over the index's postings
// (ranges, numbers, lists included) is exactly the live documents
// filter.MatchValues accepts, Check finds the index sound, and a saved and
// loaded index evaluates alike (issue #41 item 8).
func TestFilterValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 8))
	data := densetest.Clustered(9, 200, 4, 4, 1.0)
	ix := New(Config{Dim: 4, M: 6, EfConstruction: 24})
	ref := map[string]Doc{}
	eval := func(ix *Index, f filter.Filter) []string {
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		var out []string
		f.Eval(&ix.meta).Iterate(func(doc uint32) bool {
			out = append(out, ix.docs[doc].id)
			return true
		})
		slices.Sort(out)
		return out
	}
	want := func(f filter.Filter) []string {
		var out []string
		for id, d := range ref {
			if f.MatchValues(d.Meta, d.MetaValues) {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out
	}
	checked := 0
	for step := range 300 {
		id := fmt.Sprintf("d%d", rng.IntN(80))
		if rng.IntN(5) == 0 {
			ix.Delete([]string{id})
			delete(ref, id)
		} else {
			d := Doc{ID: id, Vectors: [][]float32{data[rng.IntN(len(data))]}, Meta: filtertest.Meta(rng), MetaValues: filtertest.MetaValues(rng)}
			mustAddDocs(t, ix, d)
			ref[id] = d
		}
		if step%10 != 0 {
			continue
		}
		mustCheck(t, ix, fmt.Sprint("step ", step))
		for range 40 {
			f := filtertest.Random(rng, rng.IntN(3))
			if got, w := eval(ix, f), want(f); !slices.Equal(got, w) {
				t.Fatalf("step %d: %s: Eval %v, MatchValues %v", step, f, got, w)
			}
			checked++
		}
	}
	got, _ := roundTrip(t, ix, t.TempDir()+"/dense.idx", Meta{})
	mustCheck(t, got, "loaded")
	for range 300 {
		f := filtertest.Random(rng, rng.IntN(3))
		if a, b := eval(got, f), want(f); !slices.Equal(a, b) {
			t.Fatalf("loaded: %s: Eval %v, MatchValues %v", f, a, b)
		}
	}
	// Meta gives back the values as a set.
	for id, d := range ref {
		m, v, ok := got.Meta(id)
		if !ok {
			t.Fatalf("Meta(%s): missing", id)
		}
		back := Doc{ID: id, Meta: m, MetaValues: v}
		for _, f := range []filter.Filter{filter.Eq("tags", "a"), filter.Gte("n", "1"), filter.Eq("k", "ab")} {
			if f.MatchValues(m, v) != f.MatchValues(d.Meta, d.MetaValues) {
				t.Fatalf("Meta(%s) = %+v, stored %+v: %s disagrees", id, back, d, f)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d filters checked", checked)
	}
}

// TestRangeFilterReturnsK: a filtered search on a numeric range returns k
// hits whenever k documents match, the exact filtered top k, whichever
// strategy runs; HasKey knows the keys (issue #41 items 8 and 9).
func TestRangeFilterReturnsK(t *testing.T) {
	data := densetest.Clustered(7, 2001, 16, 20, 1.0)
	docs := make([]Doc, 2000)
	for i := range docs {
		docs[i] = Doc{ID: fmt.Sprint("d", i), Vectors: [][]float32{data[i]},
			MetaValues: map[string]filter.Value{"year": filter.NumberValue(float64(1900 + i%120)),
				"tags": filter.StringsValue(fmt.Sprint("t", i%7), fmt.Sprint("u", i%11))}}
	}
	ix := New(Config{Dim: 16})
	mustAddDocs(t, ix, docs...)
	q := data[2000]
	for _, f := range []filter.Filter{
		filter.Gte("year", "1960"),           // half
		filter.Range("year", "1999", "2001"), // 2 of 120
		filter.Lt("year", "1901"),            // 1 of 120
		filter.And(filter.Eq("tags", "t3"), filter.Gt("year", "2000")),
	} {
		var match []Doc
		for _, d := range docs {
			if f.MatchValues(d.Meta, d.MetaValues) {
				match = append(match, d)
			}
		}
		want := ExactDocs(match, q, 10)
		for _, s := range []Strategy{StrategyAuto, StrategyTraverse, StrategyScan} {
			got := search(t, ix, q, 10, SearchOptions{Filter: f, Strategy: s})
			if len(got) != min(10, len(match)) || len(match) < 10 {
				t.Fatalf("%s %v: %d hits, %d match", f, s, len(got), len(match))
			}
			if s == StrategyScan && !slices.Equal(hitIDs(got), hitIDs(want)) {
				t.Fatalf("%s: scan %v, exact %v", f, hitIDs(got), hitIDs(want))
			}
		}
	}
	if !ix.HasKey("year") || !ix.HasKey("tags") || ix.HasKey("bucket") || ix.HasKey("year ") {
		t.Fatal("HasKey")
	}
	ix.Delete([]string{"d0"})
	m, v, _ := ix.Meta("d1")
	if m != nil || !maps.EqualFunc(v, map[string]filter.Value{"year": filter.NumberValue(1901),
		"tags": filter.StringsValue("t1", "u1")}, filter.Value.Equal) {
		t.Fatalf("Meta(d1) = %v %v", m, v)
	}
}

// TestLoadVersion4Metadata loads a file the version-4 code wrote
// (testdata/v4meta.dense, from commit 3b0286f: three documents, string
// metadata, one of them the stringified array `["a","b"]`): it loads,
// its strings stay strings, filters match them as before, and saved again
// (as version 5) it loads alike.
func TestLoadVersion4Metadata(t *testing.T) {
	ix, meta, err := Load("testdata/v4meta.dense")
	if err != nil {
		t.Fatal(err)
	}
	if meta != (Meta{StoreID: "s", Fingerprint: "f", AppliedSeq: 3}) || ix.Len() != 3 || ix.Passages() != 4 {
		t.Fatalf("loaded %+v, %d documents, %d passages", meta, ix.Len(), ix.Passages())
	}
	mustCheck(t, ix, "version 4 loaded")
	for _, ix := range []*Index{ix, func() *Index { got, _ := roundTrip(t, ix, t.TempDir()+"/v5.dense", meta); return got }()} {
		m, v, _ := ix.Meta("a")
		if !maps.Equal(m, map[string]string{"lang": "en", "year": "1960", "tags": `["a","b"]`}) || v != nil {
			t.Fatalf("Meta(a) = %v %v", m, v)
		}
		for f, want := range map[string]string{
			`{"year": "1960"}`:        "a",
			`{"gte": {"year": 2000}}`: "b", // "2001" >= "2000" as strings
			`{"tags": "a"}`:           "",  // a stringified array is one string
			`{"lang": "de"}`:          "b",
		} {
			g, err := filter.Parse([]byte(f))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range search(t, ix, []float32{1, 0}, 3, SearchOptions{Filter: g}) {
				got = append(got, h.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(slices.DeleteFunc([]string{want}, func(s string) bool { return s == "" })) {
				t.Fatalf("%s: %v, want %q", f, got, want)
			}
		}
	}
}
