package lexical

import (
	"context"
	"math"
	"testing"

	"github.com/anna-search/anna/internal/storage"
)

// checkScoreTexts asks Search for the top k of each query and ScoreTexts
// for the same documents' fields: the scores must agree.
func checkScoreTexts(t *testing.T, ix *Index, docs map[string]Fields, queries []string, k int) int {
	t.Helper()
	ctx := context.Background()
	checked := 0
	for _, q := range queries {
		hits, err := ix.Search(ctx, q, k)
		if err != nil {
			t.Fatal(err)
		}
		fs := make([]Fields, len(hits))
		for i, h := range hits {
			fs[i] = docs[h.ID]
		}
		got, err := ix.ScoreTexts(ctx, q, fs)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hits {
			if math.Abs(got[i]-h.Score) > 1e-9*max(1, h.Score) {
				t.Fatalf("query %q, doc %s: ScoreTexts %v, Search %v", q, h.ID, got[i], h.Score)
			}
			checked++
		}
	}
	return checked
}

func TestScoreTextsMatchesSearch(t *testing.T) {
	ix, _ := openTiny(t)
	ctx := context.Background()
	// A second segment and a deleted document, so that the document
	// frequencies come from several segments and skip deleted postings.
	more := []storage.Doc{{ID: "d4", Title: "eel", Text: "eel eel cat"}, {ID: "d5", Text: "bird watching"}}
	if err := ix.Index(ctx, more, 4); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, []string{"d2"}, 5); err != nil {
		t.Fatal(err)
	}
	docs := map[string]Fields{}
	for _, d := range append(append([]storage.Doc{}, tiny...), more...) {
		docs[d.ID] = Fields{Title: d.Title, Text: d.Text, Language: d.Language}
	}
	if n := checkScoreTexts(t, ix, docs, []string{"cat", "bird eel", "dog dog fish", "cats watching birds"}, 10); n < 8 {
		t.Fatalf("only %d scores compared", n)
	}

	got, err := ix.ScoreTexts(ctx, "bird eel", []Fields{
		{Text: "nothing in common"},
		{Title: "eel", Text: "a bird"}, // not indexed: scored with the index's statistics
		{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[2] != 0 || got[1] <= 0 {
		t.Fatalf("scores %v: want 0, > 0, 0", got)
	}
	// Adding the unindexed document without changing the statistics is
	// not possible, but its score must sit with the indexed ones': a
	// document with both query terms outscores one with a single term.
	one, err := ix.ScoreTexts(ctx, "bird eel", []Fields{{Text: "a bird"}})
	if err != nil {
		t.Fatal(err)
	}
	if one[0] >= got[1] {
		t.Fatalf("one query term scores %v, both %v", one[0], got[1])
	}
	if s, err := ix.ScoreTexts(ctx, "the of", []Fields{{Text: "the of"}}); err != nil || s[0] != 0 {
		t.Fatalf("stop-word query: %v, %v", s, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ix.ScoreTexts(cctx, "cat", []Fields{{Text: "cat"}}); err == nil {
		t.Fatal("cancelled context: no error")
	}
}
