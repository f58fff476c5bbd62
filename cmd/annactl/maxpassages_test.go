package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMaxPassages: --max-passages is checked, and a document split into
// more passages is embedded by its first ones, named on stderr, while the
// rest of the batch is indexed.
func TestMaxPassages(t *testing.T) {
	dir := t.TempDir()
	var long strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&long, "word%d ", i)
	}
	var in bytes.Buffer
	for _, d := range []map[string]string{{"_id": "long", "title": "Long", "text": long.String()}, {"_id": "short", "text": "a short note"}} {
		line, _ := json.Marshal(d)
		in.Write(append(line, '\n'))
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(corpus, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "idx")
	for _, bad := range []string{"0", "-1"} {
		if r := annactl(t, "", "index", "--index", idx, "--max-passages", bad, corpus); r.code != 2 || !strings.Contains(r.stderr, "max-passages") {
			t.Fatalf("--max-passages %s: %s, want a usage error naming it", bad, r)
		}
	}
	r := mustRun(t, "index", "--index", idx, "--max-passages", "3", corpus)
	if !strings.Contains(r.stderr, `document "long" is longer than 3 passages`) || !strings.Contains(r.stderr, "2 added") {
		t.Fatalf("index --max-passages 3: %s", r)
	}
	if st, _ := statsOf(t, idx); st.DenseDocs != 2 || st.DensePassages != 4 {
		t.Fatalf("stats: %d documents, %d passages; want 2 and 3+1", st.DenseDocs, st.DensePassages)
	}
}

// TestProgressPassages: the progress line counts the passages of the batch
// being embedded after its documents, once it is shown.
func TestProgressPassages(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, label: "indexing x", start: time.Now(), on: true}
	pp := passageProgress{print: func(f string, args ...any) { fmt.Fprintf(&buf, f+"\n", args...) }}
	pp.report(10, 20) // no line yet: nothing
	pp.logf("opened")
	pp.show(p)
	p.update(256, "docs")
	pp.report(2048, 2048)
	if got := buf.String(); !strings.HasPrefix(got, "opened\n\r\033[Kindexing x: 256 ") || !strings.HasSuffix(got, "docs (embedding: 2048/2048 passages)") {
		t.Fatalf("progress line %q", got)
	}
	// A message while the line shows: on a line of its own, the line again
	// below it.
	buf.Reset()
	pp.logf("document %q is long", "d")
	if got := buf.String(); !strings.HasPrefix(got, "\r\033[Kdocument \"d\" is long\n\r\033[Kindexing x: 256") {
		t.Fatalf("message %q", got)
	}
}
