package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// noCtx is what a caller passes as a nil context (a variable, so that the
// calls read as they would in a program that forgot one).
var noCtx context.Context

// noPanic runs f and fails the test, not the test binary, when f panics
// on this goroutine. (A panic on a goroutine the engine started cannot be
// caught here: it ends the binary, which fails the test as well.)
func noPanic(t *testing.T, f func() error) (err error) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("panicked: %v", v)
		}
	}()
	return f()
}

// wordMatch is a reranker that scores a document by how many of its words
// are in the query. It reads ctx, as a real one does, so it would panic on
// a nil one.
type wordMatch struct{}

func (wordMatch) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	in := map[string]bool{}
	for _, w := range strings.Fields(q) {
		in[w] = true
	}
	out := make([]float32, len(docs))
	for i, d := range docs {
		for _, w := range strings.Fields(d) {
			if in[w] {
				out[i]++
			}
		}
	}
	return out, nil
}

var fruit = []engine.Document{
	{ID: "a", Title: "apples", Text: "green apples grow on trees"},
	{ID: "b", Title: "bananas", Text: "yellow bananas grow in bunches"},
	{ID: "c", Title: "cherries", Text: "red cherries are small and sweet"},
}

// firstIs checks that a search for "yellow bananas" found b first.
func firstIs(rs []engine.Result, err error, want string) error {
	if err != nil {
		return err
	}
	if len(rs) == 0 || rs[0].ID != want {
		return fmt.Errorf("results %v, want %s first", ids(rs), want)
	}
	return nil
}

