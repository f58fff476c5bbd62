package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

func hashEnc(fp string) *encodertest.Hashing { return &encodertest.Hashing{D: 64, FP: fp} }

func openT(t *testing.T, dir, fp string) *engine.Engine {
	t.Helper()
	e, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc(fp)})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return e
}

// doc returns a document whose text carries a unique token "tokN" so that
// each one can be found by BM25 and (through feature hashing) densely.
func doc(n int) engine.Document {
	return engine.Document{ID: fmt.Sprintf("d%05d", n), Title: fmt.Sprintf("title %d", n), Text: fmt.Sprintf("tok%d shared words about search engines", n)}
}

func ids(rs []engine.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func mustFindFirst(t *testing.T, e *engine.Engine, mode engine.Mode, query, want string) {
	t.Helper()
	rs, err := e.Search(context.Background(), query, engine.SearchOptions{Mode: mode, K: 5})
	if err != nil {
		t.Fatalf("%s search %q: %v", mode, query, err)
	}
	if len(rs) == 0 || rs[0].ID != want {
		t.Fatalf("%s search %q: got %v, want %s first", mode, query, ids(rs), want)
	}
}

func TestAddSearchDeleteReAdd(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	var docs []engine.Document
	for i := range 50 {
		docs = append(docs, doc(i))
	}
	res, err := e.Add(ctx, docs)
	if err != nil || res.Added != 50 {
		t.Fatalf("add: %+v %v", res, err)
	}
	for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
		mustFindFirst(t, e, m, "tok7", "d00007")
	}
	// Same content again: nothing re-embedded.
	if res, err = e.Add(ctx, docs[:10]); err != nil || res.Unchanged != 10 || res.Added != 0 {
		t.Fatalf("re-add unchanged: %+v %v", res, err)
	}
	if n, err := e.Delete(ctx, []string{"d00007", "nope"}); err != nil || n != 1 {
		t.Fatalf("delete: %d %v", n, err)
	}
	for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
		rs, err := e.Search(ctx, "tok7", engine.SearchOptions{Mode: m, K: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.ID == "d00007" {
				t.Fatalf("%s: deleted document returned", m)
			}
		}
	}
	// Re-add the deleted id with new text: found once, by the new text.
	if _, err := e.Add(ctx, []engine.Document{{ID: "d00007", Text: "reborn zebra"}}); err != nil {
		t.Fatal(err)
	}
	mustFindFirst(t, e, engine.ModeLexical, "zebra", "d00007")
	mustFindFirst(t, e, engine.ModeDense, "reborn zebra", "d00007")
	rs, _ := e.Search(ctx, "zebra reborn", engine.SearchOptions{K: 50})
	seen := 0
	for _, r := range rs {
		if r.ID == "d00007" {
			seen++
			if len(r.Explain) != 2 {
				t.Fatalf("hybrid hit should explain both lists, got %+v", r.Explain)
			}
		}
	}
	if seen != 1 {
		t.Fatalf("re-added id appears %d times", seen)
	}
	st, err := e.Stats()
	if err != nil || st.Documents != 50 || st.LexicalDocs != 50 || st.DenseDocs != 50 {
		t.Fatalf("stats: %+v %v", st, err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	for name, d := range map[string]engine.Document{
		"empty id":   {ID: " ", Text: "x"},
		"empty text": {ID: "a"},
		"bad utf8":   {ID: "a\xff", Text: "x"},
	} {
		if _, err := e.Add(ctx, []engine.Document{d}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Duplicate ids in one batch: the last occurrence wins.
	res, err := e.Add(ctx, []engine.Document{{ID: "x", Text: "first"}, {ID: "x", Text: "second"}})
	if err != nil || res.Added != 1 {
		t.Fatalf("dup batch: %+v %v", res, err)
	}
	mustFindFirst(t, e, engine.ModeLexical, "second", "x")
	// A document far over any model's max length is stored whole.
	long := strings.Repeat("word ", 20000) + "needle"
	if _, err := e.Add(ctx, []engine.Document{{ID: "long", Text: long}}); err != nil {
		t.Fatal(err)
	}
	mustFindFirst(t, e, engine.ModeLexical, "needle", "long")
}

func TestModelMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	if _, err := e.Add(context.Background(), []engine.Document{doc(1)}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	_, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc("fp-b")})
	var mm *engine.ModelMismatchError
	if !errors.As(err, &mm) || !strings.Contains(err.Error(), "fp-a") || !strings.Contains(err.Error(), "fp-b") {
		t.Fatalf("want a mismatch error naming both fingerprints, got %v", err)
	}
}

func TestDerivedIndexesRebuiltWhenLost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	var docs []engine.Document
	for i := range 30 {
		docs = append(docs, doc(i))
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"lexical", "dense.hnsw"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	e = openT(t, dir, "fp-a")
	defer e.Close()
	mustFindFirst(t, e, engine.ModeLexical, "tok21", "d00021")
	mustFindFirst(t, e, engine.ModeDense, "tok21", "d00021")
}

// TestSearchDuringIngest runs searches concurrently with adds, deletes and
// re-adds of the same ids; run it with -race.
func TestSearchDuringIngest(t *testing.T) {
	ctx := context.Background()
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	if _, err := e.Add(ctx, []engine.Document{doc(0)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mode := []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid}[(i+w)%3]
				if _, err := e.Search(ctx, fmt.Sprintf("tok%d shared", i%40), engine.SearchOptions{Mode: mode, K: 5}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for round := range 20 {
		batch := []engine.Document{}
		for i := range 10 {
			batch = append(batch, doc(round*10+i))
		}
		if _, err := e.Add(ctx, batch); err != nil {
			t.Fatal(err)
		}
		// Delete and re-add the same ids.
		if _, err := e.Delete(ctx, []string{batch[0].ID, batch[1].ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Add(ctx, batch[:2]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	st, _ := e.Stats()
	if st.Documents != 200 || st.DenseDocs != 200 || st.LexicalDocs != 200 {
		t.Fatalf("after churn: %+v", st)
	}
}

func TestReindexSwapsModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	var docs []engine.Document
	for i := range 100 {
		docs = append(docs, doc(i))
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Searches keep working during the rebuild.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rs, err := e.Search(ctx, "tok42", engine.SearchOptions{Mode: engine.ModeDense, K: 1})
			if err != nil || len(rs) == 0 || rs[0].ID != "d00042" {
				t.Errorf("search during reindex: %v %v", rs, err)
				return
			}
		}
	}()
	if err := e.Reindex(ctx, engine.ReindexOptions{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"}, Model: "/models/b", BatchSize: 7}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	st, _ := e.Stats()
	if st.Model.Fingerprint != "fp-b" || st.Model.Dim != 32 || st.DenseDocs != 100 || st.LexicalDocs != 100 {
		t.Fatalf("after reindex: %+v", st)
	}
	if m := e.Model(); m.Dir != "/models/b" {
		t.Fatalf("model %+v", m)
	}
	e.Close()
	if m, err := engine.RecordedModel(dir); m != (engine.Model{Fingerprint: "fp-b", Dir: "/models/b", Dim: 32}) {
		t.Fatalf("recorded model %+v %v", m, err)
	}
	if _, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a")}); err == nil {
		t.Fatal("old model accepted after reindex")
	}
	var logs []string
	e2, err := engine.Open(ctx, dir, engine.Options{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"},
		Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) > 0 {
		t.Fatalf("reopen after reindex replayed or rebuilt something: %q", logs)
	}
	defer e2.Close()
	mustFindFirst(t, e2, engine.ModeDense, "tok42", "d00042")
}
