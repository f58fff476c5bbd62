package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// metaDoc is doc(n) with metadata: lang cycles through en, de, fr; year
// through 2000..2009.
func metaDoc(n int) engine.Document {
	d := doc(n)
	d.Meta = map[string]string{"lang": []string{"en", "de", "fr"}[n%3], "year": fmt.Sprint(2000 + n%10)}
	return d
}

// want lists, sorted, the ids among docs 0..n-1 whose metadata f matches.
func want(n int, f engine.Filter) []string {
	var out []string
	for i := range n {
		if d := metaDoc(i); f.Match(d.Meta) {
			out = append(out, d.ID)
		}
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestFilteredSearch: every mode returns only matching documents, all of
// them when fewer than K match, K of them when more do; the filter follows
// updates and deletes, and survives a reopen.
func TestFilteredSearch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	const n = 300
	var docs []engine.Document
	for i := range n {
		docs = append(docs, metaDoc(i))
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	filters := []engine.Filter{
		engine.Eq("year", "2003"), // 30 docs
		engine.And(engine.Eq("lang", "en"), engine.In("year", "2001", "2004")), // 10
		engine.Or(engine.Prefix("year", "200"), engine.Eq("lang", "xx")),       // all
		engine.And(engine.Eq("lang", "de"), engine.Not(engine.Eq("year", "2001"))),
		engine.Eq("lang", "none"), // nothing
	}
	check := func(e *engine.Engine, step string) {
		t.Helper()
		for _, f := range filters {
			w := want(n, f)
			for _, mode := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
				// Every document holds "shared words", so BM25 and the dense
				// list can both reach every match.
				rs, err := e.Search(ctx, "shared words about search engines", engine.SearchOptions{Mode: mode, K: n, Filter: f})
				if err != nil {
					t.Fatalf("%s: %s %v: %v", step, mode, f, err)
				}
				if got := sorted(ids(rs)); !slices.Equal(got, w) {
					t.Fatalf("%s: %s %v: got %d docs, want exactly the %d matching ones", step, mode, f, len(got), len(w))
				}
				if len(w) < 5 {
					continue
				}
				rs, err = e.Search(ctx, "shared words about search engines", engine.SearchOptions{Mode: mode, K: 5, Filter: f})
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) != 5 {
					t.Fatalf("%s: %s %v, K 5: %d results", step, mode, f, len(rs))
				}
				for _, r := range rs {
					if !f.Match(r.Meta) {
						t.Fatalf("%s: %s %v: %s (%v) does not match", step, mode, f, r.ID, r.Meta)
					}
				}
			}
		}
		// A rare term found by a filtered search only when its document matches.
		for _, mode := range []engine.Mode{engine.ModeLexical, engine.ModeHybrid} {
			rs, err := e.Search(ctx, "tok7", engine.SearchOptions{Mode: mode, K: 3, Filter: engine.Eq("lang", "en")})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.ID == "d00007" {
					t.Fatalf("%s: %s: d00007 (lang de) returned under lang=en", step, mode)
				}
			}
		}
	}
	check(e, "fresh")

	// Updating a document moves it between filters; deleting removes it.
	moved := metaDoc(3) // year 2003, lang en
	moved.Meta = map[string]string{"lang": "xx", "year": "1999"}
	if _, err := e.Add(ctx, []engine.Document{moved}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Delete(ctx, []string{"d00013"}); err != nil { // year 2003
		t.Fatal(err)
	}
	for _, mode := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
		rs, err := e.Search(ctx, "shared words", engine.SearchOptions{Mode: mode, K: n, Filter: engine.Eq("year", "2003")})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rs); len(got) != 28 || slices.Contains(got, "d00003") || slices.Contains(got, "d00013") {
			t.Fatalf("%s after update and delete: %d docs (%v)", mode, len(got), got)
		}
		rs, err = e.Search(ctx, "shared words", engine.SearchOptions{Mode: mode, K: n, Filter: engine.Eq("lang", "xx")})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rs); !slices.Equal(got, []string{"d00003"}) {
			t.Fatalf("%s: lang=xx gives %v, want [d00003]", mode, got)
		}
	}
	// Put them back and check everything again after a reopen.
	if _, err := e.Add(ctx, []engine.Document{metaDoc(3), metaDoc(13)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, dir, "fp-a")
	defer e.Close()
	check(e, "reopened")

	// Invalid filters are option errors, before any search runs.
	for _, f := range []engine.Filter{engine.In("lang"), engine.Eq("", "x"), engine.Or()} {
		_, err := e.Search(ctx, "shared", engine.SearchOptions{Filter: f})
		var oe *engine.OptionError
		if !errors.Is(err, engine.ErrInvalidOption) || !errors.As(err, &oe) || oe.Field != "SearchOptions.Filter" {
			t.Fatalf("filter %v: got %v, want an OptionError on SearchOptions.Filter", f, err)
		}
	}
}

