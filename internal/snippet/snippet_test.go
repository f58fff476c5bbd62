package snippet

import (
	"strings"
	"testing"
)

func TestLexical(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("lorem ipsum dolor sit amet consectetur ", 20)
	text := filler + "The hierarchical navigable small world graph searches vectors quickly. " + filler + "Graphs are fun."
	s, ok := h.Lexical(text, "navigable graphs for vector search", 120)
	if !ok {
		t.Fatal("no snippet")
	}
	frag := text[s.Start:s.End]
	if !strings.Contains(frag, "navigable small world graph searches vectors") {
		t.Fatalf("fragment %q is not the one with the most query terms", frag)
	}
	if len(frag) > 120+40 {
		t.Errorf("fragment of %d bytes for size 120", len(frag))
	}
	var words []string
	for _, hl := range s.Highlights {
		if hl.Start < s.Start || hl.End > s.End {
			t.Fatalf("highlight %v outside the fragment %v", hl, s.Span)
		}
		words = append(words, text[hl.Start:hl.End])
	}
	// Stems match as the BM25 index reads them: graph~graphs, searches~search, vectors~vector.
	if got := strings.Join(words, ","); got != "navigable,graph,searches,vectors" {
		t.Errorf("highlights %q", got)
	}
	if _, ok := h.Lexical(text, "zebra", 100); ok {
		t.Error("a snippet for a query with no term in the text")
	}
	if _, ok := h.Lexical(text, "the and of", 100); ok {
		t.Error("stop words highlighted")
	}
}

func TestPassage(t *testing.T) {
	h, _ := New()
	text := "First passage about cooking pasta. Second passage about vector search engines and graphs."
	start := strings.Index(text, "Second")
	s := h.Passage(text, start, len(text), "engines", 200)
	if s.Start < start || text[s.Highlights[0].Start:s.Highlights[0].End] != "engines" {
		t.Fatalf("passage snippet %+v", s)
	}
	// No query term in the passage: its beginning, cut at a word.
	s = h.Passage(text, 0, start, "zebra", 10)
	if got := text[s.Start:s.End]; got != "First passage" || len(s.Highlights) != 0 {
		t.Fatalf("passage start %q", got)
	}
	// Multi-byte text keeps UTF-8 boundaries.
	u := "Über große Straßen fahren Autos schnell und laut durch die Stadt"
	s = h.Passage(u, 0, len(u), "autos", 12)
	if !strings.Contains(u[s.Start:s.End], "Autos") {
		t.Fatalf("utf-8: %q", u[s.Start:s.End])
	}
}
