package server

import (
	"testing"
)

// TestSearchLocation: a hit of a document read from a folder says where
// in its file it lies.
func TestSearchLocation(t *testing.T) {
	ts := newTestServer(t, Options{})
	docs := `{"documents": [
 {"id": "papers/report.pdf#2", "title": "Report", "text": "The hyperradiant lens was installed at Fastnet.", "metadata": {"path": "papers/report.pdf", "page": 2}},
 {"id": "notes.md#1", "text": "## Wicks\n\nTrim the wick every four hours.", "metadata": {"path": "notes.md", "lines": "12-14", "section": "Wicks"}}
]}`
	if code, m := ts.do(t, "POST", "/v1/documents", docs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	for q, want := range map[string]string{"hyperradiant lens": "papers/report.pdf:page 2", "trim the wick": "notes.md:12-14"} {
		code, m := ts.do(t, "POST", "/v1/search", `{"query": "`+q+`", "k": 1, "mode": "lexical", "snippets": true}`)
		if code != 200 {
			t.Fatalf("search: %d %v", code, m)
		}
		hits, _ := m["hits"].([]any)
		if len(hits) != 1 {
			t.Fatalf("%s: %v", q, m)
		}
		loc, _ := hits[0].(map[string]any)["location"].(map[string]any)
		if loc == nil || loc["label"] != want {
			t.Errorf("%s: location %v, want label %q", q, loc, want)
		}
	}
}
