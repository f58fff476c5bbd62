package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// TestBesideServe: annactl index, delete and search beside a running
// annactl serve go through it (its model, its commits: the server sees
// each at once), index --sync too; the filter warning of a search survives
// the trip; a model other than the server's is refused saying what to do.
func TestBesideServe(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	sv, url, log := serveChild(t, "--index", dir)
	defer func() {
		sv.cmd.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, sv); code != 0 {
			t.Errorf("serve exited %d\n%s", code, log)
		}
	}()
	corpus := func(name string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"_id": "d%d", "title": "note %d", "text": "sourdough bread with wild yeast, batch %d", "metadata": {"shelf": "s%d"}}`+"\n", i, i, i, i%2)
		}
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	served := func() int {
		t.Helper()
		resp, err := http.Get(url + "/v1/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct{ Documents int }
		json.NewDecoder(resp.Body).Decode(&st)
		return st.Documents
	}

	r := mustRun(t, "index", "--index", dir, corpus("a.jsonl", 6))
	if !strings.Contains(r.stderr, "writing through it") || !strings.Contains(r.stderr, "6 added") {
		t.Fatalf("index beside serve:\n%s", r)
	}
	if n := served(); n != 6 {
		t.Fatalf("the server holds %d documents after index, want 6", n)
	}
	t.Logf("index: %s", r.stderr)
	r = mustRun(t, "search", "--index", dir, "--where", "color=red", "--json", "sourdough")
	if !strings.Contains(r.stderr, `no document has the metadata key "color"`) {
		t.Errorf("search beside serve lost the filter's warning:\n%s", r)
	}
	r = mustRun(t, "delete", "--index", dir, "d0", "d1", "nope")
	if !strings.Contains(r.stderr, "deleted 2 documents") {
		t.Errorf("delete beside serve:\n%s", r)
	}
	if n := served(); n != 4 {
		t.Fatalf("the server holds %d documents after delete, want 4", n)
	}
	r = mustRun(t, "index", "--index", dir, "--sync", corpus("b.jsonl", 3))
	if n := served(); n != 3 {
		t.Fatalf("the server holds %d documents after index --sync, want 3:\n%s", n, r)
	}
	// A folder through the server; synced again, a file changed and one
	// removed reach it.
	notes := filepath.Join(tmp, "notes")
	os.MkdirAll(notes, 0o755)
	os.WriteFile(filepath.Join(notes, "tides.md"), []byte("# Tides\n\nTides follow the moon.\n"), 0o644)
	os.WriteFile(filepath.Join(notes, "rye.md"), []byte("# Rye\n\nRye bread with a sour starter.\n"), 0o644)
	r = mustRun(t, "index", "--index", dir, notes)
	if n := served(); n != 5 {
		t.Fatalf("the server holds %d documents after indexing a folder of 2, want 5:\n%s", n, r)
	}
	os.Remove(filepath.Join(notes, "rye.md"))
	os.WriteFile(filepath.Join(notes, "tides.md"), []byte("# Tides\n\nTides follow the moon and the sun.\n"), 0o644)
	r = mustRun(t, "index", "--index", dir, "--sync", notes)
	if n := served(); n != 4 {
		t.Fatalf("the server holds %d documents after a file of the folder went, want 4:\n%s", n, r)
	}
	r = mustRun(t, "search", "--index", dir, "--mode", "lexical", "--json", "moon sun")
	if !strings.Contains(r.stdout, "tides.md") || !strings.Contains(r.stdout, "the sun") {
		t.Errorf("the changed file is not served:\n%s", r)
	}
	// Another model than the server's (it embeds with the default, the
	// int8 form; --model alone would take its int8 form too): refused,
	// saying what to do.
	otherDir := filepath.Join(home.ModelsDir(), "all-MiniLM-L6-v2")
	if _, err := os.Stat(otherDir); err == nil {
		r = annactl(t, "", "index", "--index", dir, "--model", otherDir, "--precision", "float32", corpus("c.jsonl", 1))
		if r.code == 0 || !strings.Contains(r.stderr, "reindex") && !strings.Contains(r.stderr, "without a model") {
			t.Errorf("index with another model beside serve:\n%s", r)
		}
	}
	t.Logf("another model: %s", r.stderr)
	// What stays the server's alone says so.
	r = annactl(t, "", "reindex", "--index", dir, "--model", otherDir)
	t.Logf("reindex: %s", r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, "open for writing") {
		t.Errorf("reindex beside serve:\n%s", r)
	}
}
