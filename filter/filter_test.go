package filter_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/filtertest"
)

// TestEvalMatchesMatch is the property test: over random metadata and
// random filter trees, Eval over brute-force posting lists (which also
// hold deleted documents) returns exactly the live documents Match
// accepts, and modifies none of the bitmaps it was given.
func TestEvalMatchesMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		p := &filtertest.Postings{Live: roaring.New()}
		for i := range 50 + rng.IntN(300) {
			p.Docs = append(p.Docs, filtertest.Doc{Meta: filtertest.Meta(rng), Values: filtertest.MetaValues(rng)})
			if rng.IntN(5) > 0 {
				p.Live.Add(uint32(i))
			}
		}
		if round == 0 {
			p.Live.Clear() // an index with no live document
		}
		for range 300 {
			f := filtertest.Random(rng, 1+rng.IntN(4))
			want := roaring.New()
			for _, d := range p.Live.ToArray() {
				if f.MatchValues(p.Docs[d].Meta, p.Docs[d].Values) {
					want.Add(d)
				}
			}
			got := f.Eval(p)
			if !got.Equals(want) {
				t.Fatalf("round %d: %s: Eval = %v, Match gives %v", round, f, got.ToArray(), want.ToArray())
			}
			if !p.Unchanged() {
				t.Fatalf("round %d: %s: Eval modified a bitmap Postings returned", round, f)
			}
			got.Add(1 << 30) // the result is the caller's own
			if !p.Unchanged() {
				t.Fatalf("round %d: %s: Eval returned a bitmap Postings owns", round, f)
			}
		}
	}
}

func TestMatchSemantics(t *testing.T) {
	meta := map[string]string{"lang": "en", "empty": "", "path": "docs/a"}
	for _, tc := range []struct {
		f    filter.Filter
		want bool
	}{
		{filter.Filter{}, true},
		{filter.And(), true},
		{filter.Or(), false},
		{filter.Eq("lang", "en"), true},
		{filter.Eq("lang", "EN"), false},
		{filter.Eq("missing", ""), false}, // a missing key equals nothing
		{filter.Not(filter.Eq("missing", "")), true},
		{filter.Eq("empty", ""), true},
		{filter.In("lang", "de", "en"), true},
		{filter.In("lang"), false},
		{filter.In("missing", ""), false},
		{filter.Prefix("path", "docs/"), true},
		{filter.Prefix("path", ""), true},
		{filter.Prefix("missing", ""), false},
		{filter.Prefix("path", "docs/ab"), false},
		{filter.And(filter.Eq("lang", "en"), filter.Prefix("path", "doc")), true},
		{filter.And(filter.Eq("lang", "en"), filter.Prefix("path", "x")), false},
		{filter.Or(filter.Eq("lang", "de"), filter.Prefix("path", "doc")), true},
		{filter.Not(filter.Filter{}), false},
	} {
		if got := tc.f.Match(meta); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.f, got, tc.want)
		}
	}
	// nil metadata has no keys.
	if filter.Eq("k", "").Match(nil) || !filter.Not(filter.Eq("k", "")).Match(nil) || !(filter.Filter{}).Match(nil) {
		t.Error("nil metadata")
	}
}

