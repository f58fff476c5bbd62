package dense

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/index/dense/densetest"
)

// testFilter is a tiny filter language for the tests: Eval over the index's
// postings, match over a document's metadata (the brute-force reference).
type testFilter interface {
	Filter
	match(meta map[string]string) bool
}

type eq struct{ k, v string }

func (f eq) Eval(p Postings) *roaring.Bitmap { return p.Term(f.k, f.v) }
func (f eq) match(m map[string]string) bool {
	v, ok := m[f.k]
	return ok && v == f.v
}

type prefix struct{ k, p string }

func (f prefix) Eval(p Postings) *roaring.Bitmap { return p.Prefix(f.k, f.p) }
func (f prefix) match(m map[string]string) bool {
	v, ok := m[f.k]
	return ok && strings.HasPrefix(v, f.p)
}

type and []testFilter

func (f and) Eval(p Postings) *roaring.Bitmap {
	r := f[0].Eval(p)
	for _, g := range f[1:] {
		r.And(g.Eval(p))
	}
	return r
}
func (f and) match(m map[string]string) bool {
	for _, g := range f {
		if !g.match(m) {
			return false
		}
	}
	return true
}

type or []testFilter

func (f or) Eval(p Postings) *roaring.Bitmap {
	r := roaring.New()
	for _, g := range f {
		r.Or(g.Eval(p))
	}
	return r
}
func (f or) match(m map[string]string) bool {
	for _, g := range f {
		if g.match(m) {
			return true
		}
	}
	return false
}

type not struct{ f testFilter }

func (f not) Eval(p Postings) *roaring.Bitmap {
	r := p.All()
	r.AndNot(f.f.Eval(p))
	return r
}
func (f not) match(m map[string]string) bool { return !f.f.match(m) }

// matching returns the documents of docs that f matches (all for nil).
func matching(docs []Doc, f testFilter) []Doc {
	var out []Doc
	for _, d := range docs {
		if f == nil || f.match(d.Meta) {
			out = append(out, d)
		}
	}
	return out
}

func mustCheck(t *testing.T, ix *Index, what string) {
	t.Helper()
	if is := ix.Check(); len(is) != 0 {
		t.Fatalf("%s: Check: %+v", what, is)
	}
}

// roundTrip saves ix to path with meta and loads it back, checked.
func roundTrip(t *testing.T, ix *Index, path string, meta Meta) (*Index, Meta) {
	t.Helper()
	if err := ix.Save(path, meta); err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, got, "loaded")
	return got, gotMeta
}

func mustAddDocs(t *testing.T, ix *Index, docs ...Doc) {
	t.Helper()
	if err := ix.Add(bg, docs); err != nil {
		t.Fatal(err)
	}
}

