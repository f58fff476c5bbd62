package main

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// oneLineWhole is oneLine as it was: every word of the text collapsed,
// then cut.
func oneLineWhole(title, text string, n int) string {
	s := strings.Join(strings.Fields(strings.TrimSpace(title+" — "+text)), " ")
	if title == "" {
		s = strings.Join(strings.Fields(text), " ")
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// TestOneLine: the table's line for a hit without a snippet is what it
// was, and reads only the words it shows: a 20 MB text costs no more
// memory than a short one (it collapsed and copied the whole text).
func TestOneLine(t *testing.T) {
	texts := []string{"", " ", "short", "two  words\n", strings.Repeat("Größe naïve ", 20), "one " + strings.Repeat("x", 200), "\t lead and trail \n"}
	for _, title := range []string{"", "A title", "  ", "Título largo " + strings.Repeat("ü", 100)} {
		for _, text := range texts {
			for _, n := range []int{1, 2, 5, 20, 90} {
				if got, want := oneLine(title, text, n), oneLineWhole(title, text, n); got != want {
					t.Fatalf("oneLine(%q, %q, %d) = %q, want %q", title, text, n, got, want)
				}
			}
		}
	}
	huge := strings.Repeat("vortex shock wave ", 20<<20/18)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := oneLine("big", huge, 90)
	runtime.ReadMemStats(&after)
	if want := oneLineWhole("big", huge[:1000], 90); got != want {
		t.Fatalf("huge: %q, want %q", got, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("oneLine of a 20 MB text allocated %d bytes", alloc)
	}
}
