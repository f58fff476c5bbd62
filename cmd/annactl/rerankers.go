package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train/adapt"
	"github.com/anna-search/anna/train/recipe"
)

// buildHint is what to do when no reranker is installed.
const buildHint = "annactl rerankers build trains one (about two hours on 2 cores) and installs it"

func (a *app) rerankersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rerankers",
		Short: "build the cross-encoder reranker this project trains (annactl models list shows the installed ones)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown rerankers command %q (want build)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(a.stderr)
			cmd.Usage()
			return usageErrorf("no rerankers command given (build)")
		},
	}
	cmd.AddCommand(a.rerankersBuildCommand())
	return cmd
}

// rerankersBuildLong is rerankers build's help.
const rerankersBuildLong = `Runs the recipe of package train/recipe (make reranker calls this):
  1. index the collection (--data, SciFact by default) with the embedding model;
  2. mine its train split with the pipeline as teacher (BM25 and dense candidates
     fused by RRF, soft labels from the calibrated fusion of BM25 and the cosine);
  3. fine-tune a cross-encoder from --base on them (listwise softmax over 1 positive
     + group-1 negatives, KL distillation from the teacher's scores);
  4. measure it on the test split (and each --eval collection): BM25 and hybrid top
     100 with their top --rerank-depth reranked, each gain recorded in its manifest —
     what decides whether search --mode rerank and mining use it unasked;
  5. install it as $ANNA_HOME/models/NAME.

Everything is kept in --work: after Ctrl-C or a kill, run the same command again and
it goes on (training from its last checkpoint, mining and measuring from what they
wrote). Each stage counts its work (documents, queries, steps, pairs) and, after its
first unit, shows the measured time per unit and the time left at that rate. With the
defaults on 2 cores: about 75 min to train and 45 min to measure on SciFact.

--data is a BEIR folder: corpus.jsonl, queries.jsonl, qrels/train.tsv, and
qrels/test.tsv unless --skip-eval. SciFact: BEIR's scifact.zip
(https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip)
unzipped into $ANNA_HOME/datasets/scifact, or anywhere with --data.`

// rerankersBuildOptions are rerankers build's flags: the recipe's
// configuration and what the command reads into it.
type rerankersBuildOptions struct {
	c                        recipe.Config
	more, leaveOut, teachers []string
	datasets                 string
	noCheck                  bool
	datasetsGiven            bool // --datasets given
}

func (a *app) rerankersBuildCommand() *cobra.Command {
	o := rerankersBuildOptions{c: recipe.Defaults()}
	cmd := &cobra.Command{
		Use:   "build [--base NAME|DIR] [--data BEIR_DIR] [--steps N] [--skip-eval]",
		Short: "train a cross-encoder reranker on SciFact with the pipeline as teacher, measure it and install it (resumable)",
		Long:  rerankersBuildLong,
		Example: `  annactl rerankers build
  annactl rerankers build --data ../shared/datasets/scifact --eval ../shared/datasets/cranfield
  annactl rerankers build --base all-MiniLM-L6-v2 --name anna-reranker-minilm --steps 60`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runRerankersBuild(cmd.Context(), o)
		},
	}
	o.register(cmd)
	return cmd
}

