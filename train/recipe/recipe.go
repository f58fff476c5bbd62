// Package recipe builds the cross-encoder reranker this project trains, the
// recipe `annactl rerankers build` runs (and `make reranker` calls it):
//
//  1. index a BEIR collection (Config.Data, SciFact by default) with the
//     embedding model, the embedding cache on;
//  2. mine its train split with the pipeline as teacher: BM25 and dense
//     candidates fused by RRF, soft labels from the calibrated fusion of
//     BM25 and the cosine (mining.FusionTeacher), Group−1 negatives per
//     query; the same for each Config.More set, each indexed on its own;
//  3. fine-tune a cross-encoder from the base model's weights (listwise
//     softmax over 1 + Group−1 candidates plus KL distillation from the
//     teacher's scores, package train);
//  4. measure it on the collection's test split and on each Config.Evals
//     collection: BM25 and hybrid top 100, their top Depth reranked
//     (replacing their order, and fused with their lists by RRF), each
//     gain recorded in the model's manifest (model.RecordMeasurements: what
//     decides whether anna uses it unasked);
//  5. install it as ModelsDir/Name (installed.Add).
//
// Resuming: all of it lives in Config.Work. Build called again with the same
// settings after a cancel, Ctrl-C or kill -9 goes on where the work stopped:
// indexing is durable per batch, mining continues from its last checkpoint
// (every 64 queries), training from its last checkpoint (every
// CheckpointEvery steps, and at the last whole step when a cancel stopped
// it), measuring from the pairs already scored (each score is appended to
// Work/scores-*.txt as it is computed, a torn last line dropped). Finished
// stages are recorded in Work/recipe.json and skipped. Settings that change
// what is trained (Data, Base, Embedder, the training and mining settings)
// are recorded there too, and a run with other ones is refused, naming the
// setting, rather than mixing two runs' work.
//
// Time: each stage reports (Config.Progress) the work it counted —
// documents, queries, steps, pairs — and, once its first unit is done in
// this process, the measured time per unit and the remaining time that
// implies. Nothing is estimated from constants: the first unit (model
// loading, warm-up) is left out of the rate.
package recipe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/stagefile"
	"github.com/anna-search/anna/model"
)

// DefaultBase and DefaultName are the recipe's base model (a catalogue
// entry, downloaded when absent) and the name its reranker is installed
// under.
const (
	DefaultBase = "bge-small-en-v1.5"
	DefaultName = "anna-reranker-bge"
)

// ErrData is wrapped by the error Build and CheckData return when the
// training collection is missing or incomplete; its message says what is
// needed and where to get it.
var ErrData = errors.New("no training collection")

// Set is a BEIR folder and the qrels split of it to mine.
type Set struct {
	Dir, Split string
}