func TestParseFilter(t *testing.T) {
	f, err := engine.ParseFilter([]byte(`{"lang": "en", "or": [{"in": {"year": ["2001", "2004"]}}, {"not": {"prefix": {"year": "200"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for meta, match := range map[[2]string]bool{{"en", "2001"}: true, {"en", "2002"}: false, {"en", "1999"}: true, {"de", "2001"}: false} {
		if got := f.Match(map[string]string{"lang": meta[0], "year": meta[1]}); got != match {
			t.Errorf("%v on %v: %v, want %v", f, meta, got, match)
		}
	}
	if _, err := engine.ParseFilter([]byte(`{"or": [{"lang": "en"}, {"in": {"year": []}}]}`)); err == nil || !strings.Contains(err.Error(), "$.or[1].in.year") {
		t.Fatalf("bad filter: %v, want an error naming $.or[1].in.year", err)
	}
}

// TestSnippets: a BM25 hit's snippet is around the query's terms; a long
// document's dense hit shows the passage that matched; a hit holding none
// of the query's words shows the text's beginning.
func TestSnippets(t *testing.T) {
	ctx := context.Background()
	// Windows of 12 words (the hashing encoder's tokens), so the documents
	// below are split into passages.
	e, err := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: &encodertest.Hashing{D: 256, FP: "fp", MaxLen: 12}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	filler := func(w string, n int) string { return strings.TrimSpace(strings.Repeat(w+" ", n)) }
	long := filler("alpha", 40) + " the striped zebra grazes on the savanna " + filler("omega", 40)
	docs := []engine.Document{
		{ID: "long", Title: "Animals", Text: long},
		{ID: "short", Text: "Zebras are grazing animals; a zebra has stripes."},
		{ID: "other", Text: "Nothing about it here at all."},
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	check := func(r engine.Result, source string, terms ...string) {
		t.Helper()
		s := r.Snippet
		if s == nil {
			t.Fatalf("%s: no snippet", r.ID)
		}
		if s.Source != source || s.Text != r.Text[s.Start:s.End] {
			t.Fatalf("%s: snippet %+v, want source %s and Text = Result.Text[Start:End]", r.ID, s, source)
		}
		var got []string
		for _, h := range s.Highlights {
			if h.Start < s.Start || h.End > s.End {
				t.Fatalf("%s: highlight %v outside the snippet [%d, %d)", r.ID, h, s.Start, s.End)
			}
			got = append(got, r.Text[h.Start:h.End])
		}
		if !slices.Equal(got, terms) {
			t.Fatalf("%s: highlights %q, want %q", r.ID, got, terms)
		}
	}
	rs, err := e.Search(ctx, "zebra stripes", engine.SearchOptions{Mode: engine.ModeLexical, K: 3, Snippets: true, SnippetSize: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		switch r.ID {
		case "short": // stemmed as BM25 reads it: Zebras, zebra and stripes
			check(r, "lexical", "Zebras", "zebra", "stripes")
		case "long":
			check(r, "lexical", "striped", "zebra") // striped and stripes share a stem
		}
	}
	rs, err = e.Search(ctx, "striped zebra savanna", engine.SearchOptions{Mode: engine.ModeDense, K: 3, Snippets: true})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].ID != "long" {
		t.Fatalf("dense: got %v first, want the long document (its zebra passage)", ids(rs))
	}
	check(rs[0], "passage", "striped", "zebra", "savanna")
	if s := rs[0].Snippet; s.Start == 0 || s.End == len(long) {
		t.Fatalf("passage snippet [%d, %d) is not inside the long text", s.Start, s.End)
	}
	for _, r := range rs {
		if r.ID == "other" {
			check(r, "lead")
			if r.Snippet.Start != 0 {
				t.Fatalf("lead snippet starts at %d", r.Snippet.Start)
			}
		}
	}
	if _, err := e.Search(ctx, "x", engine.SearchOptions{Snippets: true, SnippetSize: -1}); !errors.Is(err, engine.ErrInvalidOption) {
		t.Fatalf("SnippetSize -1: %v", err)
	}
}

// TestChunkingRecorded: the chunking is bound to the directory with its
// first documents; opening with another is refused, Reindex changes it,
// and a reopen with the zero Chunking takes the recorded one.
func TestChunkingRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	enc := func() *encodertest.Hashing { return &encodertest.Hashing{D: 64, FP: "fp", MaxLen: 12} }
	open := func(ch engine.Chunking) (*engine.Engine, error) {
		return engine.Open(ctx, dir, engine.Options{Encoder: enc(), Chunking: ch})
	}
	e, err := open(engine.Chunking{Tokens: 10, Stride: 4})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("alpha ", 30) + "zebra " + strings.Repeat("omega ", 30)
	if _, err := e.Add(ctx, []engine.Document{{ID: "long", Text: long}}); err != nil {
		t.Fatal(err)
	}
	source := func(e *engine.Engine) string {
		t.Helper()
		rs, err := e.Search(ctx, "zebra", engine.SearchOptions{Mode: engine.ModeDense, K: 1, Snippets: true})
		if err != nil || len(rs) != 1 {
			t.Fatalf("search: %v %v", rs, err)
		}
		return rs[0].Snippet.Source
	}
	if got := source(e); got != "passage" {
		t.Fatalf("chunked: snippet source %q, want passage", got)
	}
	e.Close()
	if _, err := open(engine.Chunking{Tokens: 12}); !errors.Is(err, engine.ErrInvalidOption) || !strings.Contains(err.Error(), "Reindex") {
		t.Fatalf("reopen with another chunking: %v, want an OptionError pointing to Reindex", err)
	}
	if e, err = open(engine.Chunking{}); err != nil {
		t.Fatal(err)
	}
	if got := e.Chunking(); got != (engine.Chunking{Tokens: 10, Stride: 4}) {
		t.Fatalf("reopened with the zero Chunking: %v, want the recorded one", got)
	}
	if err := e.Reindex(ctx, engine.ReindexOptions{Encoder: enc(), Chunking: &engine.Chunking{Off: true}}); err != nil {
		t.Fatal(err)
	}
	if got := source(e); got != "lexical" {
		t.Fatalf("after Reindex without chunking: snippet source %q, want lexical (one passage)", got)
	}
	e.Close()
	if e, err = open(engine.Chunking{}); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.Chunking().Off {
		t.Fatalf("reopened after Reindex: chunking %v, want off", e.Chunking())
	}
}

// TestMetadataKeys: every key with its distinct values, the string values
// held by the most documents first, and the range of the numbers; a key
// no document holds any more is gone.
func TestMetadataKeys(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp")
	defer e.Close()
	docs := []engine.Document{
		{ID: "a", Text: "x", Meta: map[string]string{"lang": "en"}, MetaValues: map[string]engine.Value{"year": engine.NumberValue(1999), "tags": engine.StringsValue("x", "y")}},
		{ID: "b", Text: "x", Meta: map[string]string{"lang": "en"}, MetaValues: map[string]engine.Value{"year": engine.NumberValue(2024)}},
		{ID: "c", Text: "x", Meta: map[string]string{"lang": "de", "gone": "soon"}, MetaValues: map[string]engine.Value{"tags": engine.StringsValue("y")}},
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Delete(ctx, []string{"c"}); err != nil {
		t.Fatal(err)
	}
	got, err := e.MetadataKeys(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.MetadataKey{
		{Key: "lang", Values: 1, Top: []engine.MetadataValue{{Value: "en", Documents: 2}}},
		{Key: "tags", Values: 2, Top: []engine.MetadataValue{{Value: "x", Documents: 1}}},
		{Key: "year", Values: 2, Numeric: true, Min: 1999, Max: 2024},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("metadata keys:\n got %+v\nwant %+v", got, want)
	}
}
