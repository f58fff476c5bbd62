package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/eval/retrieval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/report"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
	"github.com/anna-search/anna/rerank"
)

// annactl eval: the flags and the retrieval task, a front for package
// retrieval; evalrerank.go has --rerank-run, evalpairs.go --task sts and
// pairclass.

type evalFlags struct {
	task, split, dir, model, reranker, modes, runOut, rerankRun, report string
	precision                                                           string
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

// evalLong is eval's help.
const evalLong = `--task retrieval (the default): DATASET is a BEIR folder (corpus.jsonl,
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

Hybrid search fuses by dbsf unless the index records another fusion:
--choose-fusion (with --index DIR) measures hybrid fused by rrf, minmax and dbsf
(equal weights) on the split and records the best in DIR (dbsf on a tie); the
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
average_precision_score).`

func (a *app) evalCommand() *cobra.Command {
	var fl evalFlags
	cmd := &cobra.Command{
		Use:   "eval DATASET [flags]",
		Short: "evaluate retrieval on a BEIR folder (nDCG@10, Recall@100, MRR@10, MAP per mode), or similarity on STS pairs",
		Long:  evalLong,
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
			if err := fl.check(cmd); err != nil {
				return err
			}
			return a.runEval(cmd.Context(), args[0], fl)
		},
	}
	fl.register(cmd)
	return cmd
}

func (fl *evalFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fl.task, "task", "retrieval", "retrieval (BEIR folder), sts (scored sentence pairs) or pairclass (NLI pairs)")
	f.StringVar(&fl.split, "split", "", "split: qrels/SPLIT.tsv (default test), or SPLIT.jsonl for --task sts and pairclass (default test, else test_annotated)")
	indexFlag(cmd, &fl.dir, "anna directory `DIR` to index into and keep (default: a temporary one)")
	modelVar(f, &fl.model, "model", "", "model directory `DIR` (default: the model recorded in --index, else the installed default)")
	f.StringVar(&fl.precision, "precision", "", "the model's weights when the corpus is indexed anew, as annactl index --precision: int8 (the default for "+int8DefaultNames()+") or float32 (the default for every other model)")
	modelVar(f, &fl.reranker, "reranker", "", "cross-encoder model directory `DIR`: adds the rerank modes")
	f.IntVar(&fl.rerankDepth, "rerank-depth", 100, "candidates the cross-encoder rescores")
	f.StringVar(&fl.modes, "modes", "", "comma-separated subset of lexical,dense,hybrid,lexical+rerank,hybrid+rerank,lexical+rerank+rrf,hybrid+rerank+rrf (+rrf: the reranked list fused with the retrieval lists by RRF; default: all that apply)")
	f.BoolVar(&fl.cache, "cache", true, "use the embedding cache under $ANNA_HOME/cache")
	f.BoolVar(&fl.asJSON, "json", false, "print one JSON object keyed by mode")
	f.IntVar(&fl.workers, "workers", 2, "queries searched in parallel")
	f.BoolVar(&fl.keepIdentical, "keep-identical-ids", false, "keep hits whose document ID equals the query ID (BEIR drops them)")
	f.StringVar(&fl.runOut, "run-out", "", "write each mode's ranking as a TREC run to `FILE`")
	f.StringVar(&fl.rerankRun, "rerank-run", "", "rerank the top --rerank-depth of this TREC run `FILE` with --reranker")
	f.BoolVar(&fl.chooseFusion, "choose-fusion", false, "measure hybrid fused by rrf, minmax and dbsf on the split and record the best in --index as its fusion (dbsf on a tie)")
	f.BoolVar(&fl.record, "record", false, "write each rerank mode's nDCG@10 against its candidates' into the reranker's manifest (what decides whether anna uses it unasked: annactl models list)")
	fl.chunks.register(cmd)
	fl.backend.register(cmd)
	fl.fusion.register(cmd)
	f.StringVar(&fl.instruction, "instruction", "", "task instruction on every query, with the model's template (instruction-tuned and decoder embedders); for sts and pairclass, on every sentence")
	f.StringVar(&fl.report, "report", "", "also draw the modes side by side (bar charts and a table) in a self-contained HTML `FILE`")
}

