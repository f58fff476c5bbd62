package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/train/adapt"
	"github.com/anna-search/anna/train/recipe"
)

// adaptLong is adapt's help.
const adaptLong = `Adapts the embedding model of an anna directory to its own documents when there
are no judged queries: queries -> mining -> training -> held-out check -> reindex
(--serve ensemble: queries -> calibration -> ensemble -> reindex).

Queries are pseudo-queries cut from the documents (the title, else the first
sentence), queries written by an instruct decoder for --generate N documents
chosen with the seed (--generator: annactl doc2query's decoder, by default
the catalogue's smollm2-135m-instruct), and the lines of --queries (a query
log, one query a line). Labels come from the teacher — BM25 fused with the
index's model, and --teacher-model's cosine when given — never from the
student alone: a query's document (the one it was cut or written from; for a
logged query the engine's top document) is kept as its positive only when the
teacher ranks it first. In training, a query cut from a document is cut out of
it too (the inverse-cloze task: otherwise the student only learns to find the
words it was given; --keep-query-in-positive turns that off). A logged
query's document must also score, by the teacher, at least the tenth percentile of its scores of the confirmed
extractive and generated positives (even odds when there are fewer than 20);
the report says how many logged queries that kept and dropped. Every tenth
query is held out; the adapted model replaces the index's only when it
retrieves at least as well as the index's model on those queries (nDCG@10;
--min-gain raises the bar), and says so when it does not. With a teacher model
(by default bge-small-en-v1.5 when installed) each held-out query is searched
over the whole corpus by both models and scored against the top 10 of BM25
fused with the teacher model; it agreed with the judged outcome in 9 of 11
measured runs (docs/results/adapt.md). Without one, the check ranks only the
teacher's document among its mined candidates, which agreed in 3 of 9. Both
score pseudo-labels, not a person's: --judged FILE gives queries of your own
(a few dozen, with the documents relevant to each), and the check searches the
whole corpus for them instead. The command prints how to go back to the
previous model.

The served model is the trained student's weights mixed with the weights it
started from, base + MIX·(trained − base) (--mix, default 0.5: WiSE-FT's
weight-space ensemble), at the length the index's model is served at: of twelve
measured students over four collections eleven then gained dense nDCG@10; the
twelfth, SciFact's from generated queries alone, lost 0.009 (docs/results/adapt.md).
Hybrid search, BM25 fused with that dense list, moves much less: with no query
log, -0.0017 nDCG@10 on average over SciFact, Cranfield, CISI and CACM; a
query log lifted it +0.0002 to +0.0092 on the same four.

--serve ensemble trains nothing: it calibrates the same teacher on the
pseudo-queries, then serves the teacher's models themselves as one model, an
ensemble of the index's model and every --teacher-model, each text embedded by
all of them into one joined vector whose cosine is their cosines weighted as
the calibrated teacher weighs them (kept under $ANNA_HOME/models as
ensemble-FINGERPRINT, and the index reindexed with it). On the same four
collections, with the default int8 model and no log, hybrid nDCG@10 rose by
+0.0116 on average (Cranfield -0.0001, CISI +0.0198, CACM +0.0126, SciFact
+0.0141; docs/results/adapt.md). Each document indexed and each query then costs
every model's forward: with MiniLM, bge-small and e5-small-v2, measured at about
7 times MiniLM-int8's CPU a document and 5 times a query. There is no held-out
check (the judges adapt has without --judged are made of the same models): try
it with queries of your own.

Every stage is recorded in --work; run the same command again after Ctrl-C or a
kill to continue where it stopped (generated queries are kept as they are
written, a batch at a time, and reused). Before the work starts it prints an
estimate of its time on this machine; with --generate, once the decoder's
first batch has measured its speed.`

// adaptOptions are adapt's flags: the run's configuration and the teacher
// models named.
type adaptOptions struct {
	c        adapt.Config
	teachers []string
}

