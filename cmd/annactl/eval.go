package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/report"
	"github.com/anna-search/anna/rerank"
)

// evalMode is one row of the retrieval report.
type evalMode struct {
	key  string
	mode engine.Mode
	of   engine.Mode // the list a rerank mode rescores
	rrf  bool        // the reranked list fused with the retrieval lists (RerankFusion)
	// fusion, when set, fuses the lists this way (--choose-fusion's rows)
	// instead of by the fusion flags.
	fusion engine.Fusion
}

// evalModes are the retrieval report's rows, in print order.
var evalModes = []evalMode{
	{"lexical", engine.ModeLexical, "", false, ""},
	{"dense", engine.ModeDense, "", false, ""},
	{"hybrid", engine.ModeHybrid, "", false, ""},
	{"lexical+rerank", engine.ModeRerank, engine.ModeLexical, false, ""},
	{"hybrid+rerank", engine.ModeRerank, engine.ModeHybrid, false, ""},
	{"lexical+rerank+rrf", engine.ModeRerank, engine.ModeLexical, true, ""},
	{"hybrid+rerank+rrf", engine.ModeRerank, engine.ModeHybrid, true, ""},
}

// choiceModes are --choose-fusion's rows: hybrid fused each way, equal
// weights, RRF first (a tie keeps the default).
var choiceModes = []evalMode{
	{"hybrid/rrf", engine.ModeHybrid, "", false, engine.FusionRRF},
	{"hybrid/minmax", engine.ModeHybrid, "", false, engine.FusionMinMax},
	{"hybrid/dbsf", engine.ModeHybrid, "", false, engine.FusionDBSF},
}

type evalFlags struct {
	task, split, dir, model, reranker, modes, runOut, rerankRun, report string
	instruction                                                         string
	rerankDepth, workers                                                int
	cache, asJSON, keepIdentical, record, chooseFusion                  bool
	chunks                                                              chunkFlags
	chunking                                                            *engine.Chunking
	cmd                                                                 *cobra.Command
	backend                                                             backendFlags
	fusion                                                              fusionFlags
	search                                                              engine.SearchOptions // the fusion flags, applied
}

