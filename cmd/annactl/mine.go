package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model/installed"
	"github.com/anna-search/anna/rerank"
	"github.com/spf13/cobra"
)

type mineFlags struct {
	dataset, split, input, index, output, model, mode, teacher, reranker string
	sampling, format, instruction, examples, stats                       string
	teacherModels, teacherIndexes                                        []string
	calibrate                                                            int
}

func (a *app) mineCommand() *cobra.Command {
	opt := mining.DefaultOptions()
	var fl mineFlags
	var be backendFlags // the index's lists from a Weaviate cluster (--teacher-model indexes stay local)
	cmd := &cobra.Command{
		Use:   "mine-negatives (--dataset BEIR_DIR | --input PAIRS.jsonl --index DIR) --output FILE",
		Short: "mine hard negatives with teacher scores (FlagEmbedding / sentence-transformers data)",
		Long: `Candidates come from the search pipeline (top-k, the query's positives and texts
equal to the query or a positive removed), are scored by the teacher (positives too),
filtered by the positive-aware margin, and sampled with a seed. A positive the corpus
does not hold (published BEIR sets judge some) is skipped, counted and named (--strict
fails instead); a candidate that is the query itself (the document with the query's ID
and text, as eval drops it) is no negative. The summary says how many queries wrote no
example, and why. Ctrl-C stops cleanly;
--resume continues with no duplicates and no gaps, and the output is the same as an
uninterrupted run's.

The pipeline as teacher (--teacher fusion): --teacher-model adds another embedding
model (its own index of the corpus, built once under the cache with --dataset) and
--teacher-index an existing index of the same corpus; their dense lists join the
candidates by reciprocal rank fusion, and the soft labels come from a logistic fusion
of BM25 and every model's cosine, calibrated on the first --calibrate queries' labels
(saved in OUTPUT.teacher.json, reused by --resume). The stats report each teacher's
own quality on the input's labels (nDCG@10 of the positives among the candidates).`,
		Example: `  annactl mine-negatives --dataset ../shared/datasets/scifact --split train --output mined.jsonl
  annactl mine-negatives --input pairs.jsonl --index my-index --output mined.jsonl --resume
  annactl mine-negatives --dataset ../shared/datasets/scifact --split train --output mined.jsonl \
      --teacher fusion --teacher-model bge-small-en-v1.5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "output"); err != nil {
				return err
			}
			if fl.dataset == "" && fl.input == "" {
				return usageErrorf("give --dataset BEIR_DIR, or --input PAIRS.jsonl with --index DIR")
			}
			if fl.input != "" && fl.dataset == "" && fl.index == "" {
				return usageErrorf("--input needs --index DIR (the corpus to mine from), or --dataset for the corpus")
			}
			for name, v := range map[string]int{"negatives": opt.Negatives, "top-k": opt.TopK, "workers": opt.Workers} {
				if err := atLeast(name, v, 1); err != nil {
					return err
				}
			}
			for name, v := range map[string]int{"range-min": opt.RangeMin, "range-max": opt.RangeMax, "min-negatives": opt.MinNegatives, "require-positive-top": opt.RequireTop} {
				if err := atLeast(name, v, 0); err != nil {
					return err
				}
			}
			if err := inRange("margin", opt.Margin, 0, 1); err != nil {
				return err
			}
			if err := oneOf("sampling", fl.sampling, "random", "top"); err != nil {
				return err
			}
			if err := oneOf("format", fl.format, "flag", "triplet", "n-tuple", "labeled-list"); err != nil {
				return err
			}
			opt.Sampling = mining.Sampling(fl.sampling)
			opt.Format = mining.Format(fl.format)
			m, err := parseMode("mode", fl.mode)
			if err != nil {
				return err
			}
			if m == engine.ModeRerank {
				return usageErrorf("--mode rerank: want lexical, dense or hybrid (give --reranker to make the cross-encoder the teacher)")
			}
			switch fl.teacher {
			case "":
				// The strongest scorer available: the cross-encoder given,
				// else an installed one measured to help, else the
				// calibrated fusion of BM25 and the cosines (on SciFact
				// train its soft labels rank the positives at nDCG@10
				// 0.734, the cosine alone at 0.676).
				fl.teacher = "fusion"
				if fl.reranker == "" {
					// Its scores alone label the pairs: it must have
					// helped alone, not only fused with the lists.
					dir, others, err := installed.HelpfulReranker(home.ModelsDir(), true)
					if err != nil {
						return err
					}
					if dir != "" {
						a.logf("mine-negatives: teacher: %s, an installed reranker measured to help on its own (--teacher fusion to use the fusion instead)", dir)
						fl.reranker = dir
					} else if len(others) > 0 {
						a.logf("mine-negatives: teacher: the fusion (no installed reranker is measured to help on its own: %s)", strings.Join(others, "; "))
					}
				}
				if fl.reranker != "" {
					fl.teacher = "cross-encoder"
				}
			case "dense", "cross-encoder", "fusion":
			default:
				return usageErrorf("--teacher %q: want dense, fusion or cross-encoder", fl.teacher)
			}
			if len(fl.teacherModels) > 0 && fl.dataset == "" {
				return usageErrorf("--teacher-model needs --dataset (its corpus is indexed with the model); give --teacher-index DIR for an index you built")
			}
			if err := atLeast("calibrate", fl.calibrate, 1); err != nil {
				return err
			}
			if fl.teacher == "cross-encoder" && fl.reranker == "" {
				return usageErrorf("--teacher cross-encoder needs --reranker DIR")
			}
			// The input is there before the corpus is indexed (minutes).
			if err := checkMineInput(fl); err != nil {
				return err
			}
			ctx := cmd.Context()
			defaults := mining.PromptDefaults{Instruction: fl.instruction}
			if fl.examples != "" {
				if defaults.Examples, err = readShots(fl.examples); err != nil {
					return err
				}
			}
			// The model behind the on-disk embedding cache: the corpus is embedded
			// once, and the teacher's query embedding is a cache hit after retrieval's.
			enc, closeEnc, err := loadMiningEncoder(ctx, fl.model, fl.index)
			if err != nil {
				return err
			}
			defer closeEnc()
			dir := fl.index
			if dir == "" {
				dir = defaultMiningIndex(fl.dataset, enc.Fingerprint())
			}
			var rr *rerank.ORTReranker
			if fl.reranker != "" {
				if rr, err = rerank.Load(ctx, fl.reranker, rerank.Options{}); err != nil {
					return err
				}
				defer rr.Close()
			}
			opts := engine.Options{Encoder: enc, Model: fl.model, Logf: a.logf}
			if err := be.apply(cmd, &opts); err != nil {
				return err
			}
			eng, err := engine.Open(ctx, dir, opts)
			if err != nil {
				return err
			}
			defer eng.Close()
			if fl.dataset != "" {
				if err := a.indexDataset(ctx, eng, fl.dataset); err != nil {
					return err
				}
			}
			// The other models of the pipeline: one engine (index of the same
			// corpus) each.
			var others []teacherEngine
			defer func() {
				for _, o := range others {
					o.close()
				}
			}()
			for _, name := range fl.teacherModels {
				o, err := a.openTeacherEngine(ctx, resolveModelDir(name), "", fl.dataset)
				if err != nil {
					return fmt.Errorf("--teacher-model %s: %w", name, err)
				}
				others = append(others, o)
			}
			for _, dir := range fl.teacherIndexes {
				o, err := a.openTeacherEngine(ctx, "", dir, "")
				if err != nil {
					return fmt.Errorf("--teacher-index %s: %w", dir, err)
				}
				others = append(others, o)
			}
			return a.runMineWith(ctx, mineRun{opt: opt, eng: eng, enc: enc, rr: rr, teacher: fl.teacher, mode: m, others: others,
				calibrate: fl.calibrate, dataset: fl.dataset, split: fl.split, input: fl.input, output: fl.output, stats: fl.stats, defaults: defaults})
		},
	}
	be.register(cmd)
	f := cmd.Flags()
	f.StringVar(&fl.dataset, "dataset", "", "BEIR folder: its qrels split is the input, its corpus is indexed if needed")
	f.StringVar(&fl.split, "split", "train", "qrels split of --dataset")
	f.StringVar(&fl.input, "input", "", `JSON lines {"query", "pos": [...] | "pos_ids": [...], "prompt"} (instead of the qrels of --dataset)`)
	indexFlag(cmd, &fl.index, "anna directory `DIR` holding the corpus (default with --dataset: one under $ANNA_HOME/cache/mining)")
	f.StringVar(&fl.output, "output", "", "output `FILE` (JSON lines)")
	modelVar(f, &fl.model, "model", "", "embedding model directory `DIR` (default: the index's, else the installed default)")
	f.StringVar(&fl.mode, "mode", "hybrid", "candidate pipeline: lexical | dense | hybrid")
	f.StringVar(&fl.teacher, "teacher", "", "dense (cosine of the embedding model) | fusion (calibrated fusion of BM25, every model's cosine and the --reranker's logit if given) | cross-encoder (needs --reranker); default cross-encoder when --reranker is given or an installed reranker is measured to help on its own (annactl models list), else fusion")
	f.StringArrayVar(&fl.teacherModels, "teacher-model", nil, "another embedding model `NAME|DIR` for the candidates (RRF) and the fusion teacher; needs --dataset (repeatable)")
	f.StringArrayVar(&fl.teacherIndexes, "teacher-index", nil, "an index `DIR` of the same corpus with another model, for the candidates (RRF) and the fusion teacher (repeatable)")
	f.IntVar(&fl.calibrate, "calibrate", 256, "queries whose labels calibrate the fusion teacher")
	modelVar(f, &fl.reranker, "reranker", "", "cross-encoder model directory `DIR` (the rerank stage) to use as teacher (with --teacher fusion: as one of its signals)")
	f.IntVar(&opt.Negatives, "negatives", opt.Negatives, "hard negatives per example")
	f.IntVar(&opt.TopK, "top-k", opt.TopK, "candidates considered per query (after removing its positives)")
	f.Float64Var(&opt.Margin, "margin", opt.Margin, "relative margin: drop candidates above pos − (1−margin)·|pos| of the lowest positive (= margin·pos for pos ≥ 0); 0 = off")
	f.Var(maybeFloat{&opt.AbsMargin}, "abs-margin", "absolute margin: drop candidates above pos − abs-margin (default off)")
	f.Var(maybeFloat{&opt.MaxScore}, "max-score", "score ceiling: drop candidates scoring above (default off)")
	f.Var(maybeFloat{&opt.MinScore}, "min-score", "score floor: drop candidates scoring below (default off)")
	f.IntVar(&opt.RangeMin, "range-min", 0, "skip the first range-min candidates (rank window, 0-based, positives removed)")
	f.IntVar(&opt.RangeMax, "range-max", 0, "consider candidates of rank < range-max (0 = top-k)")
	f.StringVar(&fl.sampling, "sampling", "random", "random (seeded) | top (highest teacher scores)")
	f.Uint64Var(&opt.Seed, "seed", 0, "sampling seed")
	f.IntVar(&opt.MinNegatives, "min-negatives", opt.MinNegatives, "do not write examples with fewer negatives (counted)")
	f.IntVar(&opt.RequireTop, "require-positive-top", 0, "keep a positive only where the teacher ranks it within the top `K` of itself and its candidates (0: off; for generated queries, annactl doc2query: 1 keeps a query only if the teacher finds its document first)")
	f.StringVar(&fl.format, "format", "flag", "flag (FlagEmbedding) | triplet | n-tuple | labeled-list (sentence-transformers)")
	f.BoolVar(&opt.Grouped, "grouped", false, "one example per query with all its positives (default: one per (query, positive))")
	f.StringVar(&opt.Type, "type", "normal", `FlagEmbedding "type" field`)
	f.StringVar(&fl.instruction, "instruction", "", `default task instruction for queries (a line's "prompt" overrides it)`)
	f.StringVar(&fl.examples, "examples", "", `few-shot examples for the query side: JSON lines {"query", "response"} in FILE`)
	f.IntVar(&opt.Workers, "workers", runtime.GOMAXPROCS(0), "queries processed in parallel (the output does not depend on it)")
	f.BoolVar(&opt.Resume, "resume", false, "continue an interrupted run of the same command and output")
	f.BoolVar(&opt.SkipBad, "skip-bad", false, "skip bad input (counted) instead of stopping")
	f.BoolVar(&opt.Strict, "strict", false, "a positive the corpus does not hold is bad input (default: skipped, counted and named, as eval does)")
	f.StringVar(&fl.stats, "stats", "", "write the stats summary as JSON to `FILE` (default OUTPUT.stats.json)")
	return cmd
}

// checkMineInput checks that the input files are there: the BEIR folder's
// corpus, and its split's queries and qrels (a missing split named with
// those it has) unless --input gives the pairs, then that file.
func checkMineInput(fl mineFlags) error {
	if fl.dataset != "" {
		split := fl.split
		if fl.input != "" {
			split = "" // the pairs come from --input
		}
		if err := mining.CheckBEIR(fl.dataset, split); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--dataset: %w", err)
		} else if err != nil {
			return usageError{fmt.Errorf("--dataset: %w", err)} // no such split
		}
	}
	if fl.input != "" {
		if _, err := os.Stat(fl.input); err != nil {
			return fmt.Errorf("--input: %w", err)
		}
	}
	return nil
}

// mineRun is one mine-negatives run, wired.
type mineRun struct {
	opt                                  mining.Options
	eng                                  *engine.Engine
	enc                                  encoder.Encoder
	rr                                   *rerank.ORTReranker
	teacher                              string
	mode                                 engine.Mode
	others                               []teacherEngine
	calibrate                            int
	dataset, split, input, output, stats string
	defaults                             mining.PromptDefaults
}

// pipeline returns the candidates' retriever (mining.Pipeline).
func (r *mineRun) pipeline() mining.Retriever {
	others := make([]*engine.Engine, len(r.others))
	for i, o := range r.others {
		others[i] = o.eng
	}
	return mining.Pipeline(r.eng, r.mode, others...)
}

func (r *mineRun) openSource(ctx context.Context) (mining.Source, error) {
	if r.input != "" {
		return mining.OpenPairs(ctx, r.input, r.defaults)
	}
	return mining.OpenBEIR(ctx, r.dataset, r.split, r.defaults)
}

// readShots reads few-shot examples, one JSON object per line.
func readShots(path string) ([]mining.Shot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read examples: %w", err)
	}
	var out []mining.Shot
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var s mining.Shot
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if s.Query == "" || s.Response == "" {
			return nil, fmt.Errorf(`%s:%d: need "query" and "response"`, path, i+1)
		}
		out = append(out, s)
	}
	return out, nil
}
