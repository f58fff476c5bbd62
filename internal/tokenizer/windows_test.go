package tokenizer

import (
	"strings"
	"testing"
)

func TestWindows(t *testing.T) {
	tok := loadMiniLM(t)
	words := make([]string, 100)
	for i := range words {
		words[i] = "word"
	}
	text := strings.Join(words, " ") // 100 tokens
	_, ws := tok.Windows(text, 40, 30)
	// windows start at tokens 0, 30, 60; the third reaches the last token.
	if len(ws) != 3 || ws[0] != (Window{0, 40*5 - 1}) || ws[1].Start != 30*5 || ws[2].End != len(text) {
		t.Fatalf("windows %v", ws)
	}
	for _, w := range ws {
		if n := tok.Count(text[w.Start:w.End]); n > 40 {
			t.Errorf("window %v holds %d tokens", w, n)
		}
	}
	if _, ws := tok.Windows("short text", 40, 30); len(ws) != 1 || ws[0] != (Window{0, 10}) {
		t.Errorf("short text: %v", ws)
	}
	if _, ws := tok.Windows("  ", 40, 30); len(ws) != 0 {
		t.Errorf("blank text: %v", ws)
	}
	// Multi-byte text: windows fall on token boundaries, in bytes.
	clean, ws := tok.Windows(strings.Repeat("héllo wörld ", 30), 10, 10)
	for _, w := range ws {
		seg := clean[w.Start:w.End]
		if strings.HasPrefix(seg, " ") || !strings.HasSuffix(seg, "ld") && !strings.HasSuffix(seg, "lo") {
			t.Errorf("window %v = %q does not fall on token boundaries", w, seg)
		}
	}
	// Invalid UTF-8: the windows index the cleaned text, which is returned.
	clean, ws = tok.Windows("ok \xff bad", 40, 40)
	if clean != "ok \uFFFD bad" || len(ws) != 1 || ws[0].End != len(clean) {
		t.Errorf("invalid UTF-8: %q %v", clean, ws)
	}
}
