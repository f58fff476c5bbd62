package engine_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

// valuesDoc is doc(n) with typed metadata: year a number 1950..1969, tags
// a list of two strings, and lang a string.
func valuesDoc(n int) engine.Document {
	d := doc(n)
	d.Meta = map[string]string{"lang": []string{"en", "de", "fr"}[n%3]}
	d.MetaValues = map[string]engine.Value{
		"year": engine.NumberValue(float64(1950 + n%20)),
		"tags": engine.StringsValue(fmt.Sprint("t", n%3), fmt.Sprint("u", n%5)),
	}
	return d
}

// TestMetaValues (issue #41 item 8): numbers and lists are stored and
// returned as such; a list matches a filter when any element does, numbers
// compare numerically and in ranges; every mode returns exactly the
// matching documents, and K of them when more match; re-adding the same
// documents changes nothing; all of it after a reopen too. Before, a
// number or an array reached the engine only as a string: tags=a matched
// nothing, and there were no ranges.
func TestMetaValues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	const n = 200
	var docs []engine.Document
	for i := range n {
		docs = append(docs, valuesDoc(i))
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	filters := []engine.Filter{
		engine.Gte("year", "1960"),                                   // half
		engine.Lt("year", "1952"),                                    // 20
		engine.Range("year", "1955", "1957"),                         // 20
		engine.Eq("year", "1960.0"),                                  // 10
		engine.Eq("tags", "t1"),                                      // a third
		engine.And(engine.Eq("tags", "t1"), engine.Eq("tags", "u2")), // both elements of one list
		engine.Not(engine.Eq("tags", "t0")),
		engine.And(engine.Eq("lang", "en"), engine.Gt("year", "1965")),
	}
	check := func(e *engine.Engine, step string) {
		t.Helper()
		for _, f := range filters {
			var w []string
			for i := range n {
				if d := valuesDoc(i); f.MatchValues(d.Meta, d.MetaValues) {
					w = append(w, d.ID)
				}
			}
			if len(w) < 5 {
				t.Fatalf("%s matches only %d documents", f, len(w))
			}
			for _, mode := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
				rs, err := e.Search(ctx, "shared words about search engines", engine.SearchOptions{Mode: mode, K: n, Filter: f})
				if err != nil {
					t.Fatalf("%s: %s %v: %v", step, mode, f, err)
				}
				if got := sorted(ids(rs)); !slices.Equal(got, w) {
					t.Fatalf("%s: %s %v: got %d docs, want exactly the %d matching ones", step, mode, f, len(got), len(w))
				}
				rs, err = e.Search(ctx, "shared words about search engines", engine.SearchOptions{Mode: mode, K: 5, Filter: f})
				if err != nil || len(rs) != 5 {
					t.Fatalf("%s: %s %v, K 5: %d results, %v", step, mode, f, len(rs), err)
				}
				for _, r := range rs {
					var i int
					fmt.Sscanf(r.ID, "d%d", &i)
					want := valuesDoc(i)
					if !maps.Equal(r.Meta, want.Meta) || !maps.EqualFunc(r.MetaValues, want.MetaValues, engine.Value.Equal) {
						t.Fatalf("%s: %s: %s has %v %v, stored %v %v", step, mode, r.ID, r.Meta, r.MetaValues, want.Meta, want.MetaValues)
					}
				}
			}
		}
	}
	check(e, "fresh")
	res, err := e.Add(ctx, docs)
	if err != nil || res.Unchanged != n || res.Committed {
		t.Fatalf("re-adding the same documents: %+v, %v", res, err)
	}
	changed := valuesDoc(0)
	changed.MetaValues = map[string]engine.Value{"year": engine.NumberValue(1950), "tags": engine.StringsValue("u0", "t0")}
	if res, err := e.Add(ctx, []engine.Document{changed}); err != nil || res.Updated != 1 {
		t.Fatalf("reordering a list: %+v, %v (a list is kept in order)", res, err)
	}
	if _, err := e.Add(ctx, []engine.Document{valuesDoc(0)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, dir, "fp-a")
	defer e.Close()
	check(e, "reopened")

	// Unknown keys: what a filter names and no document has.
	got, err := e.UnknownKeys(engine.And(engine.Eq("lang", "en"), engine.Eq(" bucket ", "1"), engine.Gte("yeer", "1")))
	if err != nil || !slices.Equal(got, []string{" bucket ", "yeer"}) {
		t.Fatalf("UnknownKeys = %q, %v", got, err)
	}
}

// TestMetaValuesCanonical: a MetaValues string is stored in Meta (one
// form per document, so re-adding either form changes nothing), and bad
// metadata is refused before anything is stored, naming the document and
// the key.
func TestMetaValuesCanonical(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	d := doc(1)
	d.MetaValues = map[string]engine.Value{"lang": engine.StringValue("en"), "n": engine.NumberValue(-0.5)}
	caller := maps.Clone(d.MetaValues)
	if _, err := e.Add(ctx, []engine.Document{d}); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(d.MetaValues, caller, engine.Value.Equal) || d.Meta != nil {
		t.Fatal("Add changed the caller's maps")
	}
	got, err := e.Get(ctx, d.ID)
	if err != nil || len(got) != 1 || got[0].Meta["lang"] != "en" || len(got[0].MetaValues) != 1 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if x, ok := got[0].MetaValues["n"].Number(); !ok || x != -0.5 {
		t.Fatalf("n = %v", got[0].MetaValues["n"])
	}
	same := doc(1)
	same.Meta = map[string]string{"lang": "en"}
	same.MetaValues = map[string]engine.Value{"n": engine.NumberValue(-0.5)}
	if res, err := e.Add(ctx, []engine.Document{same}); err != nil || res.Unchanged != 1 {
		t.Fatalf("the canonical form re-added: %+v, %v", res, err)
	}
	for _, tc := range []struct {
		meta   map[string]string
		values map[string]engine.Value
		want   string
	}{
		{map[string]string{"k": "a"}, map[string]engine.Value{"k": engine.NumberValue(1)}, `metadata key "k" is in both Meta and MetaValues`},
		{nil, map[string]engine.Value{"x": engine.NumberValue(math.NaN())}, `metadata key "x": number NaN is not finite`},
		{nil, map[string]engine.Value{"x": engine.ListValue(engine.NumberValue(math.Inf(1)))}, `metadata key "x": number +Inf is not finite`},
		{map[string]string{"": "a"}, nil, "metadata: empty key"},
		{nil, map[string]engine.Value{"": engine.NumberValue(1)}, "metadata: empty key"},
	} {
		bad := doc(2)
		bad.Meta, bad.MetaValues = tc.meta, tc.values
		_, err := e.Add(ctx, []engine.Document{bad})
		if err == nil || !strings.Contains(err.Error(), `document "d00002": `+tc.want) {
			t.Errorf("%v %v: err = %v, want %q", tc.meta, tc.values, err, tc.want)
		}
	}
	if got, _ := e.Get(ctx, "d00002"); len(got) != 0 {
		t.Fatal("a refused document was stored")
	}
}