func (a *app) evalCommand() *cobra.Command {
	var fl evalFlags
	cmd := &cobra.Command{
		Use:   "eval DATASET [flags]",
		Short: "evaluate retrieval on a BEIR folder (nDCG@10, Recall@100, MRR@10, MAP per mode), or similarity on STS pairs",
		Long: `--task retrieval (the default): DATASET is a BEIR folder (corpus.jsonl,
queries.jsonl, qrels/SPLIT.tsv). The corpus is indexed (into --index, else a
temporary directory) and every judged query is searched in each mode; the report
gives nDCG@10, Recall@100, MRR@10 and MAP per mode, computed as trec_eval does.
As in BEIR and MTEB, a hit whose document ID equals the query's ID is dropped
before scoring (collections whose queries are also documents would otherwise find
the query itself) — when that document is the query: its text contains the query's.
A hit that only shares the ID (sets whose queries and documents are numbered
independently, like CISI) is kept, and eval says so; --keep-identical-ids turns the
rule off.
--run-out FILE writes each mode's ranking as a TREC run (with several modes, the
mode goes before FILE's extension). --rerank-run FILE evaluates a given TREC run and
its top --rerank-depth reranked by --reranker (BEIR's reranking protocol); nothing
is indexed then. With --reranker the modes add lexical+rerank and hybrid+rerank
(the candidates' top --rerank-depth in the reranker's order) and +rrf variants
(the reranked list fused by RRF with the candidates' lists, the ANNA pipeline);
each pair is scored once across them. --record writes each rerank mode's
nDCG@10 against its candidates' into the reranker's manifest: anna uses an
installed reranker unasked (search --mode rerank, mine-negatives' teacher) only
where those measurements say it helps (measured with RRF, whatever the index
chose).

Hybrid search fuses by RRF unless the index records another fusion:
--choose-fusion (with --index DIR) measures hybrid fused by rrf, minmax and dbsf
(equal weights) on the split and records the best in DIR (RRF on a tie); the
index's searches use it when no --fusion is given, until a reindex to another
model (annactl stats shows it). Choose on a split you do not report
(--split train where the dataset has one): chosen on the test split, the test
split's number is flattered.

--task sts: DATASET is a folder of sentence pairs (SPLIT.jsonl with sentence1,
sentence2, score: STS-B, SICK); the report is Spearman's correlation between the
cosine of the two sentences' embeddings and the human scores, as MTEB computes it.

--task pairclass: DATASET is a folder of NLI pairs (SPLIT.jsonl with premise,
hypothesis, label: SNLI); the report is the average precision of the pairs'
cosine at telling entailment (positive) from contradiction (negative), neutral
pairs left out, as MTEB's pair classification computes it (scikit-learn's
average_precision_score).`,
		Example: `  annactl eval ../shared/datasets/scifact --split test
  annactl eval ../shared/datasets/scifact --modes lexical,dense --run-out runs/scifact.trec
  annactl eval ../shared/datasets/scifact --rerank-run runs/scifact.lexical.trec --reranker RERANKER_DIR
  annactl eval ../shared/datasets/scifact --index idx --reranker anna-reranker-minilm --record
  annactl eval ../shared/datasets/scifact --index idx --split train --choose-fusion
  annactl eval ../shared/datasets/stsbenchmark --task sts
  annactl eval ../shared/datasets/snli --task pairclass`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want one DATASET folder, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := oneOf("task", fl.task, "retrieval", "sts", "pairclass"); err != nil {
				return err
			}
			if err := atLeast("rerank-depth", fl.rerankDepth, 1); err != nil {
				return err
			}
			if err := atLeast("workers", fl.workers, 1); err != nil {
				return err
			}
			var err error
			if fl.chunking, err = fl.chunks.chunking(cmd); err != nil {
				return err
			}
			fl.cmd = cmd
			if err := fl.fusion.apply(&fl.search); err != nil {
				return err
			}
			if fusionGiven(fl.search) {
				if fl.task != "retrieval" || fl.rerankRun != "" {
					return usageErrorf("--fusion, --weight and --rrf-k fuse the engine's lists: not with --task %s or --rerank-run", fl.task)
				}
				if fl.record && fusionLabel(fl.search) != "" {
					return usageErrorf("--record measures the reranker with RRF (k = 60, equal weights): not with --fusion minmax or dbsf, --weight or --rrf-k")
				}
				if fl.chooseFusion {
					return usageErrorf("--choose-fusion measures each fusion with equal weights: not with --fusion, --weight or --rrf-k")
				}
			}
			if fl.record {
				fl.search.Fusion = engine.FusionRRF // whatever the index chose
			}
			if fl.chooseFusion {
				switch {
				case fl.task != "retrieval" || fl.rerankRun != "":
					return usageErrorf("--choose-fusion measures hybrid retrieval: not with --task %s or --rerank-run", fl.task)
				case fl.dir == "":
					return usageErrorf("--choose-fusion records its choice in the index: it needs --index DIR")
				case fl.modes != "" || fl.reranker != "" || fl.record:
					return usageErrorf("--choose-fusion measures its own rows (hybrid by rrf, minmax, dbsf): not with --modes, --reranker or --record")
				}
			}
			if fl.task != "retrieval" {
				return a.evalPairs(cmd.Context(), args[0], fl)
			}
			if fl.record && (fl.reranker == "" || fl.rerankRun != "") {
				return usageErrorf("--record writes the rerank modes' gains into the reranker's manifest: it needs --reranker DIR and no --rerank-run")
			}
			if fl.rerankRun != "" {
				return a.evalRerankRun(cmd.Context(), args[0], fl)
			}
			return a.evalRetrieval(cmd.Context(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.task, "task", "retrieval", "retrieval (BEIR folder), sts (scored sentence pairs) or pairclass (NLI pairs)")
	f.StringVar(&fl.split, "split", "", "split: qrels/SPLIT.tsv (default test), or SPLIT.jsonl for --task sts and pairclass (default test, else test_annotated)")
	indexFlag(cmd, &fl.dir, "anna directory `DIR` to index into and keep (default: a temporary one)")
	modelVar(f, &fl.model, "model", "", "model directory `DIR` (default: the model recorded in --index, else the installed default)")
	modelVar(f, &fl.reranker, "reranker", "", "cross-encoder model directory `DIR`: adds the rerank modes")
	f.IntVar(&fl.rerankDepth, "rerank-depth", 100, "candidates the cross-encoder rescores")
	f.StringVar(&fl.modes, "modes", "", "comma-separated subset of lexical,dense,hybrid,lexical+rerank,hybrid+rerank,lexical+rerank+rrf,hybrid+rerank+rrf (+rrf: the reranked list fused with the retrieval lists by RRF; default: all that apply)")
	f.BoolVar(&fl.cache, "cache", true, "use the embedding cache under $ANNA_HOME/cache")
	f.BoolVar(&fl.asJSON, "json", false, "print one JSON object keyed by mode")
	f.IntVar(&fl.workers, "workers", 2, "queries searched in parallel")
	f.BoolVar(&fl.keepIdentical, "keep-identical-ids", false, "keep hits whose document ID equals the query ID (BEIR drops them)")
	f.StringVar(&fl.runOut, "run-out", "", "write each mode's ranking as a TREC run to `FILE`")
	f.StringVar(&fl.rerankRun, "rerank-run", "", "rerank the top --rerank-depth of this TREC run `FILE` with --reranker")
	f.BoolVar(&fl.chooseFusion, "choose-fusion", false, "measure hybrid fused by rrf, minmax and dbsf on the split and record the best in --index as its fusion (RRF on a tie)")
	f.BoolVar(&fl.record, "record", false, "write each rerank mode's nDCG@10 against its candidates' into the reranker's manifest (what decides whether anna uses it unasked: annactl models list)")
	fl.chunks.register(cmd)
	fl.backend.register(cmd)
	fl.fusion.register(cmd)
	f.StringVar(&fl.instruction, "instruction", "", "task instruction on every query, with the model's template (instruction-tuned and decoder embedders); for sts and pairclass, on every sentence")
	f.StringVar(&fl.report, "report", "", "also draw the modes side by side (bar charts and a table) in a self-contained HTML `FILE`")
	return cmd
}

// selectModes parses --modes against the modes that apply.
func selectModes(list string, haveReranker bool) ([]evalMode, error) {
	var want []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			want = append(want, m)
		}
	}
	if len(want) == 0 {
		var out []evalMode
		for _, m := range evalModes {
			if m.mode != engine.ModeRerank || haveReranker {
				out = append(out, m)
			}
		}
		return out, nil
	}
	var out []evalMode
	for _, w := range want {
		found := false
		for _, m := range evalModes {
			if m.key == w {
				if m.mode == engine.ModeRerank && !haveReranker {
					return nil, usageErrorf("--modes %s needs --reranker DIR", w)
				}
				out = append(out, m)
				found = true
			}
		}
		if !found {
			keys := make([]string, len(evalModes))
			for i, m := range evalModes {
				keys[i] = m.key
			}
			return nil, usageErrorf("--modes: unknown mode %q (want %s)", w, strings.Join(keys, ", "))
		}
	}
	return out, nil
}