// TestMatchValues: lists match when any element does, numbers compare
// numerically with values that read as numbers, strings byte-wise, and
// ranges pick the comparison by the value's kind (issue #41 items 8).
func TestMatchValues(t *testing.T) {
	meta := map[string]string{"lang": "en", "date": "2024-05-01", "syear": "1999"}
	values := map[string]filter.Value{
		"tags":  filter.StringsValue("a", "b"),
		"year":  filter.NumberValue(1960),
		"mixed": filter.ListValue(filter.NumberValue(9), filter.StringValue("10")),
		"none":  filter.ListValue(),
		"neg":   filter.NumberValue(-2.5),
	}
	for _, tc := range []struct {
		f    filter.Filter
		want bool
	}{
		{filter.Eq("tags", "a"), true},
		{filter.Eq("tags", "b"), true},
		{filter.Eq("tags", `["a","b"]`), false},
		{filter.Not(filter.Eq("tags", "a")), false},
		{filter.Not(filter.Eq("tags", "c")), true},
		{filter.In("tags", "c", "b"), true},
		{filter.Prefix("tags", "a"), true},
		{filter.And(filter.Eq("tags", "a"), filter.Eq("tags", "b")), true},
		{filter.Eq("year", "1960"), true},
		{filter.Eq("year", "1960.0"), true},
		{filter.Eq("year", "1.96e3"), true},
		{filter.Eq("year", "196"), false},
		{filter.Prefix("year", "19"), false}, // prefix reads strings only
		{filter.Gte("year", "1960"), true},
		{filter.Gt("year", "1960"), false},
		{filter.Lt("year", "1960"), false},
		{filter.Lte("year", "1960"), true},
		{filter.Gte("year", "200"), true}, // numerically, where the string "1960" < "200"
		{filter.Range("year", "1950", "1970"), true},
		{filter.Range("year", "1960", "1960"), false},
		{filter.Range("year", "1961", "1970"), false},
		{filter.Gte("year", "abc"), false}, // a bound that is no number matches no number
		{filter.Lt("neg", "-2"), true},
		{filter.Lt("neg", "-3"), false},
		{filter.Gte("syear", "200"), false}, // a string compares byte-wise: "1999" < "200"
		{filter.Lt("syear", "200"), true},
		{filter.Eq("syear", "1999.0"), false}, // a string is no number
		{filter.Range("date", "2024-05", "2024-06"), true},
		{filter.Range("date", "2024-01-01", "2024-05-01"), false},
		{filter.Lte("date", "2024-05-01"), true},
		{filter.Gt("mixed", "9"), false}, // neither 9 > 9 nor "10" > "9" (byte-wise)
		{filter.Gte("mixed", "10"), true},
		{filter.Eq("mixed", "9"), true},
		{filter.Eq("mixed", "10"), true},
		{filter.Eq("none", ""), false},
		{filter.Not(filter.Gte("none", "")), true},
		{filter.Lt("lang", ""), false},
		{filter.Gte("lang", ""), true},
		{filter.Eq("missing", "1"), false},
	} {
		if got := tc.f.MatchValues(meta, values); got != tc.want {
			t.Errorf("%s: MatchValues = %v, want %v", tc.f, got, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	f := filter.And(filter.Eq("b", "1"), filter.Not(filter.Or(filter.Gte("a", "1"), filter.Prefix("b", ""))), filter.Filter{})
	if got := f.Keys(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Keys = %q", got)
	}
	if got := (filter.Filter{}).Keys(); len(got) != 0 {
		t.Fatalf("Keys of the zero Filter = %q", got)
	}
}

func TestConstructorsCopy(t *testing.T) {
	vals := []string{"a", "b"}
	f := filter.In("k", vals...)
	subs := []filter.Filter{filter.Eq("k", "a")}
	g := filter.Or(subs...)
	vals[0], subs[0] = "z", filter.Eq("k", "z")
	if !f.Match(map[string]string{"k": "a"}) || !g.Match(map[string]string{"k": "a"}) {
		t.Fatal("a constructor kept its caller's slice")
	}
}

func TestString(t *testing.T) {
	f := filter.And(
		filter.Eq("lang", "en"),
		filter.Not(filter.In("year", "1999", "2000")),
		filter.Or(filter.Prefix("my key", "a\x00"), filter.Filter{}),
		filter.Or(),
		filter.Gte("year", "1960"),
		filter.Range("d", "a", "b"),
	)
	want := `(lang = "en" and not year in ["1999", "2000"] and ("my key" prefix "a\x00" or all) and none and year >= "1960" and ("a" <= d < "b"))`
	if got := f.String(); got != want {
		t.Fatalf("String = %s\nwant       %s", got, want)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		f    filter.Filter
		want string // "" for valid
	}{
		{filter.Filter{}, ""},
		{filter.And(), ""},
		{filter.Not(filter.Filter{}), ""},
		{filter.Eq("k", ""), ""},
		{filter.Eq("k", "a\x00b"), ""},
		{filter.Eq("", "v"), "filter $.eq: empty key"},
		{filter.Prefix("a\x00b", "v"), `filter $.prefix: key "a\x00b" contains the separator NUL (\x00), which ends the key in indexed metadata terms`},
		{filter.In("color"), "filter $.in.color: in with no values"},
		{filter.In("my color"), `filter $.in["my color"]: in with no values`},
		{filter.Or(), "filter $.or: or with no filters"},
		{filter.And(filter.Eq("a", "b"), filter.Not(filter.Or(filter.Eq("a", "b"), filter.In("c")))), "filter $.and[1].not.or[1].in.c: in with no values"},
	} {
		err := tc.f.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.f, err)
			}
			continue
		}
		var fe *filter.Error
		if err == nil || err.Error() != tc.want || !errors.As(err, &fe) {
			t.Errorf("%s: Validate = %v, want %s", tc.f, err, tc.want)
		}
	}
}

