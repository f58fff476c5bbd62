package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestSearchMetadataTyped is issue #41 items 7-9 end to end. Items 7: the
// input's "metadata" and older output's "meta" both read, search --json
// prints "metadata", and its output indexes back as it was; an unknown
// top-level field is warned about once, naming FILE:LINE. 8: an array is
// a multi-valued key (tags=a matches), a number a number (year>=1960 is
// numeric, where the strings "999" and "1960" would not be), and --where
// has ranges. 9: spaces around the key and value are dropped, and a key
// no document has gets a warning. Before: "meta" and the array were
// stringified or dropped, tags=a and ' bucket = 1' matched nothing, and
// year>=1960 was read as the key "year>".
func TestSearchMetadataTyped(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := filepath.Join(tmp, "corpus.jsonl")
	lines := []string{
		`{"_id": "a", "text": "tides and the moon", "metadata": {"tags": ["a", "b"], "year": 1960, "bucket": 1}}`,
		`{"_id": "b", "text": "tides in the harbour", "metadata": {"tags": ["b"], "year": 999, "bucket": "1"}}`,
		`{"_id": "c", "text": "the moon and tides", "meta": {"tags": ["a"], "year": 2001, "bucket": 2}, "tags": ["x"]}`,
		`{"_id": "d", "text": "tides of the sea", "metadata": {"year": "1960"}, "tags": ["y"], "rank": 4}`,
	}
	os.WriteFile(corpus, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	dir := filepath.Join(tmp, "ix")
	r := mustRun(t, "index", "--index", dir, corpus)
	for _, w := range []string{
		corpus + `:3: unknown field "tags" ignored`,
		corpus + `:4: unknown field "rank" ignored`,
	} {
		if strings.Count(r.stderr, w) != 1 {
			t.Errorf("index stderr does not warn once %q:\n%s", w, r.stderr)
		}
	}
	if strings.Count(r.stderr, `unknown field "tags"`) != 1 {
		t.Errorf("the unknown field tags is warned about more than once:\n%s", r.stderr)
	}
	search := func(where ...string) ([]string, result) {
		t.Helper()
		args := []string{"search", "--json", "--index", dir, "--mode", "lexical", "-k", "10"}
		for _, w := range where {
			args = append(args, "--where", w)
		}
		r := mustRun(t, append(args, "tides")...)
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var jr jsonResult
			if line != "" {
				if err := json.Unmarshal([]byte(line), &jr); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				ids = append(ids, jr.ID)
			}
		}
		slices.Sort(ids)
		return ids, r
	}
	for _, tc := range []struct {
		where []string
		want  []string
	}{
		{[]string{"tags=a"}, []string{"a", "c"}},
		{[]string{"tags=b"}, []string{"a", "b"}},
		{[]string{"tags!=a"}, []string{"b", "d"}},
		{[]string{"tags=a", "tags=b"}, []string{"a", "b", "c"}},
		{[]string{"year>=1960"}, []string{"a", "c", "d"}}, // d's "1960" is a string: byte-wise >= "1960"
		{[]string{"year<1960"}, []string{"b"}},
		{[]string{"year>1960", "year<=2001"}, []string{"c"}},
		{[]string{"year=1960.0"}, []string{"a"}},
		{[]string{" bucket = 1"}, []string{"a", "b"}},
		{[]string{"bucket >= 2 "}, []string{"c"}},
	} {
		if got, _ := search(tc.where...); !slices.Equal(got, tc.want) {
			t.Errorf("--where %q: %v, want %v", tc.where, got, tc.want)
		}
	}
	if _, r := search("year>=1960"); strings.Contains(r.stderr, "warning") {
		t.Errorf("a known key warned about: %s", r.stderr)
	}
	got, r := search("buckt=1")
	if len(got) != 0 || !strings.Contains(r.stderr, `search: warning: no document has the metadata key "buckt"`) {
		t.Errorf("--where buckt=1: %v, stderr %q: want nothing and a warning", got, r.stderr)
	}

	// search --json prints "metadata", typed, and indexes back the same.
	out := mustRun(t, "search", "--json", "--index", dir, "--mode", "lexical", "-k", "10", "tides").stdout
	if !strings.Contains(out, `"metadata":{"bucket":1,"tags":["a","b"],"year":1960}`) || strings.Contains(out, `"meta":`) {
		t.Fatalf("search --json metadata:\n%s", out)
	}
	again := filepath.Join(tmp, "again.jsonl")
	os.WriteFile(again, []byte(out), 0o644)
	dir2 := filepath.Join(tmp, "ix2")
	mustRun(t, "index", "--index", dir2, again)
	for _, id := range []string{"a", "b", "c", "d"} {
		e1, e2 := openGet(t, dir, id), openGet(t, dir2, id)
		if !docMetaEqual(e1, e2) {
			t.Errorf("%s: indexed %v %v, re-indexed from search --json %v %v", id, e1.Meta, e1.MetaValues, e2.Meta, e2.MetaValues)
		}
	}
	// Output of the older search --json, with "meta", reads as metadata.
	old := filepath.Join(tmp, "old.jsonl")
	os.WriteFile(old, []byte(`{"rank":1,"id":"z","score":1,"text":"tides","meta":{"topic":"sea"}}`+"\n"), 0o644)
	mustRun(t, "index", "--index", dir2, old)
	if z := openGet(t, dir2, "z"); z.Meta["topic"] != "sea" {
		t.Fatalf("old output's meta: %+v", z)
	}
}

func openGet(t *testing.T, dir, id string) engine.Document {
	t.Helper()
	e, err := engine.Open(t.Context(), dir, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	docs, err := e.Get(t.Context(), id)
	if err != nil || len(docs) != 1 {
		t.Fatalf("get %s: %v %v", id, docs, err)
	}
	return docs[0]
}

func docMetaEqual(a, b engine.Document) bool {
	if len(a.Meta) != len(b.Meta) || len(a.MetaValues) != len(b.MetaValues) {
		return false
	}
	for k, v := range a.Meta {
		if w, ok := b.Meta[k]; !ok || w != v {
			return false
		}
	}
	for k, v := range a.MetaValues {
		if !v.Equal(b.MetaValues[k]) {
			return false
		}
	}
	return true
}