// modeRow is one mode's result.
type modeRow struct {
	key    string
	scores eval.Scores
	took   time.Duration
}

func (a *app) evalRetrieval(ctx context.Context, dataset string, fl evalFlags) error {
	split := fl.split
	if split == "" {
		split = "test"
	}
	modes, err := selectModes(fl.modes, fl.reranker != "")
	if err != nil {
		return err
	}
	if fl.chooseFusion {
		modes = choiceModes
	}
	if fl.record {
		if err := recordableModes(modes); err != nil {
			return err
		}
	}
	ds, err := beir.Load(dataset, split)
	if err != nil {
		return err
	}
	opts := engine.Options{Model: fl.model, Logf: a.logf}
	if err := fl.backend.apply(fl.cmd, &opts); err != nil {
		return err
	}
	if fl.chunking != nil {
		opts.Chunking = *fl.chunking
	}
	if fl.cache {
		opts.EmbeddingCache = home.EmbeddingCacheDir()
	}
	if fl.reranker != "" {
		rr, err := rerank.Load(ctx, fl.reranker, rerank.Options{})
		if err != nil {
			return err
		}
		defer rr.Close()
		// The rerank modes' candidates overlap: each pair is scored once.
		opts.Reranker = newPairCache(rr)
	}
	idx := fl.dir
	if idx == "" {
		if idx, err = os.MkdirTemp("", "anna-eval-"); err != nil {
			return err
		}
		defer os.RemoveAll(idx)
		// A temporary directory gets a Weaviate alias of its own.
		drop := fl.backend.scratch(&opts)
		defer func() {
			if derr := drop(); derr != nil {
				a.logf("%v", derr)
			}
		}()
	}
	eng, err := engine.Open(ctx, idx, opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	start := time.Now()
	if err := a.addCorpus(ctx, eng, ds.Corpus); err != nil {
		return err
	}
	indexTime := time.Since(start)
	qids := judgedQueries(ds)
	isQuery, said := isQueryDoc(ds), false
	var rows []modeRow
	for _, m := range modes {
		t0 := time.Now()
		opts := fl.search
		opts.Mode, opts.K, opts.Depth, opts.RerankDepth, opts.RerankOf, opts.RerankFusion = m.mode, 100, 100, fl.rerankDepth, m.of, m.rrf
		opts.Prompt = engine.Prompt{Instruction: fl.instruction}
		if m.fusion != "" {
			opts.Fusion = m.fusion
		}
		run, err := a.searchAll(ctx, eng, ds.Queries, qids, opts, fl.workers, m.key)
		if err != nil {
			return fmt.Errorf("mode %s: %w", m.key, err)
		}
		took := time.Since(t0)
		if err := a.finishRun(run, m.key, len(modes) > 1, fl, isQuery, &said); err != nil {
			return err
		}
		rows = append(rows, modeRow{m.key, eval.Evaluate(run.IDs(), ds.Qrels), took})
	}
	header := fmt.Sprintf("%s (split %s): %d documents, %d judged queries; indexed in %s", dataset, split, len(ds.Corpus), len(qids), indexTime.Round(time.Millisecond))
	if fl.chooseFusion {
		c := chooseFusion(rows, dataset, split, len(qids))
		if err := eng.SetFusion(c); err != nil {
			return err
		}
		a.logf("eval: recorded in %s: hybrid fuses by %s (%s)", idx, c.Fusion, c.Why)
		if split == "test" {
			a.logf("eval: chosen on the test split: that split's hybrid number is flattered by the choice; choose on --split train where the dataset has one")
		}
	} else {
		eff := fl.search
		if eff.Fusion == "" {
			st, err := eng.Stats()
			if err != nil {
				return err
			}
			eff.Fusion = st.Fusion
		}
		if l := fusionLabel(eff); l != "" {
			header += "; fused by " + l
			if fl.search.Fusion == "" {
				header += " (the index's choice)"
			}
		}
	}
	if err := writeEvalReport(fl.report, dataset, split, rows, len(qids)); err != nil {
		return err
	}
	if fl.record {
		ms := measurements(dataset, split, fl.rerankDepth, eng.Model().Fingerprint, rows, len(qids))
		if err := model.RecordMeasurements(fl.reranker, ms); err != nil {
			return err
		}
		for _, m := range ms {
			how := "replacing their order"
			if m.Fusion {
				how = "fused with their lists by RRF"
			}
			a.logf("eval: recorded in %s: %s top %d reranked, %s: nDCG@10 %.4f → %.4f", fl.reranker, m.Candidates, m.Depth, how, m.Before, m.After)
		}
	}
	return a.printEval(header, rows, len(qids), fl.asJSON)
}

// finishRun applies BEIR's identical-ID rule and writes --run-out. The
// first time hits are kept that share their query's ID but are other
// documents, it says so.
func (a *app) finishRun(run eval.Run, key string, several bool, fl evalFlags, isQuery func(string) bool, said *bool) error {
	if !fl.keepIdentical {
		if _, kept := run.DropIdentical(isQuery); kept > 0 && !*said {
			*said = true
			a.logf("eval: %d hits (mode %s) share their query's ID but are other documents (their text does not contain the query's): kept, where BEIR would drop them on the ID alone", kept, key)
		}
	}
	if fl.runOut == "" {
		return nil
	}
	path := fl.runOut
	if several {
		ext := filepath.Ext(path)
		path = strings.TrimSuffix(path, ext) + "." + strings.ReplaceAll(key, "+", "-") + ext
	}
	return atomicfile.Write(path, func(f io.Writer) error { return eval.WriteTREC(f, run, "anna-"+strings.ReplaceAll(key, "+", "-")) })
}

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
	rr, err := rerank.Load(ctx, fl.reranker, rerank.Options{})
	if err != nil {
		return err
	}
	defer rr.Close()
	texts := make(map[string]string, len(ds.Corpus))
	for _, d := range ds.Corpus {
		texts[d.ID] = engine.EmbedText(engine.Document(d))
	}
	qids := judgedQueries(ds)
	base := eval.Run{}
	for _, q := range qids {
		base[q] = given[q]
	}
	t0 := time.Now()
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
				return fmt.Errorf("%s: query %s ranks document %q, which %s/corpus.jsonl does not hold", fl.rerankRun, q, h.ID, dataset)
			}
			docs[j] = t
		}
		scores, err := rr.Score(ctx, ds.Queries[q], docs)
		if err != nil {
			p.done()
			return err
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
	took := time.Since(t0)
	isQuery, said := isQueryDoc(ds), false
	var rows []modeRow
	for _, r := range []struct {
		key  string
		run  eval.Run
		took time.Duration
	}{{"run", base, 0}, {"run+rerank", reranked, took}} {
		if err := a.finishRun(r.run, r.key, true, fl, isQuery, &said); err != nil {
			return err
		}
		rows = append(rows, modeRow{r.key, eval.Evaluate(r.run.IDs(), ds.Qrels), r.took})
	}
	header := fmt.Sprintf("%s (split %s): run %s, top %d reranked by %s", dataset, split, fl.rerankRun, fl.rerankDepth, fl.reranker)
	if err := writeEvalReport(fl.report, dataset, split, rows, len(qids)); err != nil {
		return err
	}
	return a.printEval(header, rows, len(qids), fl.asJSON)
}

