package rerank

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/inference"
)

// pairsCase is three queries' documents interleaved into one pair list.
func pairsCase() []Pair {
	queries := []string{scoreQuery, "when did the stock market fall?", "how is bread leavened with yeast"}
	docs := scoreDocs()
	var ps []Pair
	for i, d := range docs {
		for k, q := range queries {
			if (i+k)%2 == 0 || k == 0 {
				ps = append(ps, Pair{Query: q, Doc: d})
			}
		}
	}
	ps = append(ps, Pair{Query: queries[2], Doc: "Bread rises because yeast ferments the sugars in the dough."})
	return ps
}

// TestScorePairs: pairs with different queries, scored in one ScorePairs
// call, score what each query's documents score in a Score call of their
// own (within 1e-6 relative to the score's size in Go; 1e-5 in ONNX
// Runtime, whose kernels round differently by batch shape: 9.6e-7 seen),
// in both backends;
// PairTokens counts what the model reads (at most MaxLength).
func TestScorePairs(t *testing.T) {
	ctx := context.Background()
	w, b := sinHead(t)
	backends := []string{inference.BackendGo}
	if inference.DefaultBackend() == inference.BackendORT {
		backends = append(backends, inference.BackendORT)
	}
	ps := pairsCase()
	for _, be := range backends {
		r := export(t, w, b, Options{Backend: be, IntraOpThreads: 2})
		got, err := r.ScorePairs(ctx, ps)
		if err != nil {
			t.Fatalf("%s: %v", be, err)
		}
		if len(got) != len(ps) {
			t.Fatalf("%s: %d scores for %d pairs", be, len(got), len(ps))
		}
		var worst float64
		for i, p := range ps {
			alone, err := r.Score(ctx, p.Query, []string{p.Doc})
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, math.Abs(float64(got[i]-alone[0]))/(1+math.Abs(float64(alone[0]))))
		}
		// Through Score, grouped by query (the batches differ again).
		byQuery, err := ScorePairs(ctx, scoreOnly{r}, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ps {
			worst = max(worst, math.Abs(float64(got[i]-byQuery[i]))/(1+math.Abs(float64(byQuery[i]))))
		}
		t.Logf("%s: %d pairs of 3 queries, largest relative difference from scoring alone %.2e", be, len(ps), worst)
		if tol := map[string]float64{inference.BackendGo: 1e-6, inference.BackendORT: 1e-5}[be]; worst > tol {
			t.Errorf("%s: ScorePairs differs from Score by up to %.2e", be, worst)
		}
		for _, p := range ps {
			n := r.PairTokens(p)
			if n < 3 || n > r.m.MaxLength() {
				t.Errorf("%s: PairTokens(%.20q, %.20q) = %d, want 3..%d", be, p.Query, p.Doc, n, r.m.MaxLength())
			}
		}
		if empty, err := r.ScorePairs(ctx, nil); err != nil || len(empty) != 0 {
			t.Errorf("%s: ScorePairs(nil) = %v, %v", be, empty, err)
		}
	}
}

// scoreOnly hides ScorePairs: the package ScorePairs then calls Score.
type scoreOnly struct{ r Reranker }

func (s scoreOnly) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	return s.r.Score(ctx, q, docs)
}

// countingScorer scores a document by the query words it holds and counts
// the Score calls and queries seen.
type countingScorer struct {
	calls   int
	queries []string
	short   bool // return one score too few
}

func (c *countingScorer) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	c.calls++
	c.queries = append(c.queries, q)
	out := make([]float32, len(docs))
	for i, d := range docs {
		for _, w := range strings.Fields(q) {
			if strings.Contains(d, w) {
				out[i]++
			}
		}
	}
	if c.short {
		out = out[1:]
	}
	return out, nil
}

// TestScorePairsFallback: for a Reranker without ScorePairs, the package
// function makes one Score call per distinct query and puts the scores
// back in pair order; a short answer and a nil Reranker are errors.
func TestScorePairsFallback(t *testing.T) {
	ps := []Pair{{"a b", "a"}, {"c", "c c"}, {"a b", "a b"}, {"c", "x"}, {"a b", "x"}}
	c := &countingScorer{}
	got, err := ScorePairs(context.Background(), c, ps)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 1, 2, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scores %v, want %v", got, want)
	}
	if c.calls != 2 || fmt.Sprint(c.queries) != "[a b c]" {
		t.Errorf("%d Score calls for queries %q, want 2 (a b, c)", c.calls, c.queries)
	}
	if _, err := ScorePairs(context.Background(), &countingScorer{short: true}, ps); err == nil || !strings.Contains(err.Error(), "scores for") {
		t.Errorf("a short answer: %v", err)
	}
	if _, err := ScorePairs(nil, nil, ps); err == nil { //nolint:staticcheck // a nil context is allowed
		t.Error("a nil Reranker: no error")
	}
}
