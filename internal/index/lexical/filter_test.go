package lexical

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/storage"
)

func hitIDs(t *testing.T, ix *Index, q string, k int, f filter.Filter) []string {
	t.Helper()
	hits, err := ix.SearchFilter(context.Background(), q, k, f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestFilterFollowsUpsertsAndDeletes: an upsert that changes a document's
// metadata moves it between postings, a delete removes it from them, the
// postings persist across a reopen, and Bleve's own term query on the
// metadata field finds the same documents (one exact term key\x00value).
func TestFilterFollowsUpsertsAndDeletes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "lex")
	ix, err := Open(dir, Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	docs := []storage.Doc{
		{ID: "d1", Text: "dog", Meta: map[string]string{"lang": "en", "year": "2001"}},
		{ID: "d2", Text: "dog dog", Meta: map[string]string{"lang": "de"}},
		{ID: "d3", Text: "dog cat", Meta: map[string]string{"lang": "en", "path": "docs/a", "lang\x00x": "y"}},
		{ID: "d4", Text: "dog bird"},
	}
	if err := ix.Index(ctx, docs, 1); err != nil {
		t.Fatal(err)
	}
	check := func(f filter.Filter, want ...string) {
		t.Helper()
		if got := hitIDs(t, ix, "dog", 10, f); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", f, got, want)
		}
		n, err := ix.CountMatching(ctx, f)
		if err != nil || n != uint64(len(want)) {
			t.Errorf("CountMatching(%s) = %d, %v; want %d", f, n, err, len(want))
		}
	}
	check(filter.Filter{}, "d1", "d2", "d3", "d4")
	check(filter.Eq("lang", "en"), "d1", "d3")
	check(filter.Not(filter.Eq("lang", "en")), "d2", "d4")
	check(filter.Eq("lang", "x\x00y")) // not the unindexed key "lang\x00x"
	check(filter.Prefix("path", "docs/"), "d3")
	check(filter.Prefix("lang", ""), "d1", "d2", "d3")
	check(filter.And(filter.Eq("lang", "en"), filter.Not(filter.Prefix("path", ""))), "d1")

	if err := ix.Index(ctx, []storage.Doc{{ID: "d1", Text: "dog", Meta: map[string]string{"lang": "de"}}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, []string{"d3"}, 3); err != nil {
		t.Fatal(err)
	}
	check(filter.Eq("lang", "en"))
	check(filter.Eq("lang", "de"), "d1", "d2")
	check(filter.Prefix("year", ""))
	check(filter.Not(filter.Eq("lang", "de")), "d4")

	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(dir, Options{ReadOnly: true, Language: "en"}); err != nil {
		t.Fatal(err)
	}
	check(filter.Eq("lang", "de"), "d1", "d2")
	check(filter.In("lang", "en", "de"), "d1", "d2")
	res, err := ix.Bleve().Search(bleve.NewSearchRequest(termQuery(fieldMeta, "lang\x00de")))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range res.Hits {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"d1", "d2"}) {
		t.Fatalf("Bleve's term query on %s: %v", fieldMeta, ids)
	}
}

func termQuery(field, term string) *query.TermQuery {
	q := bleve.NewTermQuery(term)
	q.SetField(field)
	return q
}

// TestFilterErrorsAndFewerThanK: an invalid filter is an error naming the
// bad part; a filter matching fewer than k documents returns those holding
// a query term; one matching none returns nothing.
func TestFilterErrorsAndFewerThanK(t *testing.T) {
	ix, _ := openTiny(t)
	ctx := context.Background()
	var fe *filter.Error
	if _, err := ix.SearchFilter(ctx, "dog", 3, filter.In("k")); !errors.As(err, &fe) || !strings.Contains(err.Error(), "$.in.k: in with no values") {
		t.Fatalf("invalid filter: %v", err)
	}
	if _, err := ix.CountMatching(ctx, filter.Eq("", "x")); !errors.As(err, &fe) {
		t.Fatalf("invalid filter: %v", err)
	}
	if err := ix.Index(ctx, []storage.Doc{{ID: "d2", Text: "dog dog bird", Meta: map[string]string{"k": "v"}}}, 4); err != nil {
		t.Fatal(err)
	}
	if got := hitIDs(t, ix, "dog", 3, filter.Eq("k", "v")); !slices.Equal(got, []string{"d2"}) {
		t.Fatalf("one matching document: %v", got)
	}
	if got := hitIDs(t, ix, "eel", 3, filter.Eq("k", "v")); len(got) != 0 {
		t.Fatalf("matching document without the term: %v", got)
	}
	if got := hitIDs(t, ix, "dog", 3, filter.Eq("k", "w")); len(got) != 0 {
		t.Fatalf("no matching document: %v", got)
	}
}

// TestOldFormatRefused: an index of another format is refused, saying so,
// which is what makes the engine rebuild it.
func TestOldFormatRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lex")
	ix, err := Open(dir, Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.bi.SetInternal(keyFormat, []byte("1")); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	for _, ro := range []bool{false, true} {
		if _, err := Open(dir, Options{ReadOnly: ro}); err == nil || !strings.Contains(err.Error(), `index format "1", want "2"`) {
			t.Fatalf("read-only %v: %v", ro, err)
		}
	}
}

// TestDocSetNext checks docSet.next against a scan of has.
func TestDocSetNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		s := make(docSet, rng.IntN(5))
		for i := range s {
			if rng.IntN(3) > 0 {
				s[i] = rng.Uint64() & rng.Uint64() & rng.Uint64()
			}
		}
		for d := uint64(0); d < uint64(len(s))*64+70; d++ {
			want := uint64(noDoc)
			for x := d; x < uint64(len(s))*64; x++ {
				if s.has(x) {
					want = x
					break
				}
			}
			if got := s.next(d); got != want {
				t.Fatalf("%x.next(%d) = %d, want %d", []uint64(s), d, got, want)
			}
		}
	}
}
