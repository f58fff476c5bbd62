package engine_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

// lengthReranker prefers shorter documents: easy to predict, unlike any
// retrieval list.
type lengthReranker struct{ calls, pairs int }

func (l *lengthReranker) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	l.calls++
	l.pairs += len(docs)
	out := make([]float32, len(docs))
	for i, d := range docs {
		out[i] = -float32(len(d))
	}
	return out, nil
}

// rerankEngine is an engine with a lengthReranker, holding 30 documents
// doc(i) makes.
func rerankEngine(t *testing.T, doc func(i int) engine.Document) (*engine.Engine, *lengthReranker) {
	t.Helper()
	rr := &lengthReranker{}
	e, err := engine.Open(context.Background(), t.TempDir(), engine.Options{Encoder: hashEnc("fp-a"), Reranker: rr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var docs []engine.Document
	for i := range 30 {
		docs = append(docs, doc(i))
	}
	if _, err := e.Add(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	return e, rr
}

func TestRerankMode(t *testing.T) {
	ctx := context.Background()
	e, rr := rerankEngine(t, func(i int) engine.Document {
		return engine.Document{ID: string(rune('a'+i%26)) + strings.Repeat("x", i), Text: "common words " + strings.Repeat("pad ", 30-i)}
	})
	for _, of := range []engine.Mode{engine.ModeHybrid, engine.ModeLexical, engine.ModeDense} {
		rr.pairs = 0
		res, err := e.Search(ctx, "common words", engine.SearchOptions{Mode: engine.ModeRerank, RerankOf: of, K: 30, RerankDepth: 10})
		if err != nil {
			t.Fatal(err)
		}
		if rr.pairs != 10 || len(res) != 30 {
			t.Fatalf("%s: reranked %d pairs, returned %d (want 10 reranked of 30)", of, rr.pairs, len(res))
		}
		for i := 1; i < 10; i++ {
			if len(res[i].Text) < len(res[i-1].Text) {
				t.Fatalf("%s: reranked head not sorted by the reranker's score", of)
			}
		}
		last := res[9].Explain[len(res[9].Explain)-1]
		if last.List != "rerank" || last.Rank != 10 {
			t.Fatalf("%s: explanation %+v", of, res[9].Explain)
		}
		for _, r := range res[10:] {
			for _, c := range r.Explain {
				if c.List == "rerank" {
					t.Fatalf("%s: tail result %s claims a rerank score", of, r.ID)
				}
			}
		}
	}
	if _, err := e.Search(ctx, "x", engine.SearchOptions{Mode: engine.ModeRerank, RerankOf: engine.ModeRerank}); err == nil {
		t.Fatal("RerankOf rerank accepted")
	}
	e2, _ := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: hashEnc("fp-a")})
	defer e2.Close()
	if _, err := e2.Search(ctx, "x", engine.SearchOptions{Mode: engine.ModeRerank}); err == nil {
		t.Fatal("rerank without a reranker accepted")
	}
}

// TestRerankFusion: with RerankFusion the reranked head is a third list in
// the RRF, beside the lexical and dense lists, each weighted as asked:
// scores equal the sum computed from the three lists by hand.
func TestRerankFusion(t *testing.T) {
	ctx := context.Background()
	e, _ := rerankEngine(t, func(i int) engine.Document {
		return engine.Document{ID: fmt.Sprintf("d%02d", i), Text: "common words " + strings.Repeat("pad ", (i*7)%30) + fmt.Sprint(i)}
	})
	ranks := func(mode engine.Mode) map[string]int {
		res, err := e.Search(ctx, "common words pad", engine.SearchOptions{Mode: mode, K: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for i, r := range res {
			out[r.ID] = i + 1
		}
		return out
	}
	lex, dense := ranks(engine.ModeLexical), ranks(engine.ModeDense)
	hyb, err := e.Search(ctx, "common words pad", engine.SearchOptions{K: 10, Fusion: engine.FusionRRF})
	if err != nil {
		t.Fatal(err)
	}
	head := append([]engine.Result(nil), hyb...)
	sort.SliceStable(head, func(a, b int) bool { return len(head[a].Text) < len(head[b].Text) })
	reranked := map[string]int{}
	for i, r := range head {
		reranked[r.ID] = i + 1
	}
	for _, w := range []float64{1, 2.5} {
		res, err := e.Search(ctx, "common words pad", engine.SearchOptions{Mode: engine.ModeRerank, RerankFusion: true, K: 30, RerankDepth: 10,
			Fusion: engine.FusionRRF, Weights: map[string]float64{"rerank": w}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 30 {
			t.Fatalf("%d results", len(res))
		}
		for i, r := range res {
			want := 1/float64(60+lex[r.ID]) + 1/float64(60+dense[r.ID])
			if k, ok := reranked[r.ID]; ok {
				want += w / float64(60+k)
			}
			if math.Abs(r.Score-want) > 1e-12 {
				t.Fatalf("weight %g: %s score %.9f, want %.9f (explain %+v)", w, r.ID, r.Score, want, r.Explain)
			}
			if i > 0 && r.Score > res[i-1].Score {
				t.Fatalf("weight %g: not sorted at %d", w, i)
			}
			if _, ok := reranked[r.ID]; ok != (len(r.Explain) == 3 && r.Explain[2].List == "rerank") {
				t.Fatalf("weight %g: %s explain %+v", w, r.ID, r.Explain)
			}
		}
	}
}
