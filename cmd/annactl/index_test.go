package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

func TestIndexMalformedLineKeepsEarlierLines(t *testing.T) {
	needModel(t)
	ctx := context.Background()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "corpus.jsonl")
	lines := []string{
		`{"_id":"a","title":"A","text":"apples are red"}`,
		`{"_id":"b","text":"bananas are yellow"}`,
		`{"_id":"a","text":"apples are green"}`, // duplicate id: the last wins
		`{"_id":"c","text": broken`,
		`{"_id":"d","text":"dates are brown"}`,
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "idx")
	var stderr strings.Builder
	if code := run(ctx, []string{"index", "--index", dir, "--batch", "1", file}, strings.NewReader(""), io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "corpus.jsonl:4") {
		t.Fatalf("want exit 1 and an error naming corpus.jsonl:4, got %d: %s", code, stderr.String())
	}
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := eng.Stats()
	got, _ := eng.Get(ctx, "a")
	d := got[0]
	eng.Close()
	if st.Documents != 2 || d.Text != "apples are green" {
		t.Fatalf("after the bad line: %d docs (want a, b kept), a=%q", st.Documents, d.Text)
	}
	// --skip-bad goes on past it; unchanged docs are not re-embedded.
	if code := run(ctx, []string{"index", "--index", dir, "--skip-bad", file}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	eng, err = engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if st, _ := eng.Stats(); st.Documents != 3 {
		t.Fatalf("with --skip-bad: %d docs, want 3", st.Documents)
	}
	res, err := eng.Search(ctx, "dates", engine.SearchOptions{Mode: engine.ModeLexical, K: 1})
	if err != nil || len(res) != 1 || res[0].ID != "d" {
		t.Fatalf("search after resume: %v %v", res, err)
	}
}