func (a *app) adaptCommand() *cobra.Command {
	o := adaptOptions{c: adapt.Defaults()}
	o.c.KeepModel = true
	cmd := &cobra.Command{
		Use:   "adapt --index DIR [--queries FILE] [--generate N] [--teacher-model NAME] [--steps N]",
		Short: "fit the index's embedding model to its documents, with no relevance judgements",
		Long:  adaptLong,
		Example: `  annactl adapt --index my-index --base ~/ckpt/all-MiniLM-L6-v2 --steps 200
  annactl adapt --index my-index --queries queries.log --teacher-model bge-small-en-v1.5
  annactl adapt --index my-index --queries queries.log --judged judged.jsonl
  annactl adapt --index my-index --generate 500 --no-extractive`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runAdapt(cmd.Context(), o)
		},
	}
	o.register(cmd)
	return cmd
}

func (o *adaptOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.c.Index, "index", "", "the anna directory `DIR` to adapt")
	f.StringVar(&o.c.Work, "work", "", "work `DIR`, kept for resuming (default DIR.adapt beside the index)")
	f.StringVar(&o.c.Base, "base", "", "the student's starting Hugging Face checkpoint `DIR` (default: the checkpoint the index's model was converted from)")
	f.StringVar(&o.c.Queries, "queries", "", "a query log `FILE`, one query a line, added to the pseudo-queries")
	f.StringVar(&o.c.Judged, "judged", "", `judged queries `+"`FILE`"+` (JSON lines {"query", "pos_ids"}, the index's document IDs relevant to each): the held-out check, instead of pseudo-labels; never trained on`)
	f.BoolVar(&o.c.NoExtractive, "no-extractive", false, "leave out the pseudo-queries cut from the documents (needs --queries or --generate)")
	f.BoolVar(&o.c.KeepQueryInPositive, "keep-query-in-positive", false, "train a query cut from a document against the whole document (default: the query is cut out of it, the inverse-cloze task)")
	f.IntVar(&o.c.Generate, "generate", 0, "write a query for each of `N` documents (chosen with --seed) with --generator, its document the candidate positive")
	f.StringVar(&o.c.Generator, "generator", "smollm2-135m-instruct", "the --generate decoder: a llama GGUF `FILE` with a ChatML chat template, or a catalogue NAME (as annactl doc2query --model)")
	f.Var(logThresholdValue{&o.c.LogThreshold}, "log-threshold", "the teacher's calibrated log-odds a logged query's top document must reach to train on it: a `NUMBER`, none (every one the teacher ranks first), or auto (the 0.1 quantile of the confirmed extractive and generated positives' scores, even odds without them)")
	f.StringArrayVar(&o.teachers, "teacher-model", []string{"auto"}, "an embedding model (`NAME` installed, or a directory; repeatable) whose cosine joins the teacher and whose whole-corpus retrieval, fused with BM25, judges the held-out check and the fusion; auto: every installed catalogue model but the index's own that knows the documents' language; none: no teacher model")
	f.Var(negativesFromValue{&o.c.NegativesFrom}, "negatives-from", "the search whose top candidates the negatives are mined from: hybrid (BM25 and the index's model fused) or lexical (BM25 alone: the documents sharing the query's words that the teacher finds not relevant, which a dense list fused with BM25 must push down)")
	f.BoolVar(&o.c.TeacherWithoutBM25, "teacher-without-bm25", false, "leave BM25 out of the teacher (the index's model and --teacher-model's cosines only): on pseudo-queries BM25 finds the source document almost always, so a teacher that includes it teaches the student to rank like the BM25 list it is fused with")
	f.StringVar(&o.c.Serve, "serve", adapt.ServeStudent, "what the index then serves: student (the index's model trained on the teacher's labels) or ensemble (the teacher's models themselves, each weighted as the calibrated teacher weighs it, one joined vector: no training, every model's forward for each document and query; needs a --teacher-model)")
	f.BoolVar(&o.c.KeepFusion, "keep-fusion", false, "leave the index's fusion as it is (by default each fusion's hybrid nDCG@10 is measured on the check's queries, and with --judged the best is recorded: another than the default, dbsf, only where it beats it by 0.005)")
	f.IntVar(&o.c.Steps, "steps", o.c.Steps, "training steps")
	f.IntVar(&o.c.BatchQueries, "batch", o.c.BatchQueries, "queries per step")
	f.IntVar(&o.c.Group, "group", o.c.Group, "documents per query: 1 positive + N-1 mined negatives")
	f.IntVar(&o.c.MaxLength, "max-length", o.c.MaxLength, "tokens per text in training")
	f.IntVar(&o.c.CheckpointEvery, "checkpoint-every", o.c.CheckpointEvery, "steps between checkpoints")
	f.IntVar(&o.c.MaxQueries, "max-queries", 0, "use at most `N` queries (0: all)")
	f.Float64Var(&o.c.LR, "lr", o.c.LR, "peak learning rate")
	f.Float64Var(&o.c.Mix, "mix", o.c.Mix, "how far the served model's weights move from the base's towards the trained student's (base + MIX·(trained − base): WiSE-FT's weight-space ensemble; 1: the trained student as is)")
	f.Float64Var(&o.c.MinGain, "min-gain", 0, "held-out nDCG@10 the adapted model must gain over the index's before it replaces it")
	f.Uint64Var(&o.c.Seed, "seed", o.c.Seed, "seed")
}