func (o *rerankersBuildOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.c.Data, "data", o.c.Data, "the BEIR folder `DIR` to train on (its train split) and measure on (its test split)")
	f.StringVar(&o.c.Work, "work", "", "work `DIR`, kept for resuming (default $ANNA_HOME/work/NAME)")
	f.StringVar(&o.c.Base, "base", o.c.Base, "what the cross-encoder starts from: a catalogue `NAME` (downloaded if absent; all-MiniLM-L6-v2 trains faster, 6 layers against 12), an installed model, an anna model or Hugging Face BERT checkpoint directory")
	f.StringVar(&o.c.Name, "name", o.c.Name, "the installed reranker's `NAME`")
	modelVar(f, &o.c.Embedder, "model", "", "embedding model `DIR` of the candidates and the teacher (default: the installed default)")
	f.IntVar(&o.c.Steps, "steps", o.c.Steps, "optimizer steps")
	f.IntVar(&o.c.BatchQueries, "batch-queries", o.c.BatchQueries, "queries per step")
	f.IntVar(&o.c.Group, "group", o.c.Group, "candidates per query: 1 positive + group-1 mined negatives")
	f.IntVar(&o.c.MaxLength, "max-length", o.c.MaxLength, "tokens per (query, document) pair")
	f.Float64Var(&o.c.LR, "lr", o.c.LR, "peak learning rate")
	f.Float64Var(&o.c.Distill, "distill", o.c.Distill, "weight of the KL distillation from the teacher's scores (0: off)")
	f.Uint64Var(&o.c.Seed, "seed", o.c.Seed, "training seed")
	f.IntVar(&o.c.CheckpointEvery, "checkpoint-every", o.c.CheckpointEvery, "steps between checkpoints (what a kill can lose)")
	f.IntVar(&o.c.Depth, "rerank-depth", o.c.Depth, "candidates of each list reranked when measured (at most 100)")
	f.StringArrayVar(&o.c.Evals, "eval", nil, "another BEIR folder `DIR` to measure on (its test split) and record (repeatable)")
	f.StringArrayVar(&o.more, "more", nil, "another BEIR folder and split `DIR:SPLIT` to mine and train on (repeatable)")
	f.IntVar(&o.c.MoreRequireTop, "more-require-positive-top", 0, "--more sets: keep a query only where the teacher ranks its positive within the top `K` (1 for annactl doc2query's queries; 0: off)")
	f.StringVar(&o.datasets, "datasets", filepath.Join(home.Dir(), "datasets"), "without --data: a folder `DIR` of BEIR collections; the general reranker learns from the judgments of those of "+generalSets()+" it holds and the pseudo-queries of their corpora")
	f.StringArrayVar(&o.leaveOut, "leave-out", nil, "a collection `NAME` of --datasets not to learn from, measured on instead (repeatable): a reranker measured where it never trained")
	f.StringArrayVar(&o.c.Pseudo, "pseudo", nil, "a BEIR folder `DIR` whose documents' pseudo-queries (title, else first sentence) are mined and trained on (repeatable)")
	f.IntVar(&o.c.PseudoQueries, "pseudo-queries", o.c.PseudoQueries, "pseudo-queries mined from each corpus, spread over it (0: every document's)")
	f.IntVar(&o.c.PerQuery, "per-query", o.c.PerQuery, "examples one query contributes at most (one per relevant document; 0: all)")
	f.IntVar(&o.c.PerSet, "per-set", o.c.PerSet, "examples one set contributes at most, spread over it (0: all)")
	f.StringArrayVar(&o.teachers, "teacher-model", []string{"auto"}, "an embedding model (`NAME` installed, or a directory; repeatable) whose cosine joins the mining teacher and whose retrieval, fused with BM25, judges the pseudo-query check; auto: every installed catalogue model but --model's; none")
	f.IntVar(&o.c.CheckQueries, "check-queries", 200, "pseudo-queries per corpus of the check (every tenth document's, never trained on)")
	f.BoolVar(&o.noCheck, "no-check", false, "skip the pseudo-query check (measured on each --pseudo corpus's held-out pseudo-queries and recorded: with the judged measurements, what decides whether anna uses the reranker unasked)")
	f.StringVar(&o.c.MineDir, "mine-dir", "", "where the collections' indexes and mined sets go (default --work): builds sharing it mine each set once")
	f.BoolVar(&o.c.SkipEval, "skip-eval", false, "do not measure: installed, it is then used only when named (--reranker NAME)")
	f.BoolVar(&o.c.NoInstall, "no-install", false, "leave the model in WORK/ce/model")
}