// Every exported function of the engine that takes a context treats a nil
// one as context.Background(): it neither panics (on the caller's
// goroutine, or on one it starts) nor fails, and does what it does with a
// real context.
func TestNilContext(t *testing.T) {
	dir := t.TempDir()
	var e *engine.Engine
	if err := noPanic(t, func() (err error) {
		e, err = engine.Open(noCtx, dir, engine.Options{Encoder: hashEnc("fp-a"), Reranker: wordMatch{}})
		return err
	}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer e.Close()
	search := func(mode engine.Mode) func() error {
		return func() error {
			rs, err := e.Search(noCtx, "yellow bananas", engine.SearchOptions{K: 3, Mode: mode, Snippets: true})
			return firstIs(rs, err, "b")
		}
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"Add", func() error {
			res, err := e.Add(noCtx, fruit)
			if err == nil && (res.Added != 3 || !res.Committed) {
				return fmt.Errorf("AddResult %+v, want 3 added, committed", res)
			}
			return err
		}},
		{"Search/lexical", search(engine.ModeLexical)},
		{"Search/dense", search(engine.ModeDense)},
		{"Search/hybrid", search(engine.ModeHybrid)},
		{"Search/rerank", search(engine.ModeRerank)},
		{"LexicalScores", func() error {
			s, err := e.Teacher().LexicalScores(noCtx, "bananas", []engine.Document{fruit[1], fruit[0]})
			if err == nil && (len(s) != 2 || s[0] <= 0 || s[1] != 0) {
				return fmt.Errorf("scores %v, want one positive, then 0", s)
			}
			return err
		}},
		{"Get", func() error {
			got, err := e.Get(noCtx, "c", "nope", "a")
			if err == nil && (len(got) != 2 || got[0].ID != "c" || got[1].ID != "a") {
				return fmt.Errorf("got %d documents %v, want c and a", len(got), got)
			}
			return err
		}},
		{"Reindex", func() error {
			if err := e.Reindex(noCtx, engine.ReindexOptions{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"}, Model: "/models/b"}); err != nil {
				return err
			}
			if m := e.Model(); m.Fingerprint != "fp-b" || m.Dim != 32 {
				return fmt.Errorf("model after Reindex %+v, want fp-b, 32 dimensions", m)
			}
			return search(engine.ModeDense)()
		}},
		{"LoadEncoder", func() error {
			enc, err := e.Teacher().LoadEncoder(noCtx)
			if err == nil && enc.Fingerprint() != "fp-b" {
				return fmt.Errorf("encoder %s, want fp-b", enc.Fingerprint())
			}
			return err
		}},
		{"Delete", func() error {
			n, err := e.Delete(noCtx, []string{"a", "nope"})
			if err == nil && n != 1 {
				return fmt.Errorf("deleted %d, want 1", n)
			}
			return err
		}},
		{"DeleteExcept", func() error {
			n, err := e.Teacher().DeleteExcept(noCtx, func(id string) bool { return id == "c" }, 0)
			if err == nil && n != 1 {
				return fmt.Errorf("deleted %d, want 1 (b)", n)
			}
			return err
		}},
		{"IDs", func() error {
			ids, err := e.Teacher().IDs(noCtx)
			if err == nil && (len(ids) != 1 || ids[0] != "c") {
				return fmt.Errorf("IDs %q, want [c]", ids)
			}
			return err
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := noPanic(t, s.run); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(filepath.Join(dir, "lexical")); err != nil {
		t.Fatal(err)
	}
	t.Run("Check", func(t *testing.T) {
		var rep *engine.Report
		if err := noPanic(t, func() (err error) { rep, err = engine.Check(noCtx, dir); return err }); err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Fatal("Check found nothing wrong with a directory whose BM25 index is gone")
		}
	})
	t.Run("Repair", func(t *testing.T) {
		var rep *engine.RepairReport
		if err := noPanic(t, func() (err error) {
			rep, err = engine.Repair(noCtx, dir, engine.RepairOptions{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !rep.After.OK() {
			t.Fatalf("after Repair: %v", rep.After.Problems)
		}
	})
}

// panicky is an encoder and a reranker that panic while their switches
// are on, as a buggy plug-in would.
type panicky struct {
	*encodertest.Hashing
	encPanics, rrPanics atomic.Bool
}

func (p *panicky) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	if p.encPanics.Load() {
		panic("encoder boom")
	}
	return p.Hashing.EmbedDocuments(ctx, texts)
}

func (p *panicky) EmbedQueries(ctx context.Context, queries []string, pr encoder.Prompt) ([][]float32, error) {
	if p.encPanics.Load() {
		var m map[string]int
		m["x"]++ // a runtime error, as a real bug would be
	}
	return p.Hashing.EmbedQueries(ctx, queries, pr)
}

func (p *panicky) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	if p.rrPanics.Load() {
		panic(errors.New("reranker boom"))
	}
	return wordMatch{}.Score(ctx, q, docs)
}

// A panic in code the engine calls — a plug-in on the caller's goroutine,
// or the BM25 search on the goroutine a hybrid search starts — comes back
// from the call as an error naming the panic, and the engine stays usable.
func TestPanicsComeBackAsErrors(t *testing.T) {
	p := &panicky{Hashing: hashEnc("fp-a")}
	e, err := engine.Open(context.Background(), t.TempDir(), engine.Options{Encoder: p, Reranker: p})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	if _, err := e.Add(ctx, fruit[:2]); err != nil {
		t.Fatal(err)
	}
	search := func(mode engine.Mode) error {
		rs, err := e.Search(ctx, "yellow bananas", engine.SearchOptions{K: 3, Mode: mode})
		return firstIs(rs, err, "b")
	}
	wantPanic := func(what string, err error, in ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, s := range append([]string{"panic: "}, in...) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not say %q", what, err, s)
			}
		}
	}
	usable := func(what string) {
		t.Helper()
		for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid, engine.ModeRerank} {
			if err := search(m); err != nil {
				t.Fatalf("after %s: %s search: %v", what, m, err)
			}
		}
	}

	p.encPanics.Store(true)
	res, err := e.Add(ctx, fruit[2:])
	wantPanic("Add, encoder panics", err, "encoder boom", "panicky).EmbedDocuments")
	if res.Committed {
		t.Error("Add committed a batch it could not embed")
	}
	for _, m := range []engine.Mode{engine.ModeDense, engine.ModeHybrid} {
		var re runtime.Error
		err := search(m)
		wantPanic(string(m)+" search, encoder panics", err, "assignment to entry in nil map", "panicky).EmbedQueries")
		if !errors.As(err, &re) {
			t.Errorf("%s search: %v does not unwrap to the runtime.Error", m, err)
		}
	}
	p.encPanics.Store(false)
	usable("the encoder's panics")
	if res, err := e.Add(ctx, fruit[2:]); err != nil || res.Added != 1 {
		t.Fatalf("Add after the encoder's panic: %+v, %v", res, err)
	}

	p.rrPanics.Store(true)
	wantPanic("rerank search, reranker panics", search(engine.ModeRerank), "reranker boom")
	p.rrPanics.Store(false)
	usable("the reranker's panic")

	restore := engine.PanicInLexical(e, "lexical boom")
	for _, m := range []engine.Mode{engine.ModeHybrid, engine.ModeLexical, engine.ModeRerank} {
		wantPanic(string(m)+" search, BM25 panics", search(m), "lexical boom", "panickyLexical.lexical")
	}
	restore()
	usable("the BM25 panic")
	if err := e.Close(); err != nil {
		t.Fatalf("Close after the panics: %v", err)
	}
}

// An empty ID is refused by Add, Get and Delete with ErrEmptyID, naming
// its place.
func TestEmptyID(t *testing.T) {
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	ctx := context.Background()
	if _, err := e.Add(ctx, fruit); err != nil {
		t.Fatal(err)
	}
	_, addErr := e.Add(ctx, []engine.Document{fruit[0], {ID: " ", Text: "blank"}})
	_, getErr := e.Get(ctx, "a", "")
	_, delErr := e.Delete(ctx, []string{"b", ""})
	for name, err := range map[string]error{"Add": addErr, "Get": getErr, "Delete": delErr} {
		if !errors.Is(err, engine.ErrEmptyID) || !strings.Contains(err.Error(), " 1") {
			t.Errorf("%s with an empty ID: %v, want ErrEmptyID naming position 1", name, err)
		}
	}
	if got, err := e.Get(ctx, "a", "b", "c"); err != nil || len(got) != 3 {
		t.Fatalf("the refused calls changed the store: Get = %d documents, %v", len(got), err)
	}
}
