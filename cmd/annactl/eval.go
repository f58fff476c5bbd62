package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/anna-search/anna/beir"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/rerank"
)

func init() {
	register(command{name: "eval", summary: "evaluate retrieval on a BEIR folder (nDCG@10, Recall@100, MRR@10, MAP per mode)", run: runEval})
}

// evalModes maps the JSON keys of the report to engine modes, in print order.
var evalModes = []struct {
	key  string
	mode engine.Mode
	of   engine.Mode // the list a rerank mode rescores
}{
	{"bm25", engine.ModeLexical, ""},
	{"dense", engine.ModeDense, ""},
	{"hybrid", engine.ModeHybrid, ""},
	{"bm25+rerank", engine.ModeRerank, engine.ModeLexical},
	{"hybrid+rerank", engine.ModeRerank, engine.ModeHybrid},
}

func runEval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	split := fs.String("split", "test", "qrels split (qrels/SPLIT.tsv)")
	dir := fs.String("index", "", "anna directory to index into and keep (default: a temporary one)")
	model := fs.String("model", "", "model directory (default: the model recorded in --index, else the installed default)")
	reranker := fs.String("reranker", "", "cross-encoder model directory: adds the hybrid+rerank mode")
	rerankDepth := fs.Int("rerank-depth", 100, "fused candidates the cross-encoder rescores")
	modes := fs.String("modes", "", "comma-separated subset of bm25,dense,hybrid,bm25+rerank,hybrid+rerank (default: all that apply)")
	noCache := fs.Bool("no-cache", false, "do not use the embedding cache under $ANNA_HOME/cache")
	asJSON := fs.Bool("json", false, "print one JSON object keyed by mode")
	workers := fs.Int("workers", 2, "queries searched in parallel")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: annactl eval DATASET_DIR [flags]\n\nDATASET_DIR is a BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv.")
		fs.PrintDefaults()
	}
	var dataset string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dataset, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if dataset == "" && fs.NArg() == 1 {
		dataset = fs.Arg(0)
	}
	if dataset == "" {
		fs.Usage()
		return errUsage
	}
	ds, err := beir.Load(dataset, *split)
	if err != nil {
		return err
	}
	if *model == "" && *dir != "" {
		// An existing index (e.g. after `annactl reindex`) is evaluated
		// with the model it was built with.
		if *model, err = recordedModelDir(*dir); err != nil {
			return err
		}
	}
	enc, closeEnc, err := loadEncoder(ctx, *model, !*noCache)
	if err != nil {
		return err
	}
	defer closeEnc()
	opts := engine.Options{Encoder: enc, Model: *model, Logf: logf}
	if *reranker != "" {
		rr, err := rerank.Load(ctx, *reranker, rerank.Options{})
		if err != nil {
			return err
		}
		defer rr.Close()
		opts.Reranker = rr
	}
	idx := *dir
	if idx == "" {
		if idx, err = os.MkdirTemp("", "anna-eval-"); err != nil {
			return err
		}
		defer os.RemoveAll(idx)
	}
	eng, err := engine.Open(ctx, idx, opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	start := time.Now()
	if err := addCorpus(ctx, eng, ds.Corpus); err != nil {
		return err
	}
	indexTime := time.Since(start)

	want := map[string]bool{}
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			want[m] = true
		}
	}
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		if _, ok := ds.Queries[q]; ok {
			qids = append(qids, q)
		}
	}
	sort.Strings(qids)
	report := map[string]eval.Scores{}
	var order []string
	times := map[string]time.Duration{}
	for _, m := range evalModes {
		if len(want) > 0 && !want[m.key] {
			continue
		}
		if m.mode == engine.ModeRerank && opts.Reranker == nil {
			if want[m.key] {
				return fmt.Errorf("mode %s needs --reranker", m.key)
			}
			continue
		}
		t0 := time.Now()
		run, err := runQueries(ctx, eng, ds.Queries, qids, engine.SearchOptions{Mode: m.mode, K: 100, Depth: 100, RerankDepth: *rerankDepth, RerankOf: m.of}, *workers, m.key)
		if err != nil {
			return fmt.Errorf("mode %s: %w", m.key, err)
		}
		times[m.key] = time.Since(t0)
		report[m.key] = eval.Evaluate(run, ds.Qrels)
		order = append(order, m.key)
	}
	if *asJSON {
		out := map[string]map[string]any{}
		for k, s := range report {
			out[k] = map[string]any{"ndcg@10": s.NDCG10, "recall@100": s.Recall100, "mrr@10": s.MRR10, "map": s.MAP, "queries": s.Queries}
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	fmt.Printf("%s (split %s): %d documents, %d judged queries; indexed in %s\n", dataset, *split, len(ds.Corpus), len(qids), indexTime.Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tnDCG@10\tRecall@100\tMRR@10\tMAP\tms/query")
	for _, k := range order {
		s := report[k]
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.1f\n", k, s.NDCG10, s.Recall100, s.MRR10, s.MAP, float64(times[k].Microseconds())/1000/float64(max(1, len(qids))))
	}
	return tw.Flush()
}

// addCorpus indexes docs in batches, with progress on a terminal.
func addCorpus(ctx context.Context, eng *engine.Engine, docs []beir.Doc) error {
	p := newProgress("indexing", len(docs))
	defer p.done()
	const batch = 512
	kept := make([]engine.Document, 0, len(docs))
	for _, d := range docs {
		if !engine.IsEmpty(engine.Document(d)) {
			kept = append(kept, engine.Document(d))
		}
	}
	if n := len(docs) - len(kept); n > 0 {
		fmt.Fprintf(os.Stderr, "skipping %d documents with empty title and text\n", n)
	}
	for i := 0; i < len(kept); i += batch {
		if _, err := eng.Add(ctx, kept[i:min(i+batch, len(kept))]); err != nil {
			return err
		}
		p.update(min(i+batch, len(kept)), "docs")
	}
	return nil
}

// runQueries searches every query id with opts, workers at a time.
func runQueries(ctx context.Context, eng *engine.Engine, queries map[string]string, qids []string, opts engine.SearchOptions, workers int, label string) (map[string][]string, error) {
	run := make(map[string][]string, len(qids))
	var mu sync.Mutex
	var firstErr error
	ch := make(chan string)
	var wg sync.WaitGroup
	p := newProgress(label, len(qids))
	defer p.done()
	done := 0
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range ch {
				res, err := eng.Search(ctx, queries[q], opts)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("query %s: %w", q, err)
				}
				ids := make([]string, len(res))
				for i, r := range res {
					ids[i] = r.ID
				}
				run[q] = ids
				done++
				p.update(done, "queries")
				mu.Unlock()
			}
		}()
	}
	for _, q := range qids {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		ch <- q
	}
	close(ch)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return run, firstErr
}
