package engine_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

func addN(t *testing.T, e *engine.Engine, from, n int) {
	t.Helper()
	var docs []engine.Document
	for i := from; i < from+n; i++ {
		docs = append(docs, doc(i))
	}
	if _, err := e.Add(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
}

func mustCheckOK(t *testing.T, dir string) *engine.Report {
	t.Helper()
	rep, err := engine.Check(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("check %s: %v", dir, rep.Problems)
	}
	return rep
}

func TestSearchOptionsValidated(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	addN(t, e, 0, 5)
	if _, err := e.Search(ctx, "  ", engine.SearchOptions{}); !errors.Is(err, engine.ErrEmptyQuery) {
		t.Errorf("blank query: %v", err)
	}
	for _, o := range []engine.SearchOptions{
		{K: -1}, {Depth: -1}, {EfSearch: -3}, {RRFK: -1}, {RerankDepth: -2}, {K: 20, Depth: 5},
		{Mode: "bm25"}, {Mode: engine.ModeRerank}, {Weights: map[string]float64{"dense": -1}},
		{Weights: map[string]float64{"dense": 0}}, {Weights: map[string]float64{"dnese": 2}}, {Fusion: "sum"},
	} {
		_, err := e.Search(ctx, "tok1", o)
		var oe *engine.OptionError
		if !errors.Is(err, engine.ErrInvalidOption) || !errors.As(err, &oe) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if rs, err := e.Search(ctx, "tok1", engine.SearchOptions{}); err != nil || len(rs) == 0 {
		t.Errorf("zero options take the defaults: %v %v", rs, err)
	}
	if _, err := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: hashEnc("x"), HNSW: engine.HNSW{M: -1}}); !errors.Is(err, engine.ErrInvalidOption) {
		t.Errorf("negative HNSW.M: %v", err)
	}
	if _, err := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: hashEnc("x"), SearchWorkers: -1}); !errors.Is(err, engine.ErrInvalidOption) {
		t.Errorf("negative SearchWorkers: %v", err)
	}
}

func TestClosedAndReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	addN(t, e, 0, 10)
	e.Close()
	if _, err := e.Search(ctx, "tok1", engine.SearchOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("search after close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := engine.Open(ctx, filepath.Join(dir, "nope"), engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")}); !errors.Is(err, engine.ErrNotIndex) {
		t.Errorf("read-only open of a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); err == nil {
		t.Error("a read-only open created a directory")
	}
	ro, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Add(ctx, []engine.Document{doc(99)}); !errors.Is(err, engine.ErrReadOnly) {
		t.Errorf("add on a read-only engine: %v", err)
	}
	if _, err := ro.Delete(ctx, []string{"d00001"}); !errors.Is(err, engine.ErrReadOnly) {
		t.Errorf("delete on a read-only engine: %v", err)
	}
	mustFindFirst(t, ro, engine.ModeHybrid, "tok3", "d00003")
	// Two read-only opens at once.
	ro2, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	ro2.Close()
}

// TestIndexFromAnotherStore: a derived index built from another store (its
// anna.db replaced by another directory's) is rebuilt, with a warning.
func TestIndexFromAnotherStore(t *testing.T) {
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	ea := openT(t, a, "fp-a")
	addN(t, ea, 0, 10)
	ea.Close()
	eb := openT(t, b, "fp-a")
	addN(t, eb, 100, 10)
	eb.Close()
	raw, _ := os.ReadFile(filepath.Join(b, "anna.db"))
	os.WriteFile(filepath.Join(a, "anna.db"), raw, 0o600)
	rep, _ := engine.Check(ctx, a)
	if rep.OK() || !strings.Contains(rep.Problems[0].What, "another store") {
		t.Fatalf("check: %v", rep.Problems)
	}
	// Read-only: BM25 cannot be rebuilt, so lexical searches say why.
	ro, err := engine.Open(ctx, a, engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ro.Search(ctx, "tok105", engine.SearchOptions{Mode: engine.ModeLexical})
	var re *engine.RecoveryError
	if !errors.As(err, &re) || !errors.Is(err, engine.ErrNeedsRecovery) {
		t.Errorf("lexical search of a stale index read-only: %v", err)
	}
	mustFindFirst(t, ro, engine.ModeDense, "tok105", "d00105") // the graph is rebuilt in memory
	ro.Close()
	e, err := engine.Open(ctx, a, engine.Options{Encoder: hashEnc("fp-a")})
	if err != nil {
		t.Fatal(err)
	}
	if w := e.Warnings(); len(w) < 2 || !strings.Contains(strings.Join(w, "\n"), "another store") {
		t.Errorf("warnings: %q", w)
	}
	mustFindFirst(t, e, engine.ModeLexical, "tok105", "d00105")
	e.Close()
	mustCheckOK(t, a)
}

// TestStoreBehindIndexes: anna.db replaced by an older copy of itself (a
// restored backup: the indexes have seen changes it lacks) is detected,
// and a writable open rebuilds the indexes from it with a warning.
func TestStoreBehindIndexes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	addN(t, e, 0, 10)
	e.Close()
	old, _ := os.ReadFile(filepath.Join(dir, "anna.db"))
	e = openT(t, dir, "fp-a")
	addN(t, e, 10, 10)
	e.Close()
	os.WriteFile(filepath.Join(dir, "anna.db"), old, 0o600)
	rep, _ := engine.Check(ctx, dir)
	if len(rep.Problems) != 2 || !strings.Contains(rep.Problems[0].What, "ahead of anna.db") {
		t.Fatalf("check: %v", rep.Problems)
	}
	e = openT(t, dir, "fp-a")
	w := strings.Join(e.Warnings(), "\n")
	if !strings.Contains(w, "lost committed changes") {
		t.Errorf("warnings: %s", w)
	}
	st, _ := e.Stats()
	if st.Documents != 10 || st.LexicalDocs != 10 || st.DenseDocs != 10 {
		t.Errorf("after the rebuild: %+v", st)
	}
	e.Close()
	mustCheckOK(t, dir)
}

// TestModelBoundWithFirstDocuments: a directory that never held a document
// is bound to no model, whatever opened it.
func TestModelBoundWithFirstDocuments(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	if _, err := e.Add(ctx, []engine.Document{{ID: "x"}}); !errors.Is(err, engine.ErrEmptyDocument) {
		t.Fatalf("empty document: %v", err)
	}
	e.Close()
	if m, _ := engine.RecordedModel(dir); m.Fingerprint != "" {
		t.Fatalf("an empty directory is bound to %+v", m)
	}
	e = openT(t, dir, "fp-b")
	addN(t, e, 0, 3)
	e.Close()
	if m, _ := engine.RecordedModel(dir); m.Fingerprint != "fp-b" {
		t.Fatalf("bound to %+v, want fp-b", m)
	}
}

// TestKillDuringAddReplays kills a child in the middle of ingesting (see
// TestCrashSafety) and checks that a directory left with indexes behind
// the store passes Check once opened for writing.
func TestKillDuringAddReplays(t *testing.T) {
	if os.Getenv("ANNA_CRASH_CHILD") != "" {
		t.Skip()
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), "ANNA_CRASH_CHILD="+dir, "ANNA_CRASH_START=0")
	out, _ := cmd.StdoutPipe()
	cmd.Start()
	buf := make([]byte, 4096)
	seen := ""
	for !strings.Contains(seen, "committed 5") {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("child: %v (%q)", err, seen)
		}
		seen += string(buf[:n])
	}
	cmd.Process.Kill()
	cmd.Wait()
	e := openT(t, dir, "fp-a")
	e.Close()
	mustCheckOK(t, dir)
}