// Config is one build. Start from Defaults: its zero values are not the
// recipe's.
type Config struct {
	// Data is the BEIR folder trained on (corpus.jsonl, queries.jsonl,
	// qrels/train.tsv) and, unless SkipEval, measured on (qrels/test.tsv).
	Data string
	// Work holds everything the build makes, for resuming (default
	// $ANNA_HOME/work/Name).
	Work string
	// Base is what the cross-encoder starts from: a catalogue entry
	// (downloaded when absent), an installed model's name, an anna model
	// directory or a Hugging Face BERT checkpoint directory.
	Base string
	// Name is the installed reranker's name.
	Name string
	// Embedder is the embedding model (an anna model directory) of the
	// candidates and the teacher's cosine ("": the installed default).
	Embedder string
	// ModelsDir, DownloadsDir and EmbeddingCache default to $ANNA_HOME's.
	ModelsDir, DownloadsDir, EmbeddingCache string

	Steps        int     // optimizer steps
	BatchQueries int     // queries per step
	Group        int     // candidates per query: 1 positive + Group−1 mined negatives
	MaxLength    int     // tokens per (query, document) pair
	LR           float64 // peak learning rate
	Distill      float64 // weight of the KL distillation from the teacher's scores (0: none)
	Seed         uint64  // training seed
	// EvalEvery and CheckpointEvery are the trainer's held-out evaluation
	// and checkpoint intervals, in steps.
	EvalEvery, CheckpointEvery int

	// More are further sets mined (each indexed on its own) and trained on
	// with Data's train split; MoreRequireTop is their
	// mining.Options.RequireTop (1 for generated queries). With no Data,
	// More (and Pseudo) are the whole training data (a general reranker:
	// General).
	More           []Set
	MoreRequireTop int
	// Pseudo are BEIR folders (their corpus.jsonl alone is read) whose
	// extractive pseudo-queries (adapt.PseudoQuery: a document's title,
	// else its first sentence) are mined like a judged set — a query kept
	// only where the teacher ranks its document first — and trained on
	// with the query cut out of its document (adapt.Cloze), at most
	// PseudoQueries a corpus (0: every one) spread over it. Every tenth
	// document's query is never trained on: it is the pseudo-query check's
	// (Check).
	Pseudo        []string
	PseudoQueries int
	// PerQuery caps the examples one query contributes (a judged query
	// has one per relevant document: CISI's have 41 on average) and PerSet
	// those one set contributes, spread over it (0: no cap), so that no
	// collection outweighs the others.
	PerQuery, PerSet int
	// TeacherModels are embedding model directories whose cosines join
	// the mining teacher (signals of its calibrated fusion) and whose
	// whole-corpus retrieval, fused with BM25's, pseudo-judges the check
	// (adapt.PseudoJudge).
	TeacherModels []string
	// Check, with TeacherModels, measures the reranker on each Pseudo
	// corpus's held-out pseudo-queries (at most CheckQueries a corpus):
	// hybrid's top Depth reranked against hybrid, both scored by nDCG@10
	// against the pseudo-judgments, recorded in its manifest as split
	// "pseudo" — what decides, with the judged measurements, whether anna
	// uses it unasked (model.Manifest.Helps).
	Check        bool
	CheckQueries int
	// MineDir holds the collections' indexes and mined sets (default
	// Work): builds that share it (a leave-one-out series) index and mine
	// each set once.
	MineDir string

	// Depth is how many candidates of each list the reranker rescores when
	// measured (1 to 100).
	Depth int
	// Evals are more BEIR folders measured on (split test) and recorded.
	Evals []string
	// SkipEval leaves the model unmeasured: installed, it is then used only
	// when named (--reranker NAME), never unasked.
	SkipEval bool
	// NoInstall leaves the model in Work/ce/model.
	NoInstall bool

	// Progress, when set, is called as each stage advances.
	Progress func(Progress)
	// Logf, when set, receives what each stage found and did.
	Logf func(format string, args ...any)
}

// Defaults is the recipe `make reranker` runs: bge-small-en-v1.5, SciFact
// from $ANNA_HOME/datasets/scifact, 120 steps × 8 queries × 8 candidates ×
// 192 tokens, lr 7e-5, distillation 1, seed 42, top 100 measured.
func Defaults() Config {
	return Config{
		Base: DefaultBase, Name: DefaultName,
		Steps: 120, BatchQueries: 8, Group: 8, MaxLength: 192, LR: 7e-5, Distill: 1, Seed: 42,
		EvalEvery: 40, CheckpointEvery: 10, Depth: 100,
		PseudoQueries: 400, PerQuery: 4, PerSet: 800,
	}
}

// DefaultData is where Defaults looks for SciFact: $ANNA_HOME/datasets/scifact.
func DefaultData() string { return filepath.Join(home.Dir(), "datasets", "scifact") }

// Progress is a stage's state.
type Progress struct {
	Stage         string // e.g. "train", "mine scifact train", "measure scifact test: rerank"
	Index, Stages int    // this stage is Index of Stages (1-based)
	Unit          string // documents, queries, steps, pairs, MB
	Done, Total   int
	// PerUnit is the time per unit measured in this process after the
	// stage's first unit; 0 until then. ETA is (Total − Done) × PerUnit.
	PerUnit, ETA time.Duration
	Detail       string // the stage's latest figures (training loss, held-out accuracy)
}

// Result is what a build made.
type Result struct {
	Model     string // the trained model, Work/ce/model
	Installed string // ModelsDir/Name; "" with NoInstall
	Steps     int
	// Measured are the measurements recorded in the model's manifest by
	// this build (all of them, measured now or by the run it resumed).
	Measured []model.Measurement
	// Took is the wall time of each stage run in this call, by name.
	Took map[string]time.Duration
}

// CheckData returns nil when dir holds what the recipe trains on (and,
// with test, measures on), else an error wrapping ErrData that says what is
// missing and where SciFact comes from.
func CheckData(dir string, test bool) error {
	need := []string{beir.CorpusPath(dir), beir.QueriesPath(dir), beir.QrelsPath(dir, "train")}
	if test {
		need = append(need, beir.QrelsPath(dir, "test"))
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("recipe: %w: %s is missing. The recipe trains on a BEIR folder — corpus.jsonl, queries.jsonl, "+
				"qrels/train.tsv and, to measure the reranker, qrels/test.tsv — by default SciFact's, expected at %s: BEIR's "+
				"https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip unzipped there holds them "+
				"(or name another folder; skipping the measurement needs no test split)", ErrData, p, DefaultData())
		}
	}
	return nil
}