// check validates the flags and reads --more into the configuration.
func (o *rerankersBuildOptions) check(cmd *cobra.Command) error {
	c := &o.c
	for name, v := range map[string]int{"steps": c.Steps, "batch-queries": c.BatchQueries, "max-length": c.MaxLength, "checkpoint-every": c.CheckpointEvery} {
		if err := atLeast(name, v, 1); err != nil {
			return err
		}
	}
	if err := atLeast("group", c.Group, 2); err != nil {
		return err
	}
	if err := atLeast("more-require-positive-top", c.MoreRequireTop, 0); err != nil {
		return err
	}
	if !c.SkipEval && (c.Depth < 1 || c.Depth > 100) {
		return usageErrorf("--rerank-depth must be 1 to 100 (got %d)", c.Depth)
	}
	if err := inRange("lr", c.LR, 1e-9, 0.5); err != nil {
		return err
	}
	if err := inRange("distill", c.Distill, 0, 1e3); err != nil {
		return err
	}
	for _, m := range o.more {
		i := strings.LastIndex(m, ":")
		if i <= 0 || i == len(m)-1 {
			return usageErrorf("--more %q: want BEIR_DIR:SPLIT", m)
		}
		c.More = append(c.More, recipe.Set{Dir: m[:i], Split: m[i+1:]})
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"pseudo-queries", c.PseudoQueries}, {"per-query", c.PerQuery}, {"per-set", c.PerSet}, {"check-queries", c.CheckQueries}} {
		if err := atLeast(n.name, n.v, 0); err != nil {
			return err
		}
	}
	o.datasetsGiven = cmd.Flags().Changed("datasets")
	if c.Data != "" {
		if len(o.leaveOut) > 0 || o.datasetsGiven {
			return usageErrorf("--data trains on one collection: not with --datasets or --leave-out")
		}
		if err := recipe.CheckData(c.Data, !c.SkipEval); err != nil {
			return usageErrorf("--data %s: %v", c.Data, err)
		}
	}
	return nil
}

// runRerankersBuild builds the reranker (recipe.Build), its progress on
// a's stderr and what it made on stdout.
func (a *app) runRerankersBuild(ctx context.Context, o rerankersBuildOptions) error {
	c := o.c
	if c.Data == "" && (len(c.More) == 0 && len(c.Pseudo) == 0 || o.datasetsGiven || len(o.leaveOut) > 0) {
		more := c.More
		used, left, err := recipe.General(&c, o.datasets, o.leaveOut)
		if err != nil {
			if errors.Is(err, recipe.ErrData) {
				return usageErrorf("--datasets %s: %v", o.datasets, err)
			}
			return err
		}
		c.More = append(c.More, more...)
		msg := "a general reranker from " + strings.Join(used, ", ")
		if len(left) > 0 {
			msg += "; left out, and measured on: " + strings.Join(left, ", ")
		}
		fmt.Fprintln(a.stderr, msg)
	}
	if c.Embedder == "" {
		c.Embedder = home.DefaultModel()
	}
	var err error
	if c.TeacherModels, err = a.rerankTeachers(c.Embedder, o.teachers); err != nil {
		return err
	}
	c.Check = !o.noCheck && len(c.TeacherModels) > 0 && len(c.Pseudo) > 0
	var pr buildProgress
	pr.w, pr.on = a.stderr, isTerminal(a.stderr)
	c.Progress, c.Logf = pr.show, pr.log
	start := time.Now()
	res, err := recipe.Build(ctx, c)
	pr.end()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(a.stderr, "stopped: run the same command again to continue (the work is kept)")
		}
		return err
	}
	return a.printBuild(res, time.Since(start))
}

// generalSets names recipe.GeneralSets, for help.
func generalSets() string {
	var n []string
	for _, s := range recipe.GeneralSets {
		n = append(n, s.Dir)
	}
	return strings.Join(n, ", ")
}