// TestJSONRoundTrip: Parse(MarshalJSON(f)) rebuilds every random valid
// filter exactly (those whose strings are valid UTF-8, which JSON can
// carry), and marshalling again gives the same bytes.
func TestJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for range 3000 {
		f := filtertest.Random(rng, 1+rng.IntN(4))
		if err := f.Validate(); err != nil {
			t.Fatalf("filtertest.Random made an invalid filter %s: %v", f, err)
		}
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `\ufffd`) {
			continue // a string that was not UTF-8
		}
		checked++
		g, err := filter.Parse(data)
		if err != nil {
			t.Fatalf("%s: Parse(%s): %v", f, data, err)
		}
		if !reflect.DeepEqual(f, g) {
			t.Fatalf("%s: marshalled as %s, parsed back as %s", f, data, g)
		}
		again, _ := json.Marshal(g)
		if string(again) != string(data) {
			t.Fatalf("%s marshals as %s, then as %s", f, data, again)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d filters checked", checked)
	}
}

func TestParseForms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `all`},
		{`null`, `all`},
		{` {"and": []} `, `all`},
		{`{"eq": {"lang": "en"}}`, `lang = "en"`},
		{`{"lang": "en"}`, `lang = "en"`},
		{`{"lang": "en", "year": "2001"}`, `(lang = "en" and year = "2001")`},
		{`{"year": "2001", "lang": "en"}`, `(year = "2001" and lang = "en")`},
		{`{"eq": {"and": "x"}}`, `and = "x"`},
		{`{"eq": {"a": "1", "b": "2"}}`, `(a = "1" and b = "2")`},
		{`{"in": {"k": ["a", "b"]}}`, `k in ["a", "b"]`},
		{`{"prefix": {"path": "docs/"}}`, `path prefix "docs/"`},
		{`{"lang": "en", "or": [{"year": "1"}, {"not": {"year": "2"}}]}`, `(lang = "en" and (year = "1" or not year = "2"))`},
		{`{"not": {}}`, `not all`},
		{`{"and": [{"k": "a"}]}`, `(k = "a")`},
		{`{"eq": {"k": "a\u0000b<>&"}}`, `k = "a\x00b<>&"`},
		{`{"year": 1960, "flag": true}`, `(year = "1960" and flag = "true")`},
		{`{"in": {"year": [1960, "1961", 1.962e3]}}`, `year in ["1960", "1961", "1.962e3"]`},
		{`{"gte": {"year": 1960}}`, `year >= "1960"`},
		{`{"gt": {"year": "1960"}, "lte": {"date": "2024-12-31"}}`, `(year > "1960" and date <= "2024-12-31")`},
		{`{"lt": {"a": "1", "b": "2"}}`, `(a < "1" and b < "2")`},
		{`{"range": {"year": {"gte": 1960, "lt": 1970}}}`, `("1960" <= year < "1970")`},
		{`{"range": {"year": {"lt": 1970, "gt": "1960"}}}`, `("1960" < year < "1970")`},
		{`{"range": {"d": {"lte": "b", "gte": "a"}}}`, `("a" <= d <= "b")`},
		{`{"range": {"year": {"gte": 1960}}}`, `year >= "1960"`},
		{`{"gt": "x", "range": "y"}`, `(gt = "x" and range = "y")`}, // shorthand keys named like the newer operators
	} {
		f, err := filter.Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.in, err)
			continue
		}
		if got := f.String(); got != tc.want {
			t.Errorf("Parse(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// The shorthand means exactly the explicit form.
	a, _ := filter.Parse([]byte(`{"a": "1", "b": "2"}`))
	b := filter.And(filter.Eq("a", "1"), filter.Eq("b", "2"))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("shorthand %s != %s", a, b)
	}
	// A range object with one bound is that one-sided filter.
	c, _ := filter.Parse([]byte(`{"range": {"y": {"gt": "1"}}}`))
	if !reflect.DeepEqual(c, filter.Gt("y", "1")) {
		t.Fatalf("one-bound range %s != %s", c, filter.Gt("y", "1"))
	}
	d, _ := filter.Parse([]byte(`{"range": {"y": {"gte": "1", "lt": "2"}}}`))
	if !reflect.DeepEqual(d, filter.Range("y", "1", "2")) {
		t.Fatalf("range %s != %s", d, filter.Range("y", "1", "2"))
	}
	// Ranges marshal as one-sided operators, or range with two bounds.
	data, _ := json.Marshal(filter.And(filter.Gt("a", "1"), filter.Lte("b", "x"), filter.Range("c", "1", "2")))
	if want := `{"and":[{"gt":{"a":"1"}},{"lte":{"b":"x"}},{"range":{"c":{"gte":"1","lt":"2"}}}]}`; string(data) != want {
		t.Fatalf("MarshalJSON = %s\nwant          %s", data, want)
	}
	// MarshalJSON writes the explicit form.
	data, _ = json.Marshal(filter.And(filter.Eq("k", "<a\x00>"), filter.Not(filter.In("y", "1")), filter.Prefix("p", "q"), filter.Filter{}))
	if want := `{"and":[{"eq":{"k":"\u003ca\u0000\u003e"}},{"not":{"in":{"y":["1"]}}},{"prefix":{"p":"q"}},{}]}`; string(data) != want {
		t.Fatalf("MarshalJSON = %s\nwant          %s", data, want)
	}
	// A Filter field of a JSON document.
	var req struct {
		Query  string        `json:"query"`
		Filter filter.Filter `json:"filter"`
	}
	if err := json.Unmarshal([]byte(`{"query": "q", "filter": {"lang": "en"}}`), &req); err != nil || req.Filter.String() != `lang = "en"` {
		t.Fatalf("unmarshal into a struct: %v %s", err, req.Filter)
	}
	err := json.Unmarshal([]byte(`{"filter": {"in": {"k": []}}}`), &req)
	var fe *filter.Error
	if !errors.As(err, &fe) || fe.Path != "$.in.k" {
		t.Fatalf("unmarshal error %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `filter $: unexpected end of JSON`},
		{`{"eq": {"k": "v"}} x`, `filter $: data after the filter`},
		{`{"eq": {"k": "v"}`, `filter $: unexpected end of JSON`},
		{`{"eq": {"k": tru}}`, `filter $.eq.k: invalid JSON at byte`},
		{`[]`, `filter $: want a filter object, got an array`},
		{`"x"`, `filter $: want a filter object, got a string`},
		{`{"k": ["a"]}`, `filter $.k: want a string (shorthand for {"eq": {"k": "..."}}), got an array`},
		{`{"": "v"}`, `filter $[""]: empty key`},
		{`{"a\u0000b": "v"}`, `filter $["a\x00b"]: key "a\x00b" contains the separator NUL`},
		{`{"k": "a", "k": "b"}`, `filter $: duplicate member "k"`},
		{`{"eq": "v"}`, `filter $.eq: want an object {"key": "value"}, got a string`},
		{`{"eq": {}}`, `filter $.eq: eq with no key`},
		{`{"eq": {"": "v"}}`, `filter $.eq[""]: empty key`},
		{`{"eq": {"k": null}}`, `filter $.eq.k: want a string, got null`},
		{`{"prefix": {"k": {}}}`, `filter $.prefix.k: want a string, got an object`},
		{`{"gte": {"k": ["1"]}}`, `filter $.gte.k: want a string, got an array`},
		{`{"range": {"k": {}}}`, `filter $.range.k: range with no bound`},
		{`{"range": {"k": "1"}}`, `filter $.range.k: want an object of bounds`},
		{`{"range": ["k"]}`, `filter $.range: want a string (shorthand for {"eq": {"range": "..."}}), got an array`},
		{`{"range": {"k": {"gt": "1", "gte": "2"}}}`, `filter $.range.k.gte: a second lower bound`},
		{`{"range": {"k": {"lt": "1", "lte": "2"}}}`, `filter $.range.k.lte: a second upper bound`},
		{`{"range": {"k": {"from": "1"}}}`, `filter $.range.k.from: unknown bound "from" (want gt, gte, lt or lte)`},
		{`{"range": {"": {"gt": "1"}}}`, `filter $.range[""]: empty key`},
		{`{"in": ["a"]}`, `filter $.in: want an object {"key": ["value", ...]}, got an array`},
		{`{"in": {"k": "a"}}`, `filter $.in.k: want an array of strings, got a string`},
		{`{"in": {"k": []}}`, `filter $.in.k: in with no values`},
		{`{"in": {"my k": ["a", null]}}`, `filter $.in["my k"][1]: want a string, got null`},
		{`{"and": {}}`, `filter $.and: want an array of filters, got an object`},
		{`{"or": []}`, `filter $.or: or with no filters`},
		{`{"or": [{"a": "b"}, "c"]}`, `filter $.or[1]: want a filter object, got a string`},
		{`{"and": [{"not": {"or": [{"in": {"k": []}}]}}]}`, `filter $.and[0].not.or[0].in.k: in with no values`},
		{`{"not": null}`, `filter $.not: want a filter object, got null`},
		{`{"and": [{}, {"x": {"y": "z"}}]}`, `filter $.and[1].x: want a string`},
	} {
		_, err := filter.Parse([]byte(tc.in))
		var fe *filter.Error
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.As(err, &fe) {
			t.Errorf("Parse(%s) = %v, want %s", tc.in, err, tc.want)
		}
	}
}
