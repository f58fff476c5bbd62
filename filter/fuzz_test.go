package filter_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/anna-search/anna/filter"
)

// FuzzParse: on any input Parse either fails with a *filter.Error or
// returns a valid filter that MarshalJSON writes back in a form Parse
// reads as the same filter (when its strings are UTF-8, which JSON
// requires), and String, MatchValues and Keys do not panic on it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"lang": "en", "year": "2001"}`,
		`{"and": [{"eq": {"k": "v"}}, {"not": {"in": {"k": ["a", "b"]}}}]}`,
		`{"or": [{"prefix": {"path": "docs/"}}, {"k": "a\u0000b"}]}`,
		`{"in": {"k": []}}`, `{"eq": {"": "v"}}`, `{"k": 1}`, `[`, `{"a": "1", "a": "2"}`,
		`{"range": {"year": {"gte": 1960, "lt": "1970"}}}`, `{"gt": {"k": "a"}, "lte": {"n": -2.5e1}}`,
		`{"range": {"k": {"gt": "1", "gte": "2"}}}`, `{"gt": "x"}`, `{"in": {"n": [1, true, "x"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := filter.Parse(data)
		if err != nil {
			var fe *filter.Error
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Path, "$") {
				t.Fatalf("Parse(%q): error %v is not a *filter.Error with a path", data, err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("Parse(%q) returned an invalid filter %s: %v", data, g, err)
		}
		_ = g.String()
		_ = g.MatchValues(map[string]string{"k": "v", "lang": "en"},
			map[string]filter.Value{"n": filter.NumberValue(-25), "tags": filter.StringsValue("a", "x")})
		_ = g.Keys()
		out, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), `\ufffd`) {
			return // a string that was not UTF-8 (or held U+FFFD)
		}
		h, err := filter.Parse(out)
		if err != nil || !reflect.DeepEqual(g, h) {
			t.Fatalf("Parse(%q) = %s, marshalled as %s, parsed back as %s (%v)", data, g, out, h, err)
		}
	})
}