// rerankTeachers resolves rerankers build's --teacher-model values: auto
// (alone) is every installed catalogue embedding model but the
// embedder's (adapt.TeacherModelsFor, English documents: the general
// sets'); none (alone) is none; else model directories or installed names.
func (a *app) rerankTeachers(embedder string, values []string) ([]string, error) {
	if len(values) == 1 && values[0] == "auto" {
		name := filepath.Base(embedder)
		if m, err := model.LoadManifest(embedder); err == nil {
			name = m.Name
		}
		dirs, _ := adapt.TeacherModelsFor(name, "en", home.ModelsDir())
		return dirs, nil
	}
	return a.teacherModels(context.Background(), "", values)
}

// printBuild says what a build made, what it measured, and its time.
func (a *app) printBuild(res *recipe.Result, took time.Duration) error {
	man, err := model.LoadManifest(res.Model)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "reranker: %s (fingerprint %s), %d steps\n", res.Model, man.ShortFingerprint(), res.Steps)
	if res.Installed != "" {
		fmt.Fprintf(a.stdout, "installed: %s\n", res.Installed)
	}
	for _, x := range res.Measured {
		how := "its order"
		if x.Fusion {
			how = "fused by RRF"
		}
		fmt.Fprintf(a.stdout, "  %s %s: %s top %d reranked, %s: nDCG@10 %.4f -> %.4f\n", x.Dataset, x.Split, x.Candidates, x.Depth, how, x.Before, x.After)
	}
	fmt.Fprintf(a.stdout, "%s\n", man.Verdict())
	var parts []string
	for name, d := range res.Took {
		parts = append(parts, fmt.Sprintf("%s %s", name, d.Round(time.Second)))
	}
	sort.Strings(parts)
	fmt.Fprintf(a.stdout, "took %s (%s)\n", took.Round(time.Second), strings.Join(parts, ", "))
	return nil
}

// buildProgress shows a build's progress: on a terminal one line rewritten
// in place, else a line when a stage starts or ends and every 15 s.
type buildProgress struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool // a terminal
	open  bool // a line is on screen, unended
	stage string
	last  time.Time
}

func (p *buildProgress) show(r recipe.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	changed := r.Stage != p.stage
	finished := r.Total > 0 && r.Done >= r.Total
	every := 15 * time.Second
	if p.on {
		every = 200 * time.Millisecond
	}
	if !changed && !finished && now.Sub(p.last) < every {
		return
	}
	if changed && p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
	p.stage, p.last = r.Stage, now
	line := fmt.Sprintf("[%d/%d] %s", r.Index, r.Stages, r.Stage)
	if r.Unit != "" {
		line += fmt.Sprintf(": %d/%d %s", r.Done, r.Total, r.Unit)
		switch {
		case r.PerUnit > 0 && r.Done < r.Total:
			line += fmt.Sprintf(", %s per %s: %s left at that rate", roundDur(r.PerUnit), singular(r.Unit), roundDur(r.ETA))
		case r.PerUnit > 0:
			line += fmt.Sprintf(", %s per %s", roundDur(r.PerUnit), singular(r.Unit))
		case r.Done < r.Total:
			line += fmt.Sprintf(", time per %s: measuring", singular(r.Unit))
		}
	}
	if r.Detail != "" {
		line += " (" + r.Detail + ")"
	}
	if p.on {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.open = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// log prints a line of what the build found, below the progress line.
func (p *buildProgress) log(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprint(p.w, "\r\033[K")
		p.open = false
		p.stage = "" // redraw the progress line on the next report
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *buildProgress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

func singular(unit string) string {
	switch {
	case strings.Contains(unit, "queries"): // "held-out queries", "queries (train.jsonl)"
		return strings.Replace(unit, "queries", "query", 1)
	case unit == "MB":
		return unit
	case strings.Contains(unit, "documents"): // "check documents", "documents (doc2query)"
		return strings.Replace(unit, "documents", "document", 1)
	}
	return strings.TrimSuffix(unit, "s")
}

// roundDur rounds to what a person reads: ms below a second, s below a
// minute, then minutes.
func roundDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