// settings are what decide the trained model; recipe.json records them.
type settings struct {
	Data, Base, Embedder               string
	Steps, BatchQueries, Group, MaxLen int
	LR, Distill                        float64
	Seed                               uint64
	More                               []Set
	MoreRequireTop                     int
	Pseudo                             []string `json:",omitempty"`
	PseudoQueries, PerQuery, PerSet    int      `json:",omitempty"`
	TeacherModels                      []string `json:",omitempty"`
}

// state is Work/recipe.json.
// state is recipe.json: the settings and the finished stages.
type state = stagefile.Record[settings, struct{}]

// build is one Build call's wiring.
type build struct {
	cfg    Config
	st     *state
	stages []string
	stage  int // index in stages of the running one
	meter  meter
	took   map[string]time.Duration
}

func (b *build) logf(format string, args ...any) {
	if b.cfg.Logf != nil {
		b.cfg.Logf(format, args...)
	}
}

// validate checks the settings and fills the paths' defaults.
func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"Steps", c.Steps}, {"BatchQueries", c.BatchQueries}, {"MaxLength", c.MaxLength}, {"EvalEvery", c.EvalEvery}, {"CheckpointEvery", c.CheckpointEvery}} {
		if f.v < 1 {
			return fmt.Errorf("recipe: %s must be at least 1 (got %d)", f.name, f.v)
		}
	}
	switch {
	case c.Group < 2:
		return fmt.Errorf("recipe: Group must be at least 2, a positive and a negative (got %d)", c.Group)
	case !(c.LR > 0 && c.LR < 1):
		return fmt.Errorf("recipe: LR must be in (0, 1) (got %g)", c.LR)
	case !(c.Distill >= 0 && c.Distill <= 1e3):
		return fmt.Errorf("recipe: Distill must be in [0, 1000] (got %g)", c.Distill)
	case !c.SkipEval && (c.Depth < 1 || c.Depth > 100):
		return fmt.Errorf("recipe: Depth must be 1 to 100, the candidates measured being each list's top 100 (got %d)", c.Depth)
	case c.MoreRequireTop < 0:
		return fmt.Errorf("recipe: MoreRequireTop must not be negative (got %d)", c.MoreRequireTop)
	case c.Base == "" || c.Name == "" || c.Name != filepath.Base(c.Name) || c.Name == "." || c.Name == "..":
		return fmt.Errorf("recipe: Base %q and Name %q must be set, Name one path element", c.Base, c.Name)
	}
	if c.Data == "" && len(c.More) == 0 && len(c.Pseudo) == 0 {
		c.Data = DefaultData()
	}
	switch {
	case c.PseudoQueries < 0 || c.PerQuery < 0 || c.PerSet < 0 || c.CheckQueries < 0:
		return fmt.Errorf("recipe: PseudoQueries, PerQuery, PerSet and CheckQueries must not be negative")
	case c.Check && len(c.TeacherModels) == 0:
		return fmt.Errorf("recipe: Check pseudo-judges with the teacher models: give TeacherModels")
	}
	// Copies: the paths are made absolute below, the caller's slices kept.
	c.More, c.Evals = append([]Set(nil), c.More...), append([]string(nil), c.Evals...)
	c.Pseudo, c.TeacherModels = append([]string(nil), c.Pseudo...), append([]string(nil), c.TeacherModels...)
	names := map[string]string{}
	if c.Data != "" {
		if err := CheckData(c.Data, !c.SkipEval); err != nil {
			return err
		}
		names[filepath.Base(filepath.Clean(c.Data))] = c.Data
	}
	for i, d := range c.Pseudo {
		if _, err := os.Stat(beir.CorpusPath(d)); err != nil {
			return fmt.Errorf("recipe: Pseudo %s: %w", d, err)
		}
		c.Pseudo[i] = abs(d)
	}
	for i, t := range c.TeacherModels {
		if !isDir(t) {
			return fmt.Errorf("recipe: teacher model %s is not a model directory", t)
		}
		c.TeacherModels[i] = abs(t)
	}
	for _, s := range c.More {
		if s.Dir == "" || s.Split == "" {
			return fmt.Errorf("recipe: More set %+v: want a folder and a split", s)
		}
		if _, err := os.Stat(beir.QrelsPath(s.Dir, s.Split)); err != nil {
			return fmt.Errorf("recipe: More set %s: %w", s.Dir, err)
		}
	}
	for _, d := range c.Evals {
		n := filepath.Base(filepath.Clean(d))
		if prev, ok := names[n]; ok {
			return fmt.Errorf("recipe: Evals %s: its name %q is %s's too (measurements are recorded by the folder's name)", d, n, prev)
		}
		names[n] = d
		if _, err := os.Stat(beir.QrelsPath(d, "test")); err != nil {
			return fmt.Errorf("recipe: Evals %s: %w", d, err)
		}
	}
	// Absolute paths: what recipe.json records and keys its stages by
	// does not depend on the working directory.
	if c.Data != "" {
		c.Data = abs(c.Data)
	}
	for i := range c.More {
		c.More[i].Dir = abs(c.More[i].Dir)
	}
	for i := range c.Evals {
		c.Evals[i] = abs(c.Evals[i])
	}
	if c.ModelsDir == "" {
		c.ModelsDir = home.ModelsDir()
	}
	if c.DownloadsDir == "" {
		c.DownloadsDir = home.DownloadsDir()
	}
	if c.EmbeddingCache == "" {
		c.EmbeddingCache = home.EmbeddingCacheDir()
	}
	if c.Embedder == "" {
		c.Embedder = home.DefaultModel()
	}
	if c.Work == "" {
		c.Work = filepath.Join(home.Dir(), "work", c.Name)
	}
	c.Embedder, c.Work = abs(c.Embedder), abs(c.Work)
	if c.MineDir == "" {
		c.MineDir = c.Work
	}
	c.MineDir = abs(c.MineDir)
	if c.CheckQueries == 0 {
		c.CheckQueries = 200
	}
	return nil
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// Build runs the recipe, resuming the work in cfg.Work. Cancelling ctx
// stops it at the next unit boundary of the running stage (a document
// batch, a query, a step, a query's pairs) with an error wrapping
// context.Canceled; calling Build again with the same settings continues.
func Build(ctx context.Context, cfg Config) (*Result, error) {
	ctx = safe.Ctx(ctx)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &build{cfg: cfg, took: map[string]time.Duration{}}
	if err := b.open(); err != nil {
		return nil, err
	}
	c := &b.cfg
	b.plan()
	res := &Result{Model: filepath.Join(c.Work, "ce", "model"), Took: b.took}
	var mined []string
	for i, s := range b.sets() {
		out, err := b.mineSet(ctx, s, i)
		if err != nil {
			return nil, b.stopped(err)
		}
		mined = append(mined, out)
	}
	for _, d := range c.Pseudo {
		out, err := b.minePseudo(ctx, d)
		if err != nil {
			return nil, b.stopped(err)
		}
		mined = append(mined, out)
	}
	input, err := b.join(mined)
	if err != nil {
		return nil, err
	}
	steps, err := b.train(ctx, input)
	if err != nil {
		return nil, b.stopped(err)
	}
	res.Steps = steps
	if !c.SkipEval {
		for _, d := range b.measured() {
			if err := b.measure(ctx, d, res.Model); err != nil {
				return nil, b.stopped(err)
			}
		}
		if len(c.Evals) == 0 && c.Data != "" {
			b.logf("measured on %s alone: where its measurements say it helps, search --mode rerank and mining take it unasked on every collection; Evals (--eval DIR) measures it on more", filepath.Base(filepath.Clean(c.Data)))
		}
	}
	if c.Check {
		for _, d := range c.Pseudo {
			if err := b.check(ctx, d, res.Model); err != nil {
				return nil, b.stopped(err)
			}
		}
	}
	man, err := model.LoadManifest(res.Model)
	if err != nil {
		return nil, err
	}
	res.Measured = man.Measured
	if !c.NoInstall {
		if err := b.run("install as "+c.Name, func() error {
			_, err := installed.Add(ctx, res.Model, c.ModelsDir, c.Name)
			return err
		}); err != nil {
			return nil, b.stopped(err)
		}
		res.Installed = filepath.Join(c.ModelsDir, c.Name)
	}
	return res, nil
}

