package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestDeleteExcept: every document keep does not hold is removed, in
// batches, from the store and both indexes; those it holds stay; a second
// call removes nothing; a cancelled context stops before any batch.
func TestDeleteExcept(t *testing.T) {
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
	keep := map[string]bool{}
	for i := 0; i < 30; i += 3 {
		keep[doc(i).ID] = true
	}
	keep["not-stored"] = true
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := e.Teacher().DeleteExcept(cancelled, func(id string) bool { return keep[id] }, 4); !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("cancelled: %d %v", n, err)
	}
	n, err := e.Teacher().DeleteExcept(ctx, func(id string) bool { return keep[id] }, 4)
	if err != nil || n != 20 {
		t.Fatalf("delete except: %d %v, want 20", n, err)
	}
	if n, err := e.Teacher().DeleteExcept(ctx, func(id string) bool { return keep[id] }, 0); err != nil || n != 0 {
		t.Fatalf("again: %d %v, want 0", n, err)
	}
	st, err := e.Stats()
	if err != nil || st.Documents != 10 || st.LexicalDocs != 10 || st.DenseDocs != 10 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	mustFindFirst(t, e, engine.ModeLexical, "tok3", doc(3).ID)
	if rs, _ := e.Search(ctx, "tok4", engine.SearchOptions{Mode: engine.ModeLexical, K: 30}); len(rs) > 0 && rs[0].ID == doc(4).ID {
		t.Fatalf("removed document still found: %v", ids(rs))
	}
	if _, err := e.Teacher().DeleteExcept(ctx, nil, 0); !errors.Is(err, engine.ErrInvalidOption) {
		t.Errorf("nil keep: %v", err)
	}
	e.Close()
	rep, err := engine.Check(ctx, dir)
	if err != nil || !rep.OK() || rep.Documents != 10 {
		t.Fatalf("check: %+v %v", rep, err)
	}
}
