package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/eval/retrieval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/encodertest"
)

// tiny is a collection where each query's words are its document's.
func tiny() *beir.Dataset {
	ds := &beir.Dataset{Queries: map[string]string{}, Qrels: map[string]map[string]int{}}
	topics := []string{"apple orchard harvest", "ocean tide current", "mountain glacier ice", "desert sand dune"}
	for i, t := range topics {
		id := fmt.Sprint("d", i)
		ds.Corpus = append(ds.Corpus, beir.Doc{ID: id, Text: t + " and more words"})
		q := fmt.Sprint("q", i)
		ds.Queries[q] = t
		ds.Qrels[q] = map[string]int{id: 1}
	}
	ds.Queries["unjudged"] = "nothing"
	return ds
}

func TestEvaluateModes(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: &encodertest.Hashing{D: 64, FP: "fp"}, Chunking: engine.Chunking{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ds := tiny()
	if _, err := ingest.Slice(ctx, eng, ds.Corpus, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	qids := retrieval.JudgedQueries(ds)
	if strings.Join(qids, ",") != "q0,q1,q2,q3" {
		t.Fatalf("judged queries %v", qids)
	}
	modes, err := retrieval.SelectModes("", false)
	if err != nil || len(modes) != 3 {
		t.Fatalf("modes %v, %v: want lexical, dense, hybrid", modes, err)
	}
	var finished, ended []string
	rows, err := retrieval.Evaluate(ctx, eng, ds, qids, modes, retrieval.Options{Workers: 3,
		Progress: func(mode string, total int) (func(int), func()) {
			return func(int) {}, func() { ended = append(ended, mode) }
		},
		Finish: func(m retrieval.Mode, run eval.Run) error {
			if len(run) != 4 {
				return fmt.Errorf("mode %s: %d queries run", m.Key, len(run))
			}
			finished = append(finished, m.Key)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(finished, ",") != "lexical,dense,hybrid" || strings.Join(ended, ",") != "lexical,dense,hybrid" {
		t.Fatalf("finished %v, ended %v", finished, ended)
	}
	for _, r := range rows {
		if r.Scores.Queries != 4 || r.Scores.NDCG10 < 0.99 {
			t.Fatalf("mode %s: %+v: each query's words find its document first", r.Mode.Key, r.Scores)
		}
	}
	// An interrupted evaluation stops with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := retrieval.Evaluate(cctx, eng, ds, qids, modes, retrieval.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
}

func TestSelectModesAndRecordable(t *testing.T) {
	if _, err := retrieval.SelectModes("hybrid+rerank", false); !errors.Is(err, retrieval.ErrNeedsReranker) {
		t.Fatalf("a rerank mode without a reranker: %v", err)
	}
	if _, err := retrieval.SelectModes("lexical,bogus", true); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("unknown mode: %v", err)
	}
	m, err := retrieval.SelectModes("hybrid+rerank", true)
	if err != nil {
		t.Fatal(err)
	}
	var missing *retrieval.MissingCandidatesError
	if err := retrieval.CheckRecordable(m); !errors.As(err, &missing) || missing.Of != "hybrid" {
		t.Fatalf("rerank without its candidates: %v", err)
	}
	m, _ = retrieval.SelectModes("hybrid,hybrid+rerank", true)
	if err := retrieval.CheckRecordable(m); err != nil {
		t.Fatal(err)
	}
}

func TestChooseFusion(t *testing.T) {
	rows := func(ndcg ...float64) []retrieval.Row {
		var out []retrieval.Row
		for i, m := range retrieval.FusionModes() {
			out = append(out, retrieval.Row{Mode: m, Scores: eval.Scores{NDCG10: ndcg[i]}})
		}
		return out
	}
	if c, err := retrieval.ChooseFusion(rows(0.5, 0.5, 0.5), "x/scifact", "train", 9); err != nil || c.Fusion != engine.DefaultFusion || !strings.Contains(c.Why, "scifact, split train, 9 judged") {
		t.Fatalf("tie: %+v, %v: want the default, %s", c, err, engine.DefaultFusion)
	}
	if c, _ := retrieval.ChooseFusion(rows(0.5, 0.4, 0.6), "d", "train", 1); c.Fusion != engine.FusionDBSF {
		t.Fatalf("best dbsf: got %s", c.Fusion)
	}
	if c, _ := retrieval.ChooseFusion(rows(0.6, 0.6, 0.5), "d", "train", 1); c.Fusion != engine.FusionRRF {
		t.Fatalf("best rrf and minmax: got %s, want the first, rrf", c.Fusion)
	}
	if _, err := retrieval.ChooseFusion(nil, "d", "train", 1); err == nil {
		t.Fatal("no rows: no error")
	}
}

type counting struct{ pairs int }

func (c *counting) Score(_ context.Context, q string, docs []string) ([]float32, error) {
	c.pairs += len(docs)
	out := make([]float32, len(docs))
	for i, d := range docs {
		out[i] = float32(len(d))
	}
	return out, nil
}

func TestPairCacheScoresEachPairOnce(t *testing.T) {
	rr := &counting{}
	c := retrieval.NewPairCache(rr)
	ctx := context.Background()
	a, _ := c.Score(ctx, "q", []string{"x", "yy"})
	b, _ := c.Score(ctx, "q", []string{"yy", "zzz", "x"})
	if rr.pairs != 3 || fmt.Sprint(a, b) != "[1 2] [2 3 1]" {
		t.Fatalf("scored %d pairs, got %v %v", rr.pairs, a, b)
	}
	var nilCache *retrieval.PairCache
	if _, err := nilCache.Score(ctx, "q", nil); err == nil {
		t.Fatal("nil cache: no error")
	}
}
