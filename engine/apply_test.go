package engine_test

import (
	"context"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// TestApplyReusesVectors: a document whose metadata alone changed, or
// moved to another ID with the same title and text, keeps its vectors
// (nothing embedded); the move and the removal are one commit; a changed
// text is embedded.
func TestApplyReusesVectors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	enc := &encodertest.Counting{Hashing: hashEnc("fp-a")}
	e, err := engine.Open(ctx, dir, engine.Options{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := engine.Document{ID: "a.md", Title: "Wicks", Text: "trim the wick every four hours", Meta: map[string]string{"path": "a.md", "mtime": "1"}}
	b := engine.Document{ID: "b.md", Title: "Fog", Text: "two blasts every sixty seconds", Meta: map[string]string{"path": "b.md"}}
	if _, err := e.Add(ctx, []engine.Document{a, b}); err != nil {
		t.Fatal(err)
	}
	before := enc.Embedded()
	a.Meta = map[string]string{"path": "a.md", "mtime": "2"}
	res, err := e.Apply(ctx, []engine.Document{a}, nil)
	if err != nil || res.Updated != 1 || res.Reused != 1 || enc.Embedded() != before {
		t.Fatalf("metadata change: %+v, %v, %d texts embedded", res, err, enc.Embedded()-before)
	}
	moved := b
	moved.ID, moved.Meta = "sub/b.md", map[string]string{"path": "sub/b.md"}
	res, err = e.Apply(ctx, []engine.Document{moved}, []string{"b.md", "never-there"})
	if err != nil || res.Added != 1 || res.Reused != 1 || res.Deleted != 1 || enc.Embedded() != before {
		t.Fatalf("move: %+v, %v, %d texts embedded", res, err, enc.Embedded()-before)
	}
	if got, _ := e.Get(ctx, "b.md", "sub/b.md"); len(got) != 1 || got[0].ID != "sub/b.md" {
		t.Fatalf("after the move: %v", got)
	}
	mustFindFirst(t, e, engine.ModeDense, "two blasts every sixty seconds", "sub/b.md")
	mustFindFirst(t, e, engine.ModeLexical, "blasts", "sub/b.md")
	vs, ok, err := e.Teacher().Vectors("sub/b.md")
	if err != nil || !ok || len(vs) != 1 {
		t.Fatalf("vectors of the moved document: %v %v %v", len(vs), ok, err)
	}
	a.Text = "trim the wick every three hours"
	res, err = e.Apply(ctx, []engine.Document{a}, []string{"sub/b.md"})
	if err != nil || res.Updated != 1 || res.Reused != 0 || res.Deleted != 1 || enc.Embedded() != before+1 {
		t.Fatalf("text change: %+v, %v, %d texts embedded", res, err, enc.Embedded()-before)
	}
	if st, _ := e.Stats(); st.Documents != 1 {
		t.Fatalf("%d documents, want 1", st.Documents)
	}
	// A removal alone commits too.
	res, err = e.Apply(ctx, nil, []string{"a.md"})
	if err != nil || res.Deleted != 1 || !res.Committed {
		t.Fatalf("removal: %+v, %v", res, err)
	}
	e.Close()
	rep, err := engine.Check(ctx, dir)
	if err != nil || !rep.OK() {
		t.Fatalf("check: %v %v", rep, err)
	}
}

// TestLocation: a result of a document read from a folder says where in
// its file it lies; with lines and a snippet, the snippet's lines.
func TestLocation(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	docs := []engine.Document{
		{ID: "r.pdf#2", Title: "Report", Text: "the hyperradiant lens", Meta: map[string]string{"path": "r.pdf"}, MetaValues: map[string]engine.Value{"page": engine.NumberValue(2)}},
		{ID: "w.go#1", Text: "package engine\n\n// Add upserts\nfunc Add() {\n\treturn\n}", Meta: map[string]string{"path": "w.go", "lines": "10-15"}},
		{ID: "b.epub#3", Text: "storms at sea", Meta: map[string]string{"path": "b.epub", "section": "Chapter 2 › Storms"}},
		{ID: "plain", Text: "no file here"},
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"hyperradiant": "r.pdf:page 2", "upserts": "w.go:12-13", "storms": "b.epub § Chapter 2 › Storms", "file": ""} {
		rs, err := e.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeLexical, K: 1, Snippets: true, SnippetSize: 10})
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s: %v %v", q, rs, err)
		}
		got := ""
		if rs[0].Location != nil {
			got = rs[0].Location.String()
		}
		if got != want {
			t.Errorf("%s: location %q, want %q", q, got, want)
		}
	}
}
