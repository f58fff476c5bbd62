package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/mining"
	"github.com/spf13/cobra"
)

// mineOptions are mine-negatives' flags: the run's configuration
// (mining.Config) and what the command reads into it.
type mineOptions struct {
	cfg                    mining.Config
	mode, sampling, format string
	instruction, examples  string
	be                     backendFlags // the index's lists from a Weaviate cluster (--teacher-model indexes stay local)
}

func (a *app) mineCommand() *cobra.Command {
	o := mineOptions{cfg: mining.Config{Options: mining.DefaultOptions()}}
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
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runMine(cmd.Context(), o)
		},
	}
	o.be.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.cfg.Dataset, "dataset", "", "BEIR folder: its qrels split is the input, its corpus is indexed if needed")
	f.StringVar(&o.cfg.Split, "split", "train", "qrels split of --dataset")
	f.StringVar(&o.cfg.Input, "input", "", `JSON lines {"query", "pos": [...] | "pos_ids": [...], "prompt"} (instead of the qrels of --dataset)`)
	indexFlag(cmd, &o.cfg.Index, "anna directory `DIR` holding the corpus (default with --dataset: one under $ANNA_HOME/cache/mining)")
	f.StringVar(&o.cfg.Output, "output", "", "output `FILE` (JSON lines)")
	modelVar(f, &o.cfg.Model, "model", "", "embedding model directory `DIR` (default: the index's, else the installed default)")
	f.StringVar(&o.mode, "mode", "hybrid", "candidate pipeline: lexical | dense | hybrid")
	f.StringVar(&o.cfg.Teacher, "teacher", "", "dense (cosine of the embedding model) | fusion (calibrated fusion of BM25, every model's cosine and the --reranker's logit if given) | cross-encoder (needs --reranker); default cross-encoder when --reranker is given or an installed reranker is measured to help on its own (annactl models list), else fusion")
	f.StringArrayVar(&o.cfg.TeacherModels, "teacher-model", nil, "another embedding model `NAME|DIR` for the candidates (RRF) and the fusion teacher; needs --dataset (repeatable)")
	f.StringArrayVar(&o.cfg.TeacherIndexes, "teacher-index", nil, "an index `DIR` of the same corpus with another model, for the candidates (RRF) and the fusion teacher (repeatable)")
	f.IntVar(&o.cfg.Calibrate, "calibrate", 256, "queries whose labels calibrate the fusion teacher")
	modelVar(f, &o.cfg.Reranker, "reranker", "", "cross-encoder model directory `DIR` (the rerank stage) to use as teacher (with --teacher fusion: as one of its signals)")
	f.IntVar(&o.cfg.Options.Negatives, "negatives", o.cfg.Options.Negatives, "hard negatives per example")
	f.IntVar(&o.cfg.Options.TopK, "top-k", o.cfg.Options.TopK, "candidates considered per query (after removing its positives)")
	f.Float64Var(&o.cfg.Options.Margin, "margin", o.cfg.Options.Margin, "relative margin: drop candidates above pos − (1−margin)·|pos| of the lowest positive (= margin·pos for pos ≥ 0); 0 = off")
	f.Var(maybeFloat{&o.cfg.Options.AbsMargin}, "abs-margin", "absolute margin: drop candidates above pos − abs-margin (default off)")
	f.Var(maybeFloat{&o.cfg.Options.MaxScore}, "max-score", "score ceiling: drop candidates scoring above (default off)")
	f.Var(maybeFloat{&o.cfg.Options.MinScore}, "min-score", "score floor: drop candidates scoring below (default off)")
	f.IntVar(&o.cfg.Options.RangeMin, "range-min", 0, "skip the first range-min candidates (rank window, 0-based, positives removed)")
	f.IntVar(&o.cfg.Options.RangeMax, "range-max", 0, "consider candidates of rank < range-max (0 = top-k)")
	f.StringVar(&o.sampling, "sampling", "random", "random (seeded) | top (highest teacher scores)")
	f.Uint64Var(&o.cfg.Options.Seed, "seed", 0, "sampling seed")
	f.IntVar(&o.cfg.Options.MinNegatives, "min-negatives", o.cfg.Options.MinNegatives, "do not write examples with fewer negatives (counted)")
	f.IntVar(&o.cfg.Options.RequireTop, "require-positive-top", 0, "keep a positive only where the teacher ranks it within the top `K` of itself and its candidates (0: off; for generated queries, annactl doc2query: 1 keeps a query only if the teacher finds its document first)")
	f.StringVar(&o.format, "format", "flag", "flag (FlagEmbedding) | triplet | n-tuple | labeled-list (sentence-transformers)")
	f.BoolVar(&o.cfg.Options.Grouped, "grouped", false, "one example per query with all its positives (default: one per (query, positive))")
	f.StringVar(&o.cfg.Options.Type, "type", "normal", `FlagEmbedding "type" field`)
	f.StringVar(&o.instruction, "instruction", "", `default task instruction for queries (a line's "prompt" overrides it)`)
	f.StringVar(&o.examples, "examples", "", `few-shot examples for the query side: JSON lines {"query", "response"} in FILE`)
	f.IntVar(&o.cfg.Options.Workers, "workers", runtime.GOMAXPROCS(0), "queries processed in parallel (the output does not depend on it)")
	f.BoolVar(&o.cfg.Options.Resume, "resume", false, "continue an interrupted run of the same command and output")
	f.BoolVar(&o.cfg.Options.SkipBad, "skip-bad", false, "skip bad input (counted) instead of stopping")
	f.BoolVar(&o.cfg.Options.Strict, "strict", false, "a positive the corpus does not hold is bad input (default: skipped, counted and named, as eval does)")
	f.StringVar(&o.cfg.Stats, "stats", "", "write the stats summary as JSON to `FILE` (default OUTPUT.stats.json)")
	return cmd
}