// check validates the numeric flags.
func (o *adaptOptions) check(cmd *cobra.Command) error {
	c := &o.c
	if err := requireFlags(cmd, "index"); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"steps", c.Steps}, {"batch", c.BatchQueries}, {"max-length", c.MaxLength}, {"checkpoint-every", c.CheckpointEvery}} {
		if err := atLeast(f.name, f.v, 1); err != nil {
			return err
		}
	}
	if err := atLeast("group", c.Group, 2); err != nil {
		return err
	}
	if err := atLeast("max-queries", c.MaxQueries, 0); err != nil {
		return err
	}
	if err := inRange("lr", c.LR, 1e-9, 0.999); err != nil {
		return err
	}
	if err := inRange("mix", c.Mix, 1e-9, 1); err != nil {
		return err
	}
	if c.Serve != adapt.ServeStudent && c.Serve != adapt.ServeEnsemble {
		return usageErrorf("--serve %q: want %s or %s", c.Serve, adapt.ServeStudent, adapt.ServeEnsemble)
	}
	return nil
}

// runAdapt resolves the teacher models and the generator, then adapts
// (adapt.Adapt) with its progress on a's stderr and its report on stdout.
func (a *app) runAdapt(ctx context.Context, o adaptOptions) error {
	c := o.c
	var err error
	if c.TeacherModels, err = a.teacherModels(ctx, c.Index, o.teachers); err != nil {
		return err
	}
	if c.Serve == adapt.ServeEnsemble && len(c.TeacherModels) == 0 {
		return usageErrorf("--serve ensemble joins the teacher models to the index's model: install one (annactl models install %s) or name one with --teacher-model", adapt.DefaultTeacher)
	}
	if err := atLeast("generate", c.Generate, 0); err != nil {
		return err
	}
	if c.Generate > 0 {
		path, err := a.generatorFile(ctx, c.Generator)
		var u usageError
		switch {
		case errors.As(err, &u):
			return usageErrorf("--generator %q: want a llama GGUF file with a ChatML chat template, or a catalogue decoder (smollm2-135m-instruct)", c.Generator)
		case err != nil:
			return fmt.Errorf("--generator %s: %w", c.Generator, err)
		}
		c.Generator = path
	}
	var pr buildProgress
	pr.w, pr.on = a.stderr, isTerminal(a.stderr)
	c.Logf = pr.log
	c.Progress = func(p adapt.Progress) {
		pr.show(recipe.Progress{Stage: p.Stage, Index: p.Index, Stages: p.Stages, Unit: p.Unit, Done: p.Done, Total: p.Total, PerUnit: p.PerUnit, ETA: p.ETA})
	}
	prev := previousModel(c.Index)
	start := time.Now()
	rep, err := adapt.Adapt(ctx, c)
	pr.end()
	switch {
	case errors.Is(err, adapt.ErrWorse):
		a.printAdapt(rep, c.Mix, time.Since(start), c.Index, prev)
		return err
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(a.stderr, "stopped: run the same command again to continue (the work is kept)")
		return err
	case err != nil:
		return err
	}
	a.printAdapt(rep, c.Mix, time.Since(start), c.Index, prev)
	return nil
}

