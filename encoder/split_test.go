package encoder

import (
	"context"
	"strings"
	"testing"
)

// TestSplit: every passage of a long document fits the model (its tokens,
// specials and title included, stay within the window), consecutive
// windows overlap by window - stride tokens, together they cover the
// whole text, and a document that fits is one passage embedded exactly as
// before (the same vector as the whole text).
func TestSplit(t *testing.T) {
	ctx := context.Background()
	e, err := Load(ctx, testModel(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var words []string
	for i := 0; i < 700; i++ {
		words = append(words, []string{"graphs", "neighbour", "retrieval", "tokenisation", "évaluation"}[i%5])
	}
	text := strings.Join(words, " ")
	ps := e.Split("A title: ", text, 128, 64)
	if len(ps) < 8 {
		t.Fatalf("%d passages for %d words", len(ps), len(words))
	}
	tok := e.m.Tokenizer()
	for i, p := range ps {
		if n := len(tok.Encode(p.Text, 0).IDs); n > 128 {
			t.Errorf("passage %d: %d tokens with specials and title, window 128", i, n)
		}
		if !strings.HasPrefix(p.Text, "A title: ") || p.Text[len("A title: "):] != text[p.Start:p.End] {
			t.Errorf("passage %d text does not match its span", i)
		}
		if i > 0 && p.Start >= ps[i-1].End {
			t.Errorf("passages %d and %d do not overlap", i-1, i)
		}
	}
	if ps[0].Start != 0 || ps[len(ps)-1].End != len(text) {
		t.Errorf("passages cover [%d, %d) of %d bytes", ps[0].Start, ps[len(ps)-1].End, len(text))
	}
	short := e.Split("T ", "a short text", 256, 128)
	if len(short) != 1 || short[0].Text != "T a short text" {
		t.Fatalf("short document: %+v", short)
	}
	a, _ := e.EmbedDocuments(ctx, []string{short[0].Text})
	b, _ := e.EmbedDocuments(ctx, []string{"T a short text"})
	if a[0][0] != b[0][0] {
		t.Error("a document that fits embeds differently")
	}
	if len(e.Split("T ", "", 256, 128)) != 0 {
		t.Error("an empty text gave passages")
	}
}