// check validates the flags and reads them into the run's configuration.
func (o *mineOptions) check(cmd *cobra.Command) error {
	c, opt := &o.cfg, &o.cfg.Options
	if err := requireFlags(cmd, "output"); err != nil {
		return err
	}
	if c.Dataset == "" && c.Input == "" {
		return usageErrorf("give --dataset BEIR_DIR, or --input PAIRS.jsonl with --index DIR")
	}
	if c.Input != "" && c.Dataset == "" && c.Index == "" {
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
	if err := oneOf("sampling", o.sampling, "random", "top"); err != nil {
		return err
	}
	if err := oneOf("format", o.format, "flag", "triplet", "n-tuple", "labeled-list"); err != nil {
		return err
	}
	opt.Sampling, opt.Format = mining.Sampling(o.sampling), mining.Format(o.format)
	m, err := parseMode("mode", o.mode)
	if err != nil {
		return err
	}
	if m == engine.ModeRerank {
		return usageErrorf("--mode rerank: want lexical, dense or hybrid (give --reranker to make the cross-encoder the teacher)")
	}
	c.Mode = m
	switch c.Teacher {
	case "", mining.TeacherDense, mining.TeacherCrossEncoder, mining.TeacherFusion:
	default:
		return usageErrorf("--teacher %q: want dense, fusion or cross-encoder", c.Teacher)
	}
	if len(c.TeacherModels) > 0 && c.Dataset == "" {
		return usageErrorf("--teacher-model needs --dataset (its corpus is indexed with the model); give --teacher-index DIR for an index you built")
	}
	if err := atLeast("calibrate", c.Calibrate, 1); err != nil {
		return err
	}
	if c.Teacher == mining.TeacherCrossEncoder && c.Reranker == "" {
		return usageErrorf("--teacher cross-encoder needs --reranker DIR")
	}
	return o.be.apply(cmd, &c.Engine)
}

// runMine mines: the teacher chosen when none is given, the input
// checked, then mining.Mine with its progress and summary on a's stderr.
func (a *app) runMine(ctx context.Context, o mineOptions) error {
	c := o.cfg
	if c.Teacher == "" {
		teacher, rr, chosen, others, err := mining.DefaultTeacher(c.Reranker)
		if err != nil {
			return err
		}
		if chosen {
			a.logf("mine-negatives: teacher: %s, an installed reranker measured to help on its own (--teacher fusion to use the fusion instead)", rr)
		} else if c.Reranker == "" && len(others) > 0 {
			a.logf("mine-negatives: teacher: the fusion (no installed reranker is measured to help on its own: %s)", strings.Join(others, "; "))
		}
		c.Teacher, c.Reranker = teacher, rr
	}
	// The input is there before the corpus is indexed (minutes).
	if err := checkMineInput(c); err != nil {
		return err
	}
	c.Prompt = mining.PromptDefaults{Instruction: o.instruction}
	if o.examples != "" {
		var err error
		if c.Prompt.Examples, err = mining.ReadShots(o.examples); err != nil {
			return err
		}
	}
	c.TeacherModels = slices.Clone(c.TeacherModels)
	for i, name := range c.TeacherModels {
		c.TeacherModels[i] = resolveModelDir(name)
	}
	mined := false // the miner started: a stop leaves a resumable output
	progress := a.stageProgress()
	c.Progress = func(p mining.Progress) {
		mined = mined || p.Stage == mining.StageMining
		progress(p.Stage+" "+p.Name, p.Done, p.Total, p.Start, p.End)
	}
	c.Logf = a.logf
	st, err := mining.Mine(ctx, c)
	if st != nil {
		st.Write(a.stderr)
	}
	if mined && errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "stopped: %s is complete up to its last checkpoint; run the same command with --resume to continue\n", c.Output)
	}
	return err
}

// stageProgress returns a report function drawing a progress line per
// stage: start opens one, end ends it, the counts between update it.
func (a *app) stageProgress() func(label string, done, total int, start, end bool) {
	var p *progress
	return func(label string, done, total int, start, end bool) {
		switch {
		case start:
			p = a.progress(label, total)
		case p == nil:
		case end:
			p.done()
			p = nil
		default:
			p.update(done, "")
		}
	}
}

// checkMineInput checks that the input files are there: the BEIR folder's
// corpus, and its split's queries and qrels (a missing split named with
// those it has) unless --input gives the pairs, then that file.
func checkMineInput(c mining.Config) error {
	if c.Dataset != "" {
		split := c.Split
		if c.Input != "" {
			split = "" // the pairs come from --input
		}
		if err := mining.CheckBEIR(c.Dataset, split); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--dataset: %w", err)
		} else if err != nil {
			return usageError{fmt.Errorf("--dataset: %w", err)} // no such split
		}
	}
	if c.Input != "" {
		if _, err := os.Stat(c.Input); err != nil {
			return fmt.Errorf("--input: %w", err)
		}
	}
	return nil
}
