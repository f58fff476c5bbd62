package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// TestDeleteCommand: IDs from the arguments and --ids-file are removed from
// the store and both indexes; unknown ones are counted and named, not an
// error; a directory that is not an index is not created.
func TestDeleteCommand(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	mustRun(t, "index", "--index", dir, writeCorpus(t, tmp, 10, 20, 1))
	ids := filepath.Join(tmp, "ids.txt")
	os.WriteFile(ids, []byte("d003\n\nd004\r\nnope2\nd001\n"), 0o644)
	r := mustRun(t, "delete", "--index", dir, "--batch", "2", "--ids-file", ids, "d001", "d002", "nope")
	if !strings.Contains(r.stderr, `deleted 4 documents from `+dir+`; 2 of the 6 IDs given are not in it ("nope", "nope2")`) {
		t.Errorf("summary: %s", r)
	}
	if st, _ := statsOf(t, dir); st.Documents != 6 {
		t.Errorf("%d documents left, want 6", st.Documents)
	}
	if !verifyDir(t, dir, 6) {
		t.Error("check after delete")
	}
	r = annactl(t, "d005\n", "delete", "--index", dir, "--ids-file", "-")
	if r.code != 0 || !strings.Contains(r.stderr, "deleted 1 document from") {
		t.Errorf("--ids-file -: %s", r)
	}
	if r := annactl(t, "", "delete", "--index", dir); r.code != 2 || !strings.Contains(r.stderr, "no IDs given") {
		t.Errorf("no IDs: %s", r)
	}
	nowhere := filepath.Join(tmp, "nowhere")
	if r := annactl(t, "", "delete", "--index", nowhere, "x"); r.code != 1 || !strings.Contains(r.stderr, "not an anna directory") {
		t.Errorf("not an index: %s", r)
	}
	if _, err := os.Stat(nowhere); err == nil {
		t.Error("delete created the directory it was to delete from")
	}
}

// TestIndexSync: --sync leaves the directory holding exactly the file's
// documents (those it lacks removed, and said how many); after a bad line
// it removes nothing.
func TestIndexSync(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	all := writeCorpus(t, tmp, 16, 20, 2) // d000..d015
	b, _ := os.ReadFile(all)
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	first := filepath.Join(tmp, "first.jsonl")
	os.WriteFile(first, []byte(strings.Join(lines[:12], "")), 0o644) // d000..d011
	mustRun(t, "index", "--index", dir, first)
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte(lines[4]+"{broken\n"), 0o644)
	if r := annactl(t, "", "index", "--index", dir, "--sync", bad); r.code != 1 || !strings.Contains(r.stderr, "--sync: nothing removed") {
		t.Errorf("sync after a bad line: %s", r)
	}
	if st, _ := statsOf(t, dir); st.Documents != 12 {
		t.Fatalf("a failed sync removed documents: %d left, want 12", st.Documents)
	}
	empty := filepath.Join(tmp, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	if r := annactl(t, "", "index", "--index", dir, "--sync", empty); r.code != 1 || !strings.Contains(r.stderr, "refusing to empty the directory") {
		t.Errorf("sync to an empty file: %s", r)
	}
	last := filepath.Join(tmp, "last.jsonl")
	os.WriteFile(last, []byte(strings.Join(lines[4:], "")), 0o644) // d004..d015
	r := mustRun(t, "index", "--index", dir, "--sync", "--batch", "3", last)
	if !strings.Contains(r.stderr, "4 added") || !strings.Contains(r.stderr, "synced: removed 4 documents that "+last+" does not hold; "+dir+" holds exactly its 12 documents") {
		t.Errorf("summary: %s", r)
	}
	got := storeDocs(t, dir)
	for i, l := range lines {
		var d struct {
			ID string `json:"_id"`
		}
		json.Unmarshal([]byte(l), &d)
		if _, ok := got[d.ID]; ok != (i >= 4) {
			t.Errorf("%s stored: %v, want %v", d.ID, ok, i >= 4)
		}
	}
	if !verifyDir(t, dir, 12) {
		t.Error("check after sync")
	}
}

// TestIndexInvalidUTF8: lines whose bytes are not UTF-8 are stored with
// U+FFFD, counted and named by FILE:LINE in the summary.
func TestIndexInvalidUTF8(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	file := filepath.Join(tmp, "latin1.jsonl")
	os.WriteFile(file, []byte(`{"_id":"a","text":"plain text"}`+"\n"+
		"{\"_id\":\"b\",\"text\":\"caf\xe9 au lait\"}\n"+
		`{"_id":"c","text":"naïve but valid"}`+"\n"+
		"{\"_id\":\"d\",\"title\":\"\xff\",\"text\":\"x\"}"), 0o644)
	r := mustRun(t, "index", "--index", filepath.Join(tmp, "idx"), file)
	if !strings.Contains(r.stderr, "invalid UTF-8, stored as U+FFFD: 2 documents ("+file+":2, "+file+":4)") {
		t.Errorf("summary: %s", r)
	}
}