func search(t *testing.T, ix *Index, q []float32, k int, opts SearchOptions) []Hit {
	t.Helper()
	hits, err := ix.Search(bg, q, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// bucketed gives each of n documents (one passage from vecs) a "bucket":
// "a" with probability 1 %, "b" 9 %, "c" 40 %, "d" 50 %, and a "tag"
// drawn from a few prefixed values.
func bucketed(rng *rand.Rand, vecs [][]float32) []Doc {
	docs := make([]Doc, len(vecs))
	for i, v := range vecs {
		u, b := rng.Float64(), "d"
		switch {
		case u < 0.01:
			b = "a"
		case u < 0.10:
			b = "b"
		case u < 0.50:
			b = "c"
		}
		docs[i] = Doc{ID: fmt.Sprintf("doc%05d", i), Vectors: [][]float32{v},
			Meta: map[string]string{"bucket": b, "tag": fmt.Sprintf("t%d/%d", rng.Intn(3), rng.Intn(4))}}
	}
	return docs
}

// selectivities are the filters of 1 %, 10 % and 50 % selectivity over
// bucketed documents.
var selectivities = []struct {
	name string
	f    testFilter
}{
	{"1%", eq{"bucket", "a"}},
	{"10%", or{eq{"bucket", "a"}, eq{"bucket", "b"}}},
	{"50%", not{eq{"bucket", "d"}}},
}

// TestFilteredRecall: filtered search against exact filtered search at 1,
// 10 and 50 % selectivity on 20,000 clustered 64-d vectors, at the default
// EfSearch: recall@10 >= 0.95 with the strategy Search chooses and with
// each strategy forced; every hit matches; k hits always come back.
func TestFilteredRecall(t *testing.T) {
	n, nq, k := 20_000, 100, 10
	if testing.Short() {
		n = 5000
	}
	rng := rand.New(rand.NewSource(4))
	data := densetest.Clustered(4, n+nq, 64, 200, 1.2)
	docs := bucketed(rng, data[:n])
	ix := New(Config{Dim: 64})
	start := time.Now()
	mustAddDocs(t, ix, docs...)
	t.Logf("built %d x 64 in %v", n, time.Since(start).Round(time.Millisecond))
	byID := map[string]Doc{}
	for _, d := range docs {
		byID[d.ID] = d
	}
	for _, sel := range append(selectivities, struct {
		name string
		f    testFilter
	}{"unfiltered", nil}) {
		sub := matching(docs, sel.f)
		truth := make([]map[string]bool, nq)
		for i, q := range data[n:] {
			truth[i] = map[string]bool{}
			for _, h := range ExactDocs(sub, q, k) {
				truth[i][h.ID] = true
			}
		}
		for _, strategy := range []Strategy{StrategyAuto, StrategyTraverse, StrategyScan} {
			var f Filter
			if sel.f != nil {
				f = sel.f
			}
			var st SearchStats
			found, used := 0, map[Strategy]int{}
			start := time.Now()
			for i, q := range data[n:] {
				hits := search(t, ix, q, k, SearchOptions{Filter: f, Strategy: strategy, Stats: &st})
				used[st.Strategy]++
				if len(hits) != k {
					t.Fatalf("%s %v: %d hits, want %d (%d documents match)", sel.name, strategy, len(hits), k, len(sub))
				}
				for _, h := range hits {
					if sel.f != nil && !sel.f.match(byID[h.ID].Meta) {
						t.Fatalf("%s: hit %s does not match", sel.name, h.ID)
					}
					if truth[i][h.ID] {
						found++
					}
				}
			}
			r := float64(found) / float64(k*nq)
			t.Logf("%s (%d documents) %v: recall@%d %.4f, %v per query, strategies %v", sel.name, len(sub), strategy, k, r,
				(time.Since(start) / time.Duration(nq)).Round(time.Microsecond), used)
			if r < 0.95 {
				t.Errorf("%s %v: recall@%d %.4f < 0.95", sel.name, strategy, k, r)
			}
		}
	}
}

// TestFilterFewerThanK: a filter matching fewer than k documents returns
// exactly those, best first, whatever the strategy; one matching nothing
// returns nothing.
func TestFilterFewerThanK(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	data := densetest.Clustered(6, 3001, 32, 30, 1.0)
	docs := bucketed(rng, data[:3000])
	docs[17].Meta["rare"], docs[1234].Meta["rare"], docs[2999].Meta["rare"] = "yes", "yes", "yes"
	ix := New(Config{Dim: 32})
	mustAddDocs(t, ix, docs...)
	q := data[3000]
	f := eq{"rare", "yes"}
	want := ExactDocs(matching(docs, f), q, 10)
	for _, s := range []Strategy{StrategyAuto, StrategyTraverse, StrategyScan} {
		got := search(t, ix, q, 10, SearchOptions{Filter: f, Strategy: s})
		if len(want) != 3 || !slices.Equal(hitIDs(got), hitIDs(want)) {
			t.Fatalf("%v: got %v, want %v", s, hitIDs(got), hitIDs(want))
		}
	}
	for _, f := range []Filter{eq{"rare", "no"}, eq{"nokey", "x"}, prefix{"tag", "zz"},
		and{eq{"bucket", "a"}, not{eq{"bucket", "a"}}}, FilterFunc(func(Postings) *roaring.Bitmap { return nil })} {
		for _, s := range []Strategy{StrategyAuto, StrategyTraverse, StrategyScan} {
			if got := search(t, ix, q, 10, SearchOptions{Filter: f, Strategy: s}); len(got) != 0 {
				t.Fatalf("filter %v %v matching nothing: %v", f, s, got)
			}
		}
	}
	// A filter matching every document is an unfiltered search.
	var st SearchStats
	all := search(t, ix, q, 10, SearchOptions{Filter: prefix{"bucket", ""}, Stats: &st})
	if st.Strategy != StrategyGraph || st.Matched != 3000 || !slices.Equal(all, search(t, ix, q, 10, SearchOptions{})) {
		t.Fatalf("filter matching all: %v, %+v", all, st)
	}
	// A filter returning documents that are not live gets them dropped.
	ix.Delete([]string{docs[17].ID})
	stale := FilterFunc(func(Postings) *roaring.Bitmap { return roaring.BitmapOf(17, 1234, 99999) })
	if got := search(t, ix, q, 10, SearchOptions{Filter: stale}); len(got) != 1 || got[0].ID != docs[1234].ID {
		t.Fatalf("stale bitmap: %v", got)
	}
}

// TestPostings checks Term, Prefix and All against the documents' metadata
// through random upserts (changing metadata) and deletes.
func TestPostings(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	data := densetest.Clustered(8, 400, 8, 4, 1.0)
	ix := New(Config{Dim: 8, M: 6, EfConstruction: 32})
	ref := map[string]Doc{}
	vals := []string{"", "a", "ab", "abc", "abd", "b", "ba", "é", "a\x00b"}
	for step := 0; step < 600; step++ {
		id := fmt.Sprintf("d%d", rng.Intn(150))
		if rng.Intn(4) == 0 {
			ix.Delete([]string{id})
			delete(ref, id)
		} else {
			meta := map[string]string{}
			for _, k := range []string{"x", "y", "z"} {
				if rng.Intn(3) > 0 {
					meta[k] = vals[rng.Intn(len(vals))]
				}
			}
			d := Doc{ID: id, Vectors: [][]float32{data[rng.Intn(len(data))]}, Meta: meta}
			mustAddDocs(t, ix, d)
			ref[id] = d
		}
		if step%7 != 0 {
			continue
		}
		ix.mu.RLock()
		p := &ix.meta
		ids := func(bm *roaring.Bitmap) []string {
			var out []string
			bm.Iterate(func(doc uint32) bool {
				out = append(out, ix.docs[doc].id)
				return true
			})
			slices.Sort(out)
			return out
		}
		want := func(f testFilter) []string {
			var out []string
			for id, d := range ref {
				if f == nil || f.match(d.Meta) {
					out = append(out, id)
				}
			}
			slices.Sort(out)
			return out
		}
		if got := ids(p.All()); !slices.Equal(got, want(nil)) {
			t.Fatalf("step %d: All %v, want %v", step, got, want(nil))
		}
		for _, k := range []string{"x", "y", "z", "w"} {
			for _, v := range append(vals, "zz") {
				if got := ids(p.Term(k, v)); !slices.Equal(got, want(eq{k, v})) {
					t.Fatalf("step %d: Term(%q, %q) = %v, want %v", step, k, v, got, want(eq{k, v}))
				}
				if got := ids(p.Prefix(k, v)); !slices.Equal(got, want(prefix{k, v})) {
					t.Fatalf("step %d: Prefix(%q, %q) = %v, want %v", step, k, v, got, want(prefix{k, v}))
				}
			}
		}
		// The bitmaps returned are the caller's: changing one leaves the
		// index alone.
		p.Term("x", "a").Clear()
		p.Prefix("x", "").Clear()
		p.All().Clear()
		ix.mu.RUnlock()
		mustCheck(t, ix, fmt.Sprint("step ", step))
	}
}

// TestUpsertChangesMetadata: after an upsert with other metadata the
// document matches the new terms only; the vector changes too.
func TestUpsertChangesMetadata(t *testing.T) {
	ix := New(Config{Dim: 2})
	mustAddDocs(t, ix,
		Doc{ID: "a", Vectors: [][]float32{{1, 0}}, Meta: map[string]string{"lang": "en", "year": "2020"}},
		Doc{ID: "b", Vectors: [][]float32{{0, 1}}, Meta: map[string]string{"lang": "de"}})
	q := []float32{1, 0.1}
	if got := search(t, ix, q, 5, SearchOptions{Filter: eq{"lang", "en"}}); !slices.Equal(hitIDs(got), []string{"a"}) {
		t.Fatalf("before: %v", got)
	}
	mustAddDocs(t, ix, Doc{ID: "a", Vectors: [][]float32{{0.5, 0.5}}, Meta: map[string]string{"lang": "fr"}})
	mustCheck(t, ix, "after upsert")
	if got := search(t, ix, q, 5, SearchOptions{Filter: eq{"lang", "en"}}); len(got) != 0 {
		t.Fatalf("old metadata still matches: %v", got)
	}
	if got := search(t, ix, q, 5, SearchOptions{Filter: eq{"year", "2020"}}); len(got) != 0 {
		t.Fatalf("dropped key still matches: %v", got)
	}
	if got := search(t, ix, q, 5, SearchOptions{Filter: prefix{"lang", "f"}}); !slices.Equal(hitIDs(got), []string{"a"}) {
		t.Fatalf("new metadata: %v", got)
	}
	if m, v, ok := ix.Meta("a"); !ok || !maps.Equal(m, map[string]string{"lang": "fr"}) || v != nil {
		t.Fatalf("Meta(a) = %v %v %v", m, v, ok)
	}
	// Metadata removed altogether; the caller's map is not kept.
	meta := map[string]string{"lang": "en"}
	mustAddDocs(t, ix, Doc{ID: "b", Vectors: [][]float32{{0, 1}}, Meta: meta})
	meta["lang"] = "xx"
	mustAddDocs(t, ix, Doc{ID: "a", Vectors: [][]float32{{1, 0}}})
	mustCheck(t, ix, "after removing metadata")
	if got := search(t, ix, q, 5, SearchOptions{Filter: prefix{"lang", ""}}); !slices.Equal(hitIDs(got), []string{"b"}) {
		t.Fatalf("after removing a's metadata: %v", got)
	}
	if got := search(t, ix, q, 5, SearchOptions{Filter: eq{"lang", "xx"}}); len(got) != 0 {
		t.Fatalf("caller's map change leaked in: %v", got)
	}
	if err := ix.Add(bg, []Doc{{ID: "c", Vectors: [][]float32{{1, 1}}, Meta: map[string]string{"": "v"}}}); err == nil {
		t.Fatal("empty metadata key accepted")
	}
}

// TestCompactionKeepsPostings deletes enough documents for the graph to
// compact (renumbering its nodes) and checks that filters still select
// exactly the right documents, that surviving documents keep their
// numbers, and that re-added ones are found.
func TestCompactionKeepsPostings(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	data := densetest.Clustered(10, 2100, 24, 20, 1.0)
	docs := bucketed(rng, data[:2000])
	ix := New(Config{Dim: 24, M: 8, EfConstruction: 64})
	mustAddDocs(t, ix, docs...)
	nums := map[string]uint32{}
	for id, n := range ix.byID {
		nums[id] = n
	}
	var del []string
	live := map[string]Doc{}
	for i, d := range docs {
		if i%5 < 2 {
			del = append(del, d.ID)
		} else {
			live[d.ID] = d
		}
	}
	before := ix.g.Len()
	if err := ix.Delete(del); err != nil {
		t.Fatal(err)
	}
	if ix.g.Len() != before-len(del) || ix.Len() != len(live) {
		t.Fatalf("Len %d after deleting %d of %d", ix.Len(), len(del), len(docs))
	}
	mustCheck(t, ix, "after deletes")
	for id, n := range ix.byID {
		if nums[id] != n {
			t.Fatalf("document %s changed number %d -> %d", id, nums[id], n)
		}
	}
	check := func(what string, docs []Doc) {
		t.Helper()
		for _, sel := range selectivities {
			sub := matching(docs, sel.f)
			for _, q := range data[2000:2020] {
				for _, s := range []Strategy{StrategyScan, StrategyTraverse} {
					got := search(t, ix, q, 10, SearchOptions{Filter: sel.f, Strategy: s, Ef: 200})
					want := ExactDocs(sub, q, 10)
					if len(got) != len(want) {
						t.Fatalf("%s %s %v: %d hits, want %d", what, sel.name, s, len(got), len(want))
					}
					if s == StrategyScan && !slices.Equal(hitIDs(got), hitIDs(want)) {
						t.Fatalf("%s %s scan: %v, want %v", what, sel.name, hitIDs(got), hitIDs(want))
					}
				}
			}
		}
	}
	check("after compaction", slices.Collect(maps.Values(live)))
	mustAddDocs(t, ix, docs...)
	mustCheck(t, ix, "after re-adding")
	check("after re-adding", docs)
}

// TestSaveLoadMetadataAndPassages: a round trip keeps documents, passages,
// metadata, posting lists and document numbers, and the loaded index
// answers filtered searches alike and keeps working.
func TestSaveLoadMetadataAndPassages(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	data := densetest.Clustered(12, 1500, 16, 10, 1.0)
	docs := bucketed(rng, data[:1000])
	for i := range docs {
		if i%3 == 0 { // a third of the documents get three passages
			docs[i].Vectors = append(docs[i].Vectors, data[1000+i%400], data[1000+(i*7)%400])
		}
	}
	ix := New(Config{Dim: 16, M: 8, EfConstruction: 48})
	mustAddDocs(t, ix, docs...)
	ix.Delete([]string{docs[5].ID, docs[6].ID, docs[9].ID})
	path := t.TempDir() + "/dense.idx"
	meta := Meta{StoreID: "s", Fingerprint: "f", AppliedSeq: 3}
	got, gotMeta := roundTrip(t, ix, path, meta)
	if gotMeta != meta || got.Len() != ix.Len() || got.Passages() != ix.Passages() {
		t.Fatalf("loaded meta %+v Len %d passages %d, want %+v %d %d", gotMeta, got.Len(), got.Passages(), meta, ix.Len(), ix.Passages())
	}
	if !slices.EqualFunc(got.docs, ix.docs, func(a, b docEntry) bool {
		return a.id == b.id && a.passages == b.passages && slices.Equal(a.meta, b.meta)
	}) {
		t.Fatal("document table differs")
	}
	for id, n := range ix.byID {
		if got.byID[id] != n {
			t.Fatalf("document %s: number %d after loading, %d before", id, got.byID[id], n)
		}
		m1, mv1, _ := ix.Meta(id)
		m2, mv2, _ := got.Meta(id)
		v1, _ := ix.Vectors(id)
		v2, _ := got.Vectors(id)
		if !maps.Equal(m1, m2) || !maps.EqualFunc(mv1, mv2, filter.Value.Equal) || len(v1) != len(v2) {
			t.Fatalf("document %s: metadata or passages differ", id)
		}
	}
	if !got.free.Equals(ix.free) {
		t.Fatalf("free numbers %v, want %v", got.free, ix.free)
	}
	for _, q := range data[1400:1430] {
		for _, sel := range append(selectivities[:2:2], struct {
			name string
			f    testFilter
		}{"prefix", prefix{"tag", "t1/"}}) {
			a := search(t, ix, q, 10, SearchOptions{Filter: sel.f})
			b := search(t, got, q, 10, SearchOptions{Filter: sel.f})
			if !slices.Equal(a, b) {
				t.Fatalf("%s: loaded index answers differently:\n%v\n%v", sel.name, a, b)
			}
		}
	}
	ids, err := ReadIDs(path)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	want := ix.IDs()
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("ReadIDs: %d IDs, want %d", len(ids), len(want))
	}
	// The loaded index keeps working: a re-added document gets a free
	// number back.
	mustAddDocs(t, got, docs[5])
	mustCheck(t, got, "loaded, then added to")
}
