package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/encodertest"
)

// words is n distinct words w0 w1 ... separated by spaces and, every 7th,
// a newline.
func words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString([]string{" ", " ", " ", " ", " ", " ", "\n"}[i%7])
		}
		fmt.Fprintf(&b, "w%d", i)
	}
	return b.String()
}

// TestMaxPassages: a document split into more than MaxPassages passages is
// embedded by its first MaxPassages (the whole text's first ones), Logf
// names it, the rest of the batch is indexed, and BM25 still finds the end
// of its text; EmbedProgress counts the passages.
func TestMaxPassages(t *testing.T) {
	ctx := context.Background()
	enc := &encodertest.Hashing{D: 16, FP: "fp", MaxLen: 12}
	var (
		mu    sync.Mutex
		logs  []string
		calls [][2]int
	)
	e, err := Open(ctx, t.TempDir(), Options{
		Encoder: enc, MaxPassages: 10,
		Logf:          func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() },
		EmbedProgress: func(done, total int) { mu.Lock(); calls = append(calls, [2]int{done, total}); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	long := words(3000) // 12-word windows, 6 words apart: about 500 passages
	res, err := e.Add(ctx, []Document{{ID: "long", Title: "Long", Text: long}, {ID: "short", Text: "a short note"}})
	if err != nil || res.Added != 2 {
		t.Fatalf("add: %+v %v", res, err)
	}
	emb, found, err := e.store.Vector(e.vecKey(), "long")
	if err != nil || !found {
		t.Fatal(found, err)
	}
	all := enc.Split("Long ", long, 12, 6)
	if len(emb.Vectors) != 10 || len(emb.Spans) != 10 {
		t.Fatalf("%d vectors, %d spans, want 10 (of %d passages)", len(emb.Vectors), len(emb.Spans), len(all))
	}
	for i, sp := range emb.Spans {
		if sp.Start != all[i].Start || sp.End != all[i].End {
			t.Fatalf("passage %d: %+v, want the whole text's %+v", i, sp, all[i])
		}
	}
	if len(logs) != 1 || !strings.Contains(logs[0], `"long"`) || !strings.Contains(logs[0], "10 passages") {
		t.Fatalf("logs %q", logs)
	}
	if last := calls[len(calls)-1]; last != [2]int{11, 11} {
		t.Fatalf("progress %v, want to end at 11 of 11 passages", calls)
	}
	rs, err := e.Search(ctx, "w2999", SearchOptions{Mode: ModeLexical, K: 1})
	if err != nil || len(rs) != 1 || rs[0].ID != "long" {
		t.Fatalf("BM25 does not find the end of the long text: %v %v", rs, err)
	}
	if _, err := Open(ctx, t.TempDir(), Options{Encoder: enc, MaxPassages: -1}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("MaxPassages -1: %v", err)
	}
}

// TestMaxPassagesDefault: with MaxPassages 0 a document keeps at most
// DefaultMaxPassages passages, and EmbedProgress hears of each 1,024.
func TestMaxPassagesDefault(t *testing.T) {
	ctx := context.Background()
	var calls [][2]int
	e, err := Open(ctx, t.TempDir(), Options{Encoder: &encodertest.Hashing{D: 8, FP: "fp", MaxLen: 8}, EmbedProgress: func(done, total int) { calls = append(calls, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	docs := []Document{{ID: "a", Text: words(4000)}, {ID: "b", Text: words(4000)}, {ID: "c", Text: words(100)}}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		emb, _, err := e.store.Vector(e.vecKey(), id)
		if err != nil || len(emb.Vectors) != DefaultMaxPassages {
			t.Fatalf("%s: %d vectors, want %d (%v)", id, len(emb.Vectors), DefaultMaxPassages, err)
		}
	}
	if want := [][2]int{{1024, 1048}, {1048, 1048}}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("progress %v, want %v", calls, want)
	}
}

// TestSplitCapped: the capped split tokenizes a prefix of a long text and
// keeps the whole text's first passages.
func TestSplitCapped(t *testing.T) {
	var sp encoder.Splitter = &encodertest.Hashing{MaxLen: 16}
	text := words(60000) // some 420 KB
	for _, c := range []struct{ window, stride, limit int }{{16, 8, 5}, {16, 8, 512}, {16, 16, 100}, {16, 3, 2000}, {16, 8, 100000}} {
		all := sp.Split("T ", text, c.window, c.stride)
		got, cut := splitCapped(sp, "T ", text, c.window, c.stride, c.limit)
		want := all[:min(len(all), c.limit)]
		if cut != (len(all) > c.limit) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: %d passages (cut %v), want the first %d of %d", c, len(got), cut, len(want), len(all))
		}
	}
}