// stopped says, for a cancelled run, that Build with the same settings
// goes on.
func (b *build) stopped(err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("recipe: stopped in stage %q (%w); build again with the same settings to continue from %s", b.stages[b.stage], err, b.cfg.Work)
	}
	return err
}

// open reads Work/recipe.json, or starts it, refusing other settings.
func (b *build) open() error {
	c := &b.cfg
	more := append([]Set{}, c.More...)
	want := settings{Data: c.Data, Base: c.Base, Embedder: c.Embedder, Steps: c.Steps, BatchQueries: c.BatchQueries, Group: c.Group,
		MaxLen: c.MaxLength, LR: c.LR, Distill: c.Distill, Seed: c.Seed, More: more, MoreRequireTop: c.MoreRequireTop,
		Pseudo: c.Pseudo, PseudoQueries: c.PseudoQueries, PerQuery: c.PerQuery, PerSet: c.PerSet, TeacherModels: c.TeacherModels}
	if isDir(c.Base) {
		want.Base = abs(c.Base)
	}
	st, err := stagefile.Open[settings, struct{}]("recipe", "build", c.Work, "recipe.json", want)
	if err != nil {
		return err
	}
	b.st = st
	return nil
}

// done marks a stage finished, for resuming.
func (b *build) done(key string) error { return b.st.Finish(key) }

