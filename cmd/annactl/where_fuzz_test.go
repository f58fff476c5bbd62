package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anna-search/anna/engine"
)

// FuzzParseWhere: `annactl search --where COND --where-json JSON` on any
// condition and JSON (not @FILE, which reads a file): a usage error (exit
// 2), or a valid filter that holds the condition — KEY=VALUE alone is
// And(Eq(KEY, VALUE)) — and that its JSON form reads back as the same filter.
func FuzzParseWhere(f *testing.F) {
	for _, c := range [][2]string{
		{"lang=en", ""}, {"year>=2020", `{"or": [{"lang": "en"}, {"prefix": {"path": "docs/"}}]}`},
		{"a!=b", `{"not": {"in": {"k": ["x", "y"]}}}`}, {"=v", ""}, {"k^=", `{`}, {"size<10", `{"range": {"n": {"gt": 1, "lte": 9}}}`},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, cond, js string) {
		if strings.HasPrefix(js, "@") {
			return
		}
		got, err := parseWhere([]string{cond}, js)
		if err != nil {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("--where %q --where-json %q: %v is not a usage error", cond, js, err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("--where %q --where-json %q: an invalid filter %s: %v", cond, js, got, err)
		}
		if k, op, v, ok := splitWhere(cond); ok && op == "=" && js == "" {
			if want := engine.And(engine.Eq(k, v)); got.String() != want.String() {
				t.Fatalf("--where %q: %s, want %s", cond, got, want)
			}
		}
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(out) || strings.Contains(string(out), `\ufffd`) {
			return // strings that were not UTF-8 (JSON cannot carry them)
		}
		back, err := engine.ParseFilter(out)
		if err != nil || back.String() != got.String() {
			t.Fatalf("--where %q --where-json %q: %s, as JSON %s, reads back as %s (%v)", cond, js, got, out, back, err)
		}
	})
}