// teacherModels resolves --teacher-model's values: auto (alone) is
// adapt.DefaultTeacherModels, said on stderr; none (alone) is no teacher
// model; else each is a model directory or an installed model's name.
func (a *app) teacherModels(ctx context.Context, index string, values []string) ([]string, error) {
	if len(values) == 1 && values[0] == "none" {
		return nil, nil
	}
	if len(values) == 1 && values[0] == "auto" {
		dirs, left, err := adapt.DefaultTeacherModels(ctx, index, home.ModelsDir())
		if err != nil {
			return nil, err
		}
		if len(dirs) == 0 {
			fmt.Fprintf(a.stderr, "no teacher model installed (annactl models install %s): the teacher is BM25 and the index's model, the held-out check the weaker one, on the mined candidates, and the fusion stays as it is\n", adapt.DefaultTeacher)
			return nil, nil
		}
		names := make([]string, len(dirs))
		for i, d := range dirs {
			names[i] = filepath.Base(d)
		}
		msg := "teacher models: " + strings.Join(names, ", ")
		if len(left) > 0 {
			msg += "; left out: " + strings.Join(left, ", ")
		}
		fmt.Fprintln(a.stderr, msg)
		return dirs, nil
	}
	var dirs []string
	for _, t := range values {
		if t == "auto" || t == "none" {
			return nil, usageErrorf("--teacher-model %s stands alone: not with other --teacher-model values", t)
		}
		dir := t
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = filepath.Join(home.ModelsDir(), t)
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return nil, usageErrorf("--teacher-model %q: not a model directory nor installed (annactl models install NAME installs a catalogue model)", t)
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// printAdapt is an adapt run's report.
// previousModel names the model index is bound to before adapt, for the
// way back: its directory, else its name ("" when neither is known).
func previousModel(index string) string {
	m, err := engine.RecordedModel(index)
	switch {
	case err != nil:
		return ""
	case m.Dir != "":
		return m.Dir
	case m.Fingerprint != "" && m.Name == "":
		return home.DefaultModelName
	}
	return m.Name
}

func (a *app) printAdapt(rep adapt.Report, mix float64, took time.Duration, index, prev string) {
	if rep.Serve == adapt.ServeEnsemble {
		fmt.Fprintf(a.stdout, "queries: %d written, the teacher calibrated on up to 256 of them (%d generated, %d logged)\n", rep.Queries, rep.Generated, rep.Logged)
	} else {
		fmt.Fprintf(a.stdout, "queries: %d for training, %d held out (%d generated, %d logged); %d examples mined (%d positives the teacher did not rank first left out)\n",
			rep.Queries, rep.HeldOut, rep.Generated, rep.Logged, rep.Examples, rep.Filtered)
	}
	if rep.LogKept+rep.LogDropped > 0 {
		from := fmt.Sprintf("the %g quantile of its scores of %d confirmed extractive and generated positives", adapt.LogQuantile, rep.LogReference)
		thr := fmt.Sprintf("%.3f", rep.LogThreshold)
		switch {
		case rep.LogReference == -1 && rep.LogThreshold <= -math.MaxFloat64:
			thr, from = "none", "--log-threshold none"
		case rep.LogReference == -1:
			from = "--log-threshold"
		case rep.LogReference == 0:
			from = fmt.Sprintf("even odds: fewer than %d confirmed extractive and generated positives to take a quantile of", adapt.MinReference)
		}
		fmt.Fprintf(a.stdout, "logged queries the teacher ranked first: %d kept, %d below its threshold %s (%s) dropped\n",
			rep.LogKept, rep.LogDropped, thr, from)
	}
	switch {
	case rep.Serve == adapt.ServeEnsemble:
		fmt.Fprintf(a.stdout, "ensemble: %s (the index's model and the teacher models, each weighted as the calibrated teacher weighs its cosine)\n", rep.Model)
	case rep.Model != "" && rep.Trained != "" && rep.Trained != rep.Model:
		fmt.Fprintf(a.stdout, "adapted model: %s (%d steps; its weights mixed with the base's, --mix %g: the trained student is %s)\n", rep.Model, rep.Steps, mix, rep.Trained)
	case rep.Model != "":
		fmt.Fprintf(a.stdout, "adapted model: %s (%d steps)\n", rep.Model, rep.Steps)
	}
	if rep.Precision != "" && rep.Served != "" && rep.Served != rep.Model {
		fmt.Fprintf(a.stdout, "the index's model is %s: the adapted model converted to %s, checked and served as such: %s\n", rep.Precision, rep.Precision, rep.Served)
	}
	precision := rep.Precision
	if precision == "" {
		precision = "float32"
	}
	if rep.CheckQueries > 0 {
		fmt.Fprintf(a.stdout, "held-out check, %s, nDCG@10 (%s): index's model %.4f, adapted %.4f (%s)\n",
			plural(rep.CheckQueries, "query"), rep.Check, rep.BaseScore, rep.StudentScore, precision)
	}
	if rep.Reindexed {
		fmt.Fprintf(a.stdout, "the index now uses the adapted model (%s, the index's precision)\n", precision)
		// The check's labels are the teacher's, not a person's: say what
		// that has been measured to miss, and the way back.
		switch {
		case rep.Serve == adapt.ServeEnsemble:
			fmt.Fprintln(a.stdout, "note: the ensemble is not checked on held-out queries (adapt's judges without --judged are made of the same models): its measured effect is in docs/results/adapt.md; check with queries of your own")
		case rep.Check == adapt.CheckCorpus:
			fmt.Fprintln(a.stdout, "note: the held-out check scores pseudo-labels; it agreed with judged dense nDCG@10 on 9 of 11 measured runs (docs/results/adapt.md): check with queries of your own")
		default:
			fmt.Fprintln(a.stdout, "note: the held-out check scores pseudo-labels on the mined candidates only; it agreed with judged dense nDCG@10 on 3 of 9 measured runs (docs/results/adapt.md): give --teacher-model for the whole-corpus check, and check with queries of your own")
		}
		if prev != "" {
			fmt.Fprintf(a.stdout, "to go back: annactl reindex --index %s --model %s\n", index, prev)
		}
	} else {
		fmt.Fprintln(a.stdout, "the index keeps its model")
	}
	if len(rep.FusionScores) > 0 {
		var fs []string
		for _, f := range []string{"rrf", "minmax", "dbsf"} {
			fs = append(fs, fmt.Sprintf("%s %.4f", f, rep.FusionScores[f]))
		}
		fmt.Fprintf(a.stdout, "fusion: hybrid nDCG@10 on %s (%s): the index now fuses by %s\n", plural(rep.FusionQueries, "query"), strings.Join(fs, ", "), rep.Fusion)
	}
	var parts []string
	for name, d := range rep.Took {
		parts = append(parts, fmt.Sprintf("%s %s", name, d.Round(time.Second)))
	}
	sort.Strings(parts)
	fmt.Fprintf(a.stdout, "took %s (%s; estimated %s)\n", took.Round(time.Second), strings.Join(parts, ", "), rep.Estimate.Round(time.Second))
}

// logThresholdValue is --log-threshold: auto (nil), none (-Inf) or a number.
type logThresholdValue struct{ p **float64 }

func (v logThresholdValue) String() string {
	switch {
	case v.p == nil || *v.p == nil:
		return "auto"
	case math.IsInf(**v.p, -1):
		return "none"
	}
	return strconv.FormatFloat(**v.p, 'g', -1, 64)
}

func (v logThresholdValue) Set(s string) error {
	switch s {
	case "auto":
		*v.p = nil
		return nil
	case "none":
		x := math.Inf(-1)
		*v.p = &x
		return nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Errorf("want a number, none or auto")
	}
	*v.p = &x
	return nil
}

func (v logThresholdValue) Type() string { return "string" }

// negativesFromValue is --negatives-from: hybrid or lexical.
type negativesFromValue struct{ p *engine.Mode }

func (v negativesFromValue) String() string {
	if v.p == nil || *v.p == "" {
		return string(engine.ModeHybrid)
	}
	return string(*v.p)
}

func (v negativesFromValue) Set(s string) error {
	switch m := engine.Mode(s); m {
	case engine.ModeHybrid, engine.ModeLexical:
		*v.p = m
		return nil
	}
	return fmt.Errorf("want hybrid or lexical")
}

func (v negativesFromValue) Type() string { return "string" }
