package adapt

import (
	"testing"

	"github.com/anna-search/anna/internal/format/flagembedding"
)

func TestCloze(t *testing.T) {
	body := "one two three four five six seven eight nine"
	for _, c := range []struct {
		name, query, pos, want string
		changed                bool
	}{
		{"title cut", "A Title Here", "A Title Here " + body, body, true},
		{"sentence inside", "the cut sentence", "start words. the cut sentence " + body, "start words. " + body, true},
		{"not verbatim", "some other query", "A Title Here " + body, "A Title Here " + body, false},
		{"too little left", "A Title Here", "A Title Here one two", "A Title Here one two", false},
		{"empty query", "", body, body, false},
	} {
		rec := flagembedding.Record{Query: c.query, Pos: []string{c.pos}, Neg: []string{c.pos}}
		if got := Cloze(&rec); got != c.changed || rec.Pos[0] != c.want || rec.Neg[0] != c.pos {
			t.Errorf("%s: changed %v, pos %q, neg %q; want %v, %q, the negative untouched", c.name, got, rec.Pos[0], rec.Neg[0], c.changed, c.want)
		}
	}
}