// isQueryDoc says whether the document with a query's ID is that query:
// its text (title and text joined) contains the query's, whitespace and
// case aside. On BEIR's sets whose queries are documents this holds (the
// query is the document, or its title); on sets numbered independently it
// does not, and a hit that only shares the query's ID is kept.
func isQueryDoc(ds *beir.Dataset) func(qid string) bool {
	docs := make(map[string]string, len(ds.Corpus))
	for _, d := range ds.Corpus {
		docs[d.ID] = engine.EmbedText(engine.Document(d))
	}
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	return func(qid string) bool {
		d, ok := docs[qid]
		q := norm(ds.Queries[qid])
		return ok && q != "" && strings.Contains(norm(d), q)
	}
}

func judgedQueries(ds *beir.Dataset) []string {
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		if _, ok := ds.Queries[q]; ok {
			qids = append(qids, q)
		}
	}
	sort.Strings(qids)
	return qids
}

func (a *app) printEval(header string, rows []modeRow, queries int, asJSON bool) error {
	if asJSON {
		out := map[string]map[string]any{}
		for _, r := range rows {
			s := r.scores
			out[r.key] = map[string]any{"ndcg@10": s.NDCG10, "recall@100": s.Recall100, "mrr@10": s.MRR10, "map": s.MAP, "queries": s.Queries}
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	fmt.Fprintln(a.stdout, header)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tnDCG@10\tRecall@100\tMRR@10\tMAP\tms/query")
	for _, r := range rows {
		s := r.scores
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.1f\n", r.key, s.NDCG10, s.Recall100, s.MRR10, s.MAP, float64(r.took.Microseconds())/1000/float64(max(1, queries)))
	}
	return tw.Flush()
}

// addCorpus indexes docs in batches, with progress on a terminal.
func (a *app) addCorpus(ctx context.Context, eng *engine.Engine, docs []beir.Doc) error {
	p := a.progress("indexing", len(docs))
	defer p.done()
	const batch = 512
	kept := make([]engine.Document, 0, len(docs))
	for _, d := range docs {
		if !engine.IsEmpty(engine.Document(d)) {
			kept = append(kept, engine.Document(d))
		}
	}
	if n := len(docs) - len(kept); n > 0 {
		fmt.Fprintf(a.stderr, "skipping %d documents with empty title and text\n", n)
	}
	for i := 0; i < len(kept); i += batch {
		if _, err := eng.Add(ctx, kept[i:min(i+batch, len(kept))]); err != nil {
			return err
		}
		p.update(min(i+batch, len(kept)), "docs")
	}
	return nil
}

// searchAll searches every query ID with opts, workers at a time.
func (a *app) searchAll(ctx context.Context, eng *engine.Engine, queries map[string]string, qids []string, opts engine.SearchOptions, workers int, label string) (eval.Run, error) {
	run := make(eval.Run, len(qids))
	var mu sync.Mutex
	var firstErr error
	ch := make(chan string)
	var wg sync.WaitGroup
	p := a.progress(label, len(qids))
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
				hits := make([]eval.Hit, len(res))
				for i, r := range res {
					hits[i] = eval.Hit{ID: r.ID, Score: r.Score}
				}
				run[q] = hits
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

// evalPairs embeds sentence pairs and reports, for --task sts, Spearman's
// correlation of their cosines with human similarity scores, or for --task
// pairclass the average precision of their cosines at telling entailment
// from contradiction.
func (a *app) evalPairs(ctx context.Context, dataset string, fl evalFlags) error {
	if fl.dir != "" || fl.reranker != "" || fl.modes != "" || fl.runOut != "" || fl.report != "" {
		return usageErrorf("--task %s embeds sentence pairs: --index, --reranker, --modes, --run-out and --report do not apply", fl.task)
	}
	split := fl.split
	if split == "" {
		split = "test"
		if _, err := os.Stat(filepath.Join(dataset, "test.jsonl")); err != nil {
			split = "test_annotated"
		}
	}
	path := filepath.Join(dataset, split+".jsonl")
	// gold is the STS score, or 1 for entailment and 0 for contradiction.
	var s1, s2 []string
	var gold []float64
	if fl.task == "sts" {
		pairs, err := eval.ReadPairsFile(path)
		if err != nil {
			return err
		}
		for _, p := range pairs {
			s1, s2, gold = append(s1, p.S1), append(s2, p.S2), append(gold, p.Score)
		}
	} else {
		pairs, err := eval.ReadNLIPairsFile(path)
		if err != nil {
			return err
		}
		for _, p := range pairs {
			if p.Label != "neutral" {
				s1, s2 = append(s1, p.Premise), append(s2, p.Hypothesis)
				g := 0.0
				if p.Label == "entailment" {
					g = 1
				}
				gold = append(gold, g)
			}
		}
		if len(gold) == 0 {
			return fmt.Errorf("eval: %s: no entailment or contradiction pairs", path)
		}
	}
	var enc encoder.Encoder
	var ort *encoder.ORTEncoder
	var err error
	if fl.model == "" {
		ort, err = encoder.Default(ctx)
	} else {
		ort, err = encoder.Load(ctx, fl.model, encoder.Options{})
	}
	if err != nil {
		return err
	}
	defer ort.Close()
	enc = ort
	if fl.cache {
		if enc, err = encoder.NewCache(ort, home.EmbeddingCacheDir()); err != nil {
			return err
		}
	}
	// Each distinct sentence once: as a document, or with --instruction as
	// a query under it (both sides alike, as MTEB instructs decoder
	// embedders on symmetric tasks).
	index := map[string]int{}
	var texts []string
	for _, s := range slices.Concat(s1, s2) {
		if _, ok := index[s]; !ok {
			index[s] = len(texts)
			texts = append(texts, s)
		}
	}
	t0 := time.Now()
	var vecs [][]float32
	if fl.instruction != "" {
		vecs, err = enc.EmbedQueries(ctx, texts, encoder.Prompt{Instruction: fl.instruction})
	} else {
		vecs, err = enc.EmbedDocuments(ctx, texts)
	}
	if err != nil {
		return err
	}
	cos := make([]float64, len(gold))
	for i := range gold {
		cos[i] = eval.Cosine(vecs[index[s1[i]]], vecs[index[s2[i]]])
	}
	metric, name, label := "spearman", "Spearman (cosine vs. score)", "pairs"
	var v float64
	if fl.task == "sts" {
		v = eval.Spearman(cos, gold)
	} else {
		metric, name, label = "ap", "average precision (cosine, entailment vs. contradiction)", "entailment/contradiction pairs"
		pos := make([]bool, len(gold))
		for i, g := range gold {
			pos[i] = g == 1
		}
		v = eval.AveragePrecision(cos, pos)
	}
	if math.IsNaN(v) {
		return fmt.Errorf("eval: %s (split %s): %s undefined: every pair has the same cosine or the same gold score", dataset, split, name)
	}
	if fl.asJSON {
		out := map[string]any{"task": fl.task, "dataset": dataset, "split": split, "pairs": len(gold), metric: v, "model": enc.Fingerprint()}
		if fl.instruction != "" {
			out["instruction"] = fl.instruction
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	fmt.Fprintf(a.stdout, "%s (split %s): %d %s, %d sentences embedded in %s\n%s: %.4f\n",
		dataset, split, len(gold), label, len(texts), time.Since(t0).Round(time.Millisecond), name, v)
	return nil
}

// writeEvalReport draws the modes side by side into path (nothing when
// path is "").
func writeEvalReport(path, dataset, split string, rows []modeRow, queries int) error {
	if path == "" {
		return nil
	}
	run := report.EvalRun{Dataset: fmt.Sprintf("%s (%s)", filepath.Base(filepath.Clean(dataset)), split), Queries: queries}
	for _, r := range rows {
		s := r.scores
		run.Modes = append(run.Modes, report.ModeScores{Mode: r.key, NDCG10: s.NDCG10, Recall100: s.Recall100, MRR10: s.MRR10, MAP: s.MAP,
			MsPerQuery: float64(r.took.Microseconds()) / 1000 / float64(max(1, queries))})
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		return report.WriteEval(f, "anna eval: "+dataset, []report.EvalRun{run})
	})
}

// recordableModes checks that every rerank mode's candidates are evaluated
// too (the measurement compares the two), and that there is one.
func recordableModes(modes []evalMode) error {
	have := map[string]bool{}
	for _, m := range modes {
		have[m.key] = true
	}
	n := 0
	for _, m := range modes {
		if m.mode == engine.ModeRerank {
			if !have[string(m.of)] {
				return usageErrorf("--record: mode %s is measured against mode %s; add it to --modes", m.key, m.of)
			}
			n++
		}
	}
	if n == 0 {
		return usageErrorf("--record: --modes has no rerank mode")
	}
	return nil
}

// measurements are the rerank rows' nDCG@10 against their candidates'.
func measurements(dataset, split string, depth int, embedder string, rows []modeRow, queries int) []model.Measurement {
	by := map[string]eval.Scores{}
	for _, r := range rows {
		by[r.key] = r.scores
	}
	now := time.Now().UTC().Format(time.RFC3339)
	var out []model.Measurement
	for _, m := range evalModes {
		after, ok := by[m.key]
		if m.mode != engine.ModeRerank || !ok {
			continue
		}
		x := model.Measurement{Dataset: filepath.Base(filepath.Clean(dataset)), Split: split, Candidates: string(m.of), Depth: depth, Fusion: m.rrf,
			Metric: "ndcg@10", Before: by[string(m.of)].NDCG10, After: after.NDCG10, Queries: queries, Date: now}
		if m.of != engine.ModeLexical {
			x.Embedder = embedder
		}
		out = append(out, x)
	}
	return out
}

// pairCache scores each (query, document) pair once across an
// evaluation's rerank modes, whose candidate lists overlap. A pair's score
// can differ from a fresh one by rounding only (it was computed in another
// batch).
type pairCache struct {
	rr     engine.Reranker
	mu     sync.Mutex
	scores map[[2]string]float32
}

func newPairCache(rr engine.Reranker) *pairCache {
	return &pairCache{rr: rr, scores: map[[2]string]float32{}}
}

func (c *pairCache) Score(ctx context.Context, query string, docs []string) ([]float32, error) {
	out := make([]float32, len(docs))
	var miss []int
	c.mu.Lock()
	for i, d := range docs {
		if v, ok := c.scores[[2]string{query, d}]; ok {
			out[i] = v
		} else {
			miss = append(miss, i)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	texts := make([]string, len(miss))
	for j, i := range miss {
		texts[j] = docs[i]
	}
	scores, err := c.rr.Score(ctx, query, texts)
	if err != nil {
		return nil, err
	}
	if len(scores) != len(texts) {
		return nil, fmt.Errorf("the reranker returned %d scores for %d documents", len(scores), len(texts))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, i := range miss {
		out[i] = scores[j]
		c.scores[[2]string{query, docs[i]}] = scores[j]
	}
	return out, nil
}

// fusionGiven reports whether the fusion flags said anything.
func fusionGiven(o engine.SearchOptions) bool {
	return o.Fusion != "" || o.RRFK != 0 || o.Weights != nil
}

// chooseFusion picks --choose-fusion's best row by nDCG@10 (the first, RRF,
// on a tie) and says why.
func chooseFusion(rows []modeRow, dataset, split string, queries int) engine.FusionChoice {
	best := 0
	var parts []string
	for i, r := range rows {
		if r.scores.NDCG10 > rows[best].scores.NDCG10 {
			best = i
		}
		parts = append(parts, fmt.Sprintf("%s %.4f", choiceModes[i].fusion, r.scores.NDCG10))
	}
	return engine.FusionChoice{
		Fusion: choiceModes[best].fusion,
		Why:    fmt.Sprintf("chosen by annactl eval on %s, split %s, %d judged queries: hybrid nDCG@10 %s", filepath.Base(filepath.Clean(dataset)), split, queries, strings.Join(parts, ", ")),
	}
}

// fusionLabel says how o fuses the lists, e.g. "dbsf, dense×2"; "" for
// RRF with k = 60 and equal weights, and for the index's fusion ("") with
// no other flag.
func fusionLabel(o engine.SearchOptions) string {
	if (o.Fusion == engine.FusionRRF || o.Fusion == "") && o.RRFK == 0 && o.Weights == nil {
		return ""
	}
	s := string(o.Fusion)
	if o.RRFK != 0 {
		s += fmt.Sprintf(" k=%d", o.RRFK)
	}
	for _, l := range []string{"lexical", "dense", "rerank"} {
		if w, ok := o.Weights[l]; ok {
			s += fmt.Sprintf(", %s×%g", l, w)
		}
	}
	return s
}