// plan names the stages and logs the work they count.
func (b *build) plan() {
	c := &b.cfg
	for _, s := range b.sets() {
		b.stages = append(b.stages, "mine "+setName(s))
	}
	for _, d := range c.Pseudo {
		b.stages = append(b.stages, "mine "+pseudoName(d))
	}
	b.stages = append(b.stages, "train")
	if !c.SkipEval {
		for _, d := range b.measured() {
			b.stages = append(b.stages, "measure "+filepath.Base(filepath.Clean(d))+" test")
		}
	}
	if c.Check {
		for _, d := range c.Pseudo {
			b.stages = append(b.stages, "check "+pseudoName(d))
		}
	}
	if !c.NoInstall {
		b.stages = append(b.stages, "install as "+c.Name)
	}
	b.logf("building reranker %s from %s in %s: %s; training %d steps × %d queries × %d candidates × %d tokens (lr %g, distillation %g, seed %d)",
		c.Name, c.Base, c.Work, strings.Join(b.stages, ", "), c.Steps, c.BatchQueries, c.Group, c.MaxLength, c.LR, c.Distill, c.Seed)
}

func setName(s Set) string { return filepath.Base(filepath.Clean(s.Dir)) + " " + s.Split }

// sets are the judged sets mined: Data's train split (when there is a
// Data), then More.
func (b *build) sets() []Set {
	if b.cfg.Data == "" {
		return b.cfg.More
	}
	return append([]Set{{b.cfg.Data, "train"}}, b.cfg.More...)
}

// measured are the collections measured on their test split: Data (when
// there is one), then Evals.
func (b *build) measured() []string {
	if b.cfg.Data == "" {
		return b.cfg.Evals
	}
	return append([]string{b.cfg.Data}, b.cfg.Evals...)
}

// enter starts stage name: the meter restarts.
func (b *build) enter(name string) {
	for i, s := range b.stages {
		if s == name {
			b.stage = i
		}
	}
	b.meter = meter{}
}

// run runs a stage that reports no units of its own.
func (b *build) run(name string, f func() error) error {
	b.enter(name)
	t0 := time.Now()
	b.report(name, "", 0, 0, "")
	err := f()
	b.took[name] += time.Since(t0)
	return err
}

// report sends one Progress, the rate measured from the stage's first
// report in this process.
func (b *build) report(stage, unit string, done, total int, detail string) {
	if b.cfg.Progress == nil {
		return
	}
	per := b.meter.perUnit(done, time.Now())
	p := Progress{Stage: stage, Index: b.stage + 1, Stages: len(b.stages), Unit: unit, Done: done, Total: total, PerUnit: per, Detail: detail}
	if per > 0 && total > done {
		p.ETA = per * time.Duration(total-done)
	}
	b.cfg.Progress(p)
}

// meter measures time per unit from its first reading past base (the
// units done before this process began, or none): the first unit run here,
// with its warm-up, is left out.
type meter struct {
	base    int
	t0      time.Time
	d0      int
	started bool
}

func (m *meter) perUnit(done int, now time.Time) time.Duration {
	if !m.started {
		if done > m.base {
			m.started, m.t0, m.d0 = true, now, done
		}
		return 0
	}
	if done <= m.d0 {
		return 0
	}
	return now.Sub(m.t0) / time.Duration(done-m.d0)
}
