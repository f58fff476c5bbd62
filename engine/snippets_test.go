package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/encodertest"
)

// repetitive is n bytes of 15 distinct words (issue #41: a log or a table
// reads the same): each one some 39,000 times in 4 MB.
func repetitive(n int) string {
	words := strings.Fields("vortex shock wave flow pressure boundary layer mach number heat transfer wing body jet plate")
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(words[(i*7+i/15)%15])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

func snippetEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := Open(context.Background(), t.TempDir(), Options{Encoder: &encodertest.Hashing{D: 16, FP: "fp"}, Chunking: Chunking{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestSnippetsBounded: the snippet of a 4 MB repetitive document takes
// bounded work (it took 11 s when its cost was the square of the query
// terms' occurrences), whether the query's terms meet early or one of
// them is missing, and still shows where the terms are.
func TestSnippetsBounded(t *testing.T) {
	e := snippetEngine(t)
	text := repetitive(4 << 20)
	for _, q := range []string{"vortex shock", "vortex zebra"} {
		rs := []Result{{ID: "big", Text: text}, {ID: "small", Text: "a shock wave meets a vortex"}}
		start := time.Now()
		if err := e.snippets(context.Background(), q, rs, nil, 0); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%q: snippets took %v", q, took)
		}
		for _, r := range rs {
			s := r.Snippet
			if s == nil || s.Source != "lexical" || len(s.Highlights) == 0 || len(s.Text) > 2*200 {
				t.Fatalf("%q: %s: snippet %+v", q, r.ID, s)
			}
			if got := r.Text[s.Highlights[0].Start:s.Highlights[0].End]; got != "vortex" && got != "shock" {
				t.Errorf("%q: %s: highlight %q", q, r.ID, got)
			}
		}
	}
}

// TestSnippetsCancel: snippets stop with the context's error once it is
// cancelled, before or while they work.
func TestSnippetsCancel(t *testing.T) {
	e := snippetEngine(t)
	text := repetitive(4 << 20)
	rs := make([]Result, 50)
	for i := range rs {
		rs[i] = Result{ID: "big", Text: text}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.snippets(ctx, "vortex zebra", rs, nil, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	// 50 documents of 4 MB, each read to the limits: cancelled midway.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.snippets(ctx, "vortex zebra", rs, nil, 0)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled midway: %v after %v", err, time.Since(start))
	}
}
