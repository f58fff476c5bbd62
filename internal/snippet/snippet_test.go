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

// TestHighlightsApart: where the analyzer emits terms inside others (CJK's
// characters inside their bigrams, Thai's bigrams overlapping), a snippet's
// highlights are in order and none overlaps another (annactl
// search sliced the text between them and panicked on "长城在哪里").
func TestHighlightsApart(t *testing.T) {
	for _, c := range []struct{ code, text, query string }{
		{"zh", "北京是中国的首都，也是政治和文化中心。长城位于北京北部，是世界上最长的城墙。", "长城在哪里"},
		{"ja", "東京は日本の首都です。富士山は静岡県と山梨県にまたがる山です。", "富士山はどこ"},
		{"th", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย", "เมืองหลวงของไทย"},
	} {
		h, err := NewFor(c.code)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := h.Lexical(c.text, c.query, 60)
		if !ok {
			t.Fatalf("%s: no snippet", c.code)
		}
		at := s.Start
		for _, hl := range s.Highlights {
			if hl.Start < at || hl.End > s.End || hl.Start >= hl.End {
				t.Fatalf("%s: highlights %v overlap or leave the fragment %v", c.code, s.Highlights, s.Span)
			}
			at = hl.End
		}
		if len(s.Highlights) == 0 {
			t.Errorf("%s: nothing highlighted", c.code)
		}
	}
}