// check validates the flags and makes the search options and chunking.
func (fl *evalFlags) check(cmd *cobra.Command) error {
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
	if retrieval.FusionGiven(fl.search) {
		if fl.task != "retrieval" || fl.rerankRun != "" {
			return usageErrorf("--fusion, --weight and --rrf-k fuse the engine's lists: not with --task %s or --rerank-run", fl.task)
		}
		if s := fl.search; fl.record && (s.Fusion != engine.FusionRRF || s.Weights != nil || s.RRFK != 0) {
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
	return nil
}

// runEval evaluates: sentence pairs (--task sts, pairclass), a given run
// reranked (--rerank-run), or retrieval.
func (a *app) runEval(ctx context.Context, dataset string, fl evalFlags) error {
	if fl.task != "retrieval" {
		return a.evalPairs(ctx, dataset, fl)
	}
	if fl.record && (fl.reranker == "" || fl.rerankRun != "") {
		return usageErrorf("--record writes the rerank modes' gains into the reranker's manifest: it needs --reranker DIR and no --rerank-run")
	}
	if fl.rerankRun != "" {
		return a.evalRerankRun(ctx, dataset, fl)
	}
	return a.evalRetrieval(ctx, dataset, fl)
}

func (a *app) evalRetrieval(ctx context.Context, dataset string, fl evalFlags) error {
	split := fl.split
	if split == "" {
		split = "test"
	}
	modes, err := evalModes(fl)
	if err != nil {
		return err
	}
	if err := catalog.CheckPrecision(fl.precision); err != nil {
		return usageErrorf("--precision: %v", err)
	}
	ds, err := beir.Load(dataset, split)
	if err != nil {
		return err
	}
	eng, idx, closeEng, err := a.evalEngine(ctx, fl)
	defer closeEng()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := a.addCorpus(ctx, eng, ds.Corpus); err != nil {
		return err
	}
	indexTime := time.Since(start)
	qids := retrieval.JudgedQueries(ds)
	isQuery, said := retrieval.IsQueryDoc(ds), false
	rows, err := retrieval.Evaluate(ctx, eng, ds, qids, modes, retrieval.Options{
		Search: fl.search, RerankDepth: fl.rerankDepth, Instruction: fl.instruction, Workers: fl.workers,
		Progress: a.queryProgress,
		Finish: func(m retrieval.Mode, run eval.Run) error {
			return a.finishRun(run, m.Key, len(modes) > 1, fl, isQuery, &said)
		},
	})
	if err != nil {
		return err
	}
	header := fmt.Sprintf("%s (split %s): %d documents, %d judged queries; indexed in %s", dataset, split, len(ds.Corpus), len(qids), indexTime.Round(time.Millisecond))
	if name := eng.Model().Name; name != "" {
		header += " with " + name
	}
	if fl.chooseFusion {
		if err := a.chooseFusion(eng, idx, rows, dataset, split, len(qids)); err != nil {
			return err
		}
	} else {
		l, err := fusionNote(eng, fl.search)
		if err != nil {
			return err
		}
		header += l
	}
	if err := writeEvalReport(fl.report, dataset, split, rows, len(qids)); err != nil {
		return err
	}
	if fl.record {
		if err := a.recordRerank(eng, fl, dataset, split, rows, len(qids)); err != nil {
			return err
		}
	}
	return a.printEval(header, rows, len(qids), fl.asJSON)
}

// evalModes are the modes --modes, --choose-fusion and --record ask for.
func evalModes(fl evalFlags) ([]retrieval.Mode, error) {
	modes, err := retrieval.SelectModes(fl.modes, fl.reranker != "")
	if err != nil {
		if errors.Is(err, retrieval.ErrNeedsReranker) {
			err = fmt.Errorf("%w: --reranker DIR", err)
		}
		return nil, usageError{fmt.Errorf("--modes: %w", err)}
	}
	if fl.chooseFusion {
		modes = retrieval.FusionModes()
	}
	if fl.record {
		if err := retrieval.CheckRecordable(modes); err != nil {
			if m, ok := errors.AsType[*retrieval.MissingCandidatesError](err); ok {
				return nil, usageErrorf("--record: mode %s is measured against mode %s; add it to --modes", m.Mode, m.Of)
			}
			return nil, usageErrorf("--record: --modes has no rerank mode")
		}
	}
	return modes, nil
}

// evalEngine opens the index eval fills: --index, else a temporary
// directory; closeAll closes it and what it opened (also after an error).
func (a *app) evalEngine(ctx context.Context, fl evalFlags) (eng *engine.Engine, idx string, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	opts := engine.Options{Model: fl.model, Logf: a.logf, MaxPassages: fl.chunks.maxPassages}
	if err := fl.backend.apply(fl.cmd, &opts); err != nil {
		return nil, "", closeAll, err
	}
	if fl.chunking != nil {
		opts.Chunking = *fl.chunking
	}
	if fl.cache {
		opts.EmbeddingCache = home.EmbeddingCacheDir()
	}
	if fl.reranker != "" {
		dir, err := modelDir(fl.reranker)
		if err != nil {
			return nil, "", closeAll, err
		}
		rr, err := rerank.Load(ctx, dir, rerank.Options{})
		if err != nil {
			return nil, "", closeAll, err
		}
		closers = append(closers, func() { rr.Close() })
		// The rerank modes' candidates overlap: each pair is scored once.
		opts.Reranker = retrieval.NewPairCache(rr)
	}
	idx = fl.dir
	if idx == "" {
		if idx, err = os.MkdirTemp("", "anna-eval-"); err != nil {
			return nil, "", closeAll, err
		}
		closers = append(closers, func() { os.RemoveAll(idx) })
		// A temporary directory gets a Weaviate alias of its own.
		drop := fl.backend.scratch(&opts)
		closers = append(closers, func() {
			if derr := drop(); derr != nil {
				a.logf("%v", derr)
			}
		})
	}
	// The model as annactl index would build the directory with it.
	if opts.Model, err = indexModel(ctx, idx, fl.model, fl.precision); err != nil {
		return nil, "", closeAll, err
	}
	if eng, err = engine.Open(ctx, idx, opts); err != nil {
		return nil, "", closeAll, err
	}
	closers = append(closers, func() { eng.Close() })
	return eng, idx, closeAll, nil
}

// chooseFusion records in the index the hybrid fusion that scored best.
func (a *app) chooseFusion(eng *engine.Engine, idx string, rows []retrieval.Row, dataset, split string, queries int) error {
	c, err := retrieval.ChooseFusion(rows, dataset, split, queries)
	if err != nil {
		return err
	}
	if err := eng.SetFusion(c); err != nil {
		return err
	}
	a.logf("eval: recorded in %s: hybrid fuses by %s (%s)", idx, c.Fusion, c.Why)
	if split == "test" {
		a.logf("eval: chosen on the test split: that split's hybrid number is flattered by the choice; choose on --split train where the dataset has one")
	}
	return nil
}

// fusionNote is the header's note of the fusion hybrid used: the index's
// choice when it made it, else the fusion when it is not the default.
func fusionNote(eng *engine.Engine, search engine.SearchOptions) (string, error) {
	eff := search
	chosen := false
	if eff.NamedFusion() == "" {
		st, err := eng.Stats()
		if err != nil {
			return "", err
		}
		eff.Fusion, chosen = st.Fusion, st.FusionChoice.Active(st.Model.Fingerprint)
	}
	l := retrieval.FusionLabel(eff)
	if !chosen {
		if l == "" {
			return "", nil
		}
		return "; fused by " + l, nil
	}
	if l == "" { // the index chose the default
		l = string(eff.Fusion)
	}
	return "; fused by " + l + " (the index's choice)", nil
}

// recordRerank writes the rerank modes' gains into the reranker's manifest.
func (a *app) recordRerank(eng *engine.Engine, fl evalFlags, dataset, split string, rows []retrieval.Row, queries int) error {
	ms := retrieval.Measurements(dataset, split, fl.rerankDepth, eng.Model().Fingerprint, rows, queries)
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
	return nil
}

// queryProgress is a retrieval.Options.Progress: a progress line per mode.
func (a *app) queryProgress(mode string, total int) (func(int), func()) {
	p := a.progress(mode, total)
	return func(done int) { p.update(done, "queries") }, p.done
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

func (a *app) printEval(header string, rows []retrieval.Row, queries int, asJSON bool) error {
	if asJSON {
		out := map[string]map[string]any{}
		for _, r := range rows {
			s := r.Scores
			out[r.Mode.Key] = map[string]any{"ndcg@10": s.NDCG10, "recall@100": s.Recall100, "mrr@10": s.MRR10, "map": s.MAP, "queries": s.Queries}
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	fmt.Fprintln(a.stdout, header)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tnDCG@10\tRecall@100\tMRR@10\tMAP\tms/query")
	for _, r := range rows {
		s := r.Scores
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.1f\n", r.Mode.Key, s.NDCG10, s.Recall100, s.MRR10, s.MAP, float64(r.Took.Microseconds())/1000/float64(max(1, queries)))
	}
	return tw.Flush()
}

// addCorpus indexes docs in batches (ingest.Slice), with progress on a
// terminal.
func (a *app) addCorpus(ctx context.Context, eng *engine.Engine, docs []beir.Doc) error {
	p := a.progress("indexing", len(docs))
	defer p.done()
	st, err := ingest.Slice(ctx, eng, docs, ingest.Options{Batch: 512, Progress: func(pr ingest.Progress) {
		if pr.Documents > 0 {
			p.update(pr.Documents, "docs")
		}
	}})
	if st.Empty > 0 {
		fmt.Fprintf(a.stderr, "skipping %d documents with empty title and text\n", st.Empty)
	}
	return err
}

// writeEvalReport draws the modes side by side into path (nothing when
// path is "").
func writeEvalReport(path, dataset, split string, rows []retrieval.Row, queries int) error {
	if path == "" {
		return nil
	}
	run := report.EvalRun{Dataset: fmt.Sprintf("%s (%s)", filepath.Base(filepath.Clean(dataset)), split), Queries: queries}
	for _, r := range rows {
		s := r.Scores
		run.Modes = append(run.Modes, report.ModeScores{Mode: r.Mode.Key, NDCG10: s.NDCG10, Recall100: s.Recall100, MRR10: s.MRR10, MAP: s.MAP,
			MsPerQuery: float64(r.Took.Microseconds()) / 1000 / float64(max(1, queries))})
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		return report.WriteEval(f, "anna eval: "+dataset, []report.EvalRun{run})
	})
}