// TestUTF8Lines: the line check sees a rune cut by a read as whole, and
// an invalid byte on the right line, whatever the reads' sizes.
func TestUTF8Lines(t *testing.T) {
	in := "é ok\n\xe9\nfine ü\n\n€€\nend \xc3"
	for _, r := range []func(string) *utf8Lines{
		func(s string) *utf8Lines { return &utf8Lines{r: strings.NewReader(s)} },
		func(s string) *utf8Lines { return &utf8Lines{r: iotest.OneByteReader(strings.NewReader(s))} },
	} {
		u := r(in)
		var out bytes.Buffer
		if _, err := out.ReadFrom(u); err != nil || out.String() != in {
			t.Fatalf("passed through %q, %v", out.String(), err)
		}
		var bad []int
		for line := 1; line <= 6; line++ {
			if u.invalid(line) {
				bad = append(bad, line)
			}
		}
		if len(bad) != 2 || bad[0] != 2 || bad[1] != 6 {
			t.Errorf("invalid lines %v, want [2 6]", bad)
		}
	}
}

// TestUnknownCommandSuggests: a misspelt command is named as such, with the
// nearest command, even when flags follow it.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, args := range [][]string{{"serach", "--index", "idx", "foo"}, {"serach", "foo"}, {"indx"}} {
		r := annactl(t, "", args...)
		want := `annactl: unknown command "` + args[0] + `"; did you mean "`
		if r.code != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "unknown flag") {
			t.Errorf("%q: %s", args, r)
		}
	}
	if r := annactl(t, "", "xyzzy"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "xyzzy"`) || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("no suggestion expected: %s", r)
	}
}

// TestSearchQueryFile: a query longer than a command line may hold comes
// from --query-file (or stdin); given twice, or empty, it is a usage error.
func TestSearchQueryFile(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	mustRun(t, "index", "--index", dir, filepath.Join("..", "..", "testdata", "demo", "corpus.jsonl"))
	long := strings.Repeat("sourdough bread yeast ", 60000) // 1.3 MB
	qf := filepath.Join(tmp, "q.txt")
	os.WriteFile(qf, []byte(long+"\n"), 0o644)
	r := mustRun(t, "search", "--index", dir, "--mode", "lexical", "-k", "1", "--json", "--query-file", qf)
	if !strings.Contains(r.stdout, `"id":"bread"`) {
		t.Errorf("--query-file: %s", r)
	}
	r = annactl(t, "ranking documents by term frequencies", "search", "--index", dir, "--mode", "lexical", "-k", "1", "--json", "--query-file", "-")
	if r.code != 0 || !strings.Contains(r.stdout, `"id":"bm25"`) {
		t.Errorf("--query-file -: %s", r)
	}
	if r := annactl(t, "", "search", "--index", dir, "--query-file", qf, "more"); r.code != 2 || !strings.Contains(r.stderr, "given twice") {
		t.Errorf("both: %s", r)
	}
	empty := filepath.Join(tmp, "empty.txt")
	os.WriteFile(empty, []byte(" \n"), 0o644)
	if r := annactl(t, "", "search", "--index", dir, "--query-file", empty); r.code != 2 || !strings.Contains(r.stderr, "no query given: "+empty+" is empty") {
		t.Errorf("empty: %s", r)
	}
}

// TestCacheOnByDefault: index fills the embedding cache without --cache, as
// eval does; --cache=false leaves it alone.
func TestCacheOnByDefault(t *testing.T) {
	h := ownHome(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 4, 10, 3)
	mustRun(t, "index", "--index", filepath.Join(tmp, "off"), "--cache=false", corpus)
	caches, _ := filepath.Glob(filepath.Join(h, "cache", "embeddings", "*"))
	if len(caches) != 0 {
		t.Fatalf("--cache=false wrote %v", caches)
	}
	mustRun(t, "index", "--index", filepath.Join(tmp, "on"), corpus)
	if caches, _ = filepath.Glob(filepath.Join(h, "cache", "embeddings", "*")); len(caches) == 0 {
		t.Fatal("index without --cache left the embedding cache empty")
	}
}
