package lexical

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2/mapping"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/storage"
)

var tiny = []storage.Doc{
	{ID: "d1", Title: "cat", Text: "cat dog fish"},
	{ID: "d2", Title: "", Text: "dog dog bird"},
	{ID: "d3", Title: "bird", Text: "fish bird bird cat eel"},
}

func openTiny(t *testing.T) (*Index, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lex")
	ix, err := Open(dir, Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if err := ix.Index(context.Background(), tiny, 3); err != nil {
		t.Fatal(err)
	}
	return ix, dir
}

func search(t *testing.T, ix *Index, q string, k int) map[string]float64 {
	t.Helper()
	hits, err := ix.Search(context.Background(), q, k)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for i, h := range hits {
		if i > 0 && h.Score > hits[i-1].Score {
			t.Fatalf("hits not best-first: %v", hits)
		}
		out[h.ID] = h.Score
	}
	return out
}

func wantScores(t *testing.T, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for id, w := range want {
		if math.Abs(got[id]-w) > 1e-9 {
			t.Errorf("score of %s = %.12f, want %.12f (hand-computed BM25)", id, got[id], w)
		}
	}
}

// TestBM25HandComputed checks scores against BM25 worked out by hand, with
// k1=1.2, b=0.75, idf=ln(1+(N-df+0.5)/(df+0.5)), per-field average lengths
// (title 2/3, text 11/3 tokens over N=3 docs) and best_fields combination
// (best field + 0.5 * the other). The expected values come from
// tools-free arithmetic (python3 -c with the formula above), e.g. for "dog"
// in d2: ln(1.6) * 2*2.2 / (2 + 1.2*(0.25 + 0.75*3/(11/3))) = 0.68108...
func TestBM25HandComputed(t *testing.T) {
	ix, _ := openTiny(t)
	wantScores(t, search(t, ix, "dog", 10), map[string]float64{
		"d2": 0.6810831034578925,
		"d1": 0.5077717780244109,
	})
	wantScores(t, search(t, ix, "cat bird", 10), map[string]float64{
		"d3": 1.4025697079776789,
		"d1": 1.068159231135148,
		"d2": 0.5077717780244109,
	})
	// Bleve itself is configured with the bm25 model, not TF-IDF.
	m, ok := ix.bi.Mapping().(*mapping.IndexMappingImpl)
	if !ok || m.ScoringModel != "bm25" {
		t.Fatalf("mapping scoring model = %q", m.ScoringModel)
	}
}

// TestStemmingAndStopWords checks the English analyzer is in use.
func TestStemmingAndStopWords(t *testing.T) {
	ix, _ := openTiny(t)
	if got := search(t, ix, "Cats", 10); len(got) != 2 {
		t.Fatalf("'Cats' should stem to cat and match d1, d3: %v", got)
	}
	if got := search(t, ix, "the of and", 10); len(got) != 0 {
		t.Fatalf("a stop-word-only query matched: %v", got)
	}
}

func TestQueryTextIsNotSyntax(t *testing.T) {
	ix, _ := openTiny(t)
	for _, q := range []string{"title:cat", "+dog -cat", `"dog`, "cat AND (bird", "*", "dog^2 ~", "/re/", "", "   "} {
		if _, err := ix.Search(context.Background(), q, 5); err != nil {
			t.Errorf("query %q: %v", q, err)
		}
	}
	// "-cat" is not a negation: d1 and d3 still match "cat".
	if got := search(t, ix, "-cat", 10); len(got) != 2 {
		t.Fatalf("-cat = %v", got)
	}
	if hits, _ := ix.Search(context.Background(), "dog", 0); len(hits) != 0 {
		t.Fatal("k=0 returned hits")
	}
	if hits, _ := ix.Search(context.Background(), "dog", 1); len(hits) != 1 || hits[0].ID != "d2" {
		t.Fatalf("k=1: %v", hits)
	}
}

// TestUpsertDeleteKeepStats changes docs and checks scores equal those of a
// fresh index holding the same final docs: the field-length totals must
// follow every upsert and delete exactly.
func TestUpsertDeleteKeepStats(t *testing.T) {
	ix, dir := openTiny(t)
	ctx := context.Background()
	// d1 grows, d2 is deleted, d4 is added twice in one batch (last wins).
	err := ix.Index(ctx, []storage.Doc{
		{ID: "d1", Title: "cat cat", Text: "dog dog dog fish bird eel"},
		{ID: "d4", Text: "ignored"},
		{ID: "d4", Title: "eel", Text: "dog eel"},
	}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, []string{"d2", "nope", "d2"}, 9); err != nil {
		t.Fatal(err)
	}
	if n, _ := ix.Count(); n != 3 {
		t.Fatalf("count = %d, want 3", n)
	}
	if s, _ := ix.AppliedSeq(); s != 9 {
		t.Fatalf("applied seq = %d", s)
	}

	fresh, err := Open(filepath.Join(t.TempDir(), "fresh"), Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	err = fresh.Index(ctx, []storage.Doc{
		{ID: "d1", Title: "cat cat", Text: "dog dog dog fish bird eel"},
		tiny[2],
		{ID: "d4", Title: "eel", Text: "dog eel"},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"dog", "cat bird", "eel fish", "ignored"} {
		wantScores(t, search(t, ix, q, 10), search(t, fresh, q, 10))
	}

	// Reopen: content, seq and stats persist.
	before := search(t, ix, "dog eel", 10)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix2, err := Open(dir, Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	if s, _ := ix2.AppliedSeq(); s != 9 {
		t.Fatalf("applied seq after reopen = %d", s)
	}
	wantScores(t, search(t, ix2, "dog eel", 10), before)
}

func TestBadInputAndCancel(t *testing.T) {
	ix, _ := openTiny(t)
	err := ix.Index(context.Background(), []storage.Doc{{ID: "ok"}, {ID: "", Title: "x"}}, 4)
	if err == nil || !strings.Contains(err.Error(), "doc 1 has an empty ID") {
		t.Fatalf("empty id: %v", err)
	}
	if err := ix.Delete(context.Background(), []string{"d1", ""}, 4); err == nil || !strings.Contains(err.Error(), "id 1 is empty") {
		t.Fatalf("empty id in delete: %v", err)
	}
	if s, _ := ix.AppliedSeq(); s != 3 {
		t.Fatalf("a refused batch moved applied seq to %d", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ix.Index(ctx, tiny, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled index: %v", err)
	}
	if _, err := ix.Search(ctx, "dog", 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled search: %v", err)
	}
	empty, err := Open(filepath.Join(t.TempDir(), "empty"), Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if hits, err := empty.Search(context.Background(), "dog", 3); err != nil || len(hits) != 0 {
		t.Fatalf("empty index: %v %v", hits, err)
	}
	if s, _ := empty.AppliedSeq(); s != 0 {
		t.Fatalf("new index applied seq = %d", s)
	}
}

// TestTiesByID: equal scores come back in ID order, also across the k cut.
func TestTiesByID(t *testing.T) {
	ix, err := Open(filepath.Join(t.TempDir(), "ties"), Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var docs []storage.Doc
	for _, id := range []string{"e", "b", "d", "a", "c"} {
		docs = append(docs, storage.Doc{ID: id, Text: "same words"})
	}
	if err := ix.Index(context.Background(), docs, 1); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search(context.Background(), "words", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 3 || hits[0].ID != "a" || hits[1].ID != "b" || hits[2].ID != "c" {
		t.Fatalf("ties: %v", hits)
	}
}

// TestConcurrentSearchWhileIndexing runs searches, filtered or not, while
// batches are applied (run with -race to check the locking).
func TestConcurrentSearchWhileIndexing(t *testing.T) {
	ix, _ := openTiny(t)
	ctx := context.Background()
	done := make(chan error)
	go func() {
		for i := 0; i < 20; i++ {
			d := storage.Doc{ID: "n" + strings.Repeat("x", i), Text: "dog fish " + strings.Repeat("eel ", i), Meta: map[string]string{"n": strconv.Itoa(i)}}
			if err := ix.Index(ctx, []storage.Doc{d}, uint64(10+i)); err != nil {
				done <- err
				return
			}
		}
		done <- ix.Delete(ctx, []string{"d1"}, 99)
	}()
	for i := 0; i < 50; i++ {
		if _, err := ix.Search(ctx, "dog eel", 5); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.SearchFilter(ctx, "dog eel", 5, filter.Prefix("n", "1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := ix.Count(); n != 22 {
		t.Fatalf("count = %d, want 22", n)
	}
	if s, _ := ix.AppliedSeq(); s != 99 {
		t.Fatalf("applied seq = %d", s)
	}
	if n, _ := ix.CountMatching(ctx, filter.Prefix("n", "1")); n != 11 { // 1, 10-19
		t.Fatalf("count matching = %d, want 11", n)
	}
}
