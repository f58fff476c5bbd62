package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/eval/retrieval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/rerank"
)

// evalRerankRun evaluates a given TREC run and its top-N reranked.
func (a *app) evalRerankRun(ctx context.Context, dataset string, fl evalFlags) error {
	if fl.reranker == "" {
		return usageErrorf("--rerank-run needs --reranker DIR")
	}
	if fl.modes != "" || fl.dir != "" {
		return usageErrorf("--rerank-run evaluates the given run: --modes and --index do not apply")
	}
	split := fl.split
	if split == "" {
		split = "test"
	}
	ds, err := beir.Load(dataset, split)
	if err != nil {
		return err
	}
	f, err := os.Open(fl.rerankRun)
	if err != nil {
		return err
	}
	given, err := eval.ReadTREC(f, fl.rerankRun)
	f.Close()
	if err != nil {
		return err
	}
	dir, err := modelDir(fl.reranker)
	if err != nil {
		return err
	}
	rr, err := rerank.Load(ctx, dir, rerank.Options{})
	if err != nil {
		return err
	}
	defer rr.Close()
	qids := retrieval.JudgedQueries(ds)
	base := eval.Run{}
	for _, q := range qids {
		base[q] = given[q]
	}
	t0 := time.Now()
	reranked, err := a.rerankGiven(ctx, rr, ds, base, qids, fl, dataset)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	isQuery, said := retrieval.IsQueryDoc(ds), false
	var rows []retrieval.Row
	for _, r := range []struct {
		key  string
		run  eval.Run
		took time.Duration
	}{{"run", base, 0}, {"run+rerank", reranked, took}} {
		if err := a.finishRun(r.run, r.key, true, fl, isQuery, &said); err != nil {
			return err
		}
		rows = append(rows, retrieval.Row{Mode: retrieval.Mode{Key: r.key}, Scores: eval.Evaluate(r.run.IDs(), ds.Qrels), Took: r.took})
	}
	header := fmt.Sprintf("%s (split %s): run %s, top %d reranked by %s", dataset, split, fl.rerankRun, fl.rerankDepth, fl.reranker)
	if err := writeEvalReport(fl.report, dataset, split, rows, len(qids)); err != nil {
		return err
	}
	return a.printEval(header, rows, len(qids), fl.asJSON)
}

// rerankGiven reranks the top --rerank-depth of each query's hits in base.
func (a *app) rerankGiven(ctx context.Context, rr *rerank.Model, ds *beir.Dataset, base eval.Run, qids []string, fl evalFlags, dataset string) (eval.Run, error) {
	texts := make(map[string]string, len(ds.Corpus))
	for _, d := range ds.Corpus {
		texts[d.ID] = engine.EmbedText(engine.Document(d))
	}
	reranked := eval.Run{}
	p := a.progress("reranking", len(qids))
	for i, q := range qids {
		hits := base[q]
		top := hits[:min(len(hits), fl.rerankDepth)]
		docs := make([]string, len(top))
		for j, h := range top {
			t, ok := texts[h.ID]
			if !ok {
				p.done()
				return nil, fmt.Errorf("%s: query %s ranks document %q, which %s/corpus.jsonl does not hold", fl.rerankRun, q, h.ID, dataset)
			}
			docs[j] = t
		}
		scores, err := rr.Score(ctx, ds.Queries[q], docs)
		if err != nil {
			p.done()
			return nil, err
		}
		out := make([]eval.Hit, len(top))
		for j, h := range top {
			out[j] = eval.Hit{ID: h.ID, Score: float64(scores[j])}
		}
		sort.SliceStable(out, func(x, y int) bool { return out[x].Score > out[y].Score })
		reranked[q] = append(out, hits[len(top):]...)
		p.update(i+1, "queries")
	}
	p.done()
	return reranked, nil
}
