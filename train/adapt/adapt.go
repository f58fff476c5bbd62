// Package adapt fits an index's embedding model to its own documents when
// there are no relevance judgements: `annactl adapt` as functions, so a Go
// program can adapt its own index.
//
// Adapt runs five stages, each recorded in Work/adapt.json when finished
// and skipped when run again:
//
//  1. queries: extractive pseudo-queries cut from the index's documents
//     (the title, else the first sentence: the inverse-cloze recipe), their
//     source document as the candidate positive; with Config.Generate N,
//     queries written by an instruct decoder (package doc2query, the
//     Config.Generator GGUF file: what `annactl doc2query` runs) for N
//     documents chosen with the seed, each query's source document its
//     candidate positive; plus the lines of Config.Queries (a query log,
//     one query a line), whose candidate positive is the engine's hybrid
//     top document. Every tenth query, whatever its source, is held out of
//     training (Work/heldout.jsonl, Work/heldout-log.jsonl) for stage 4.
//     Generation is the slow part on a CPU (seconds a document for
//     SmolLM2-135M): its queries are appended to
//     Work/generated/queries.jsonl a batch of GenerateBatch documents at a
//     time and reused when the stage runs again, so a stopped run loses at
//     most the batch it was decoding; a cancel is seen between tokens
//     (within a second on a CPU); the documents it writes for are kept in
//     Work/generated/corpus.jsonl. Its time is measured on the first batch
//     a run decodes and added to the estimate then.
//  2. mine: the miner (package mining) with the engine's hybrid retrieval
//     and the calibrated fusion teacher (BM25 and the index's model, plus
//     Config.TeacherModel's cosine when set) labels candidates with soft
//     scores; a query's positive is kept only when the teacher ranks it
//     first (mining.Options.RequireTop = 1): labels come from the teacher,
//     never from the student alone. A logged query's positive, the
//     engine's guess, must also pass a calibrated threshold: the teacher's
//     score (the calibrated log-odds that the document is relevant) must
//     be at least the LogQuantile quantile of the teacher's scores of the
//     confirmed positives of the extractive and generated training queries
//     — queries whose relevant document is known by construction — so a
//     logged query is kept only when the teacher is as sure of its top
//     document as it is of nine in ten documents it confirmed where the
//     answer is known. With fewer than MinReference such scores the
//     threshold is 0, even odds under the calibration. Held-out logged
//     queries are held to the same threshold. The threshold and the logged
//     queries it kept and dropped are in the Report. (On Cranfield with its
//     225 queries as the log, the top document was relevant for 137 of the
//     161 the teacher ranked first, 0.85, and for 71 of the 77 that also
//     reached the threshold, 0.92; even odds would have kept 100, 0.89.)
//     In Work/mined.jsonl and Work/heldout-mined.jsonl a query found
//     verbatim in its positive (an extractive one: a title or first
//     sentence) is cut out of it, the inverse-cloze task (Lee et al.,
//     2019), unless Config.KeepQueryInPositive: left in, the student learns
//     to find the words it was given, and the check scores both models
//     near 1.
//  3. train: the student (Config.Base, by default the training source of the
//     index's model; for an int8 model that records no checkpoint, the
//     catalogue's NAME-int8, the source of its float32 form NAME installed
//     beside it) is fine-tuned contrastively with distillation from the
//     teacher's scores (train.Run), checkpointing and resuming. The model
//     served is the weight-space ensemble of the trained student and its
//     start (WiSE-FT, Wortsman et al., 2022): each weight base +
//     Config.Mix·(trained − base), exported at float32 (Report.Model) at
//     the length the index's model is served at. (On the ten students
//     measured, Mix 0.5 turned every dense loss on Cranfield, CISI and
//     SciFact into a gain and kept most of the log-trained students' gain;
//     docs/results/adapt.md.) Mix 1 serves the trained student; decoder
//     students are served as trained.
//  4. check: the adapted model keeps the index's precision (its model's
//     manifest's Quantization): for an int8 index the float32 student is
//     first converted to int8 as `annactl models import --quantize int8`
//     converts (internal/model/onnx, Settings.Quantize) into Report.Model + "-int8";
//     the model that will serve is recorded (Report.Precision,
//     Report.Served) in Work/adapt.json once converted, so the check run
//     again and the reindex reuse it. A float32 index serves the float32
//     student. Then the check, the first of three that applies:
//     with Config.Judged, the user's judged queries (CheckJudged); with
//     Config.TeacherModel, every held-out query (at most
//     maxCheckQueries; CheckCorpus); then both models search the whole
//     corpus (exact cosine; the index's model's side reads the index's
//     stored vectors of documents held as one vector; the student's
//     vectors go through Work/student-vectors, which the reindex reads
//     back, so the corpus is embedded once) and their top 10 are scored by
//     nDCG@10 against the judgments, or for a held-out query against the
//     top 10 of BM25 fused by RRF with the teacher model's whole-corpus
//     retrieval — lists neither model made. Without either, the held-out
//     queries are mined like the training ones (kept only where the
//     teacher ranks their document first) and each model ranks one's
//     candidates (that document and its Group−1 mined negatives), scored
//     by nDCG@10 against the teacher's document (CheckCandidates, the
//     weakest: measured against the judged outcome of nine runs it
//     agreed in 3, the whole-corpus check in 9 of 11;
//     docs/results/adapt.md).
//     When the student scores below the index's model plus
//     Config.MinGain, Adapt returns ErrWorse and leaves the index alone.
//     The stage is not recorded as done then: run again (another MinGain
//     allowed, or judged queries) it checks again.
//  5. reindex: engine.Reindex with the served student (Report.Served: int8
//     for an int8 index, so the index stays int8), itself resumable.
//
// Serving the ensemble (Config.Serve ServeEnsemble) instead, nothing is
// trained: its stages (EnsembleStages) are the queries as above; calibrate,
// the fusion teacher calibrated as stage 2 calibrates it, without mining;
// ensemble, the index's model and Config.TeacherModels joined as one
// encoder.Ensemble, each weighted by the teacher's calibrated weight of its
// cosine over that cosine's standard deviation (so the ensemble's cosine
// ranks as the teacher's dense signals together do), written to
// Work/ensemble; then reindex and fusion as below. There is no held-out
// check: without judged queries adapt's judges are made of the same models.
// Measured in docs/results/adapt.md: hybrid nDCG@10 +0.0116 on average over
// SciFact, Cranfield, CISI and CACM, at every model's forward per text.
//
// Resuming: everything lives in Config.Work. Adapt called again with the
// same settings after a cancel, Ctrl-C or kill -9 goes on where it stopped:
// the query files are written atomically, generation goes on from the
// queries it has appended, mining continues from its
// checkpoint, training from its last checkpoint, the int8 conversion is
// written beside its destination and renamed (redone when stopped before
// it was recorded), reindexing embeds only what is missing. A run with
// other settings is refused, naming the setting.
//
// Not yet: a logged query's positives are its single top document (not
// every document above the threshold), and the generator is zero-shot (no
// few-shot examples, since there are no judged pairs to show it).
package adapt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/stagefile"
)

// ErrWorse is returned when the held-out check says the student is not
// better than the index's model: the index is not reindexed.
var ErrWorse = errors.New("the adapted model scored worse than the index's model on the held-out queries")

// Config configures Adapt. Index is required; the rest has defaults
// (Defaults).
type Config struct {
	Index string // the index directory to adapt
	Work  string // work directory (default Index + ".adapt")
	// Base is the student's starting checkpoint (Hugging Face files); ""
	// means the training source recorded in the index model's manifest.
	Base string
	// Queries is a query log, one query a line ("" for none).
	Queries string
	// NoExtractive leaves out the pseudo-queries cut from documents.
	NoExtractive bool
	// KeepQueryInPositive trains extractive queries against their whole
	// document; by default the query is cut out of its positive (the
	// inverse-cloze task; see Cloze).
	KeepQueryInPositive bool
	// TeacherModels are other (stronger) embedding models, each a model
	// directory, whose cosines join the fusion teacher (each a signal of
	// its calibrated fusion) and whose whole-corpus retrieval, fused with
	// BM25's, judges the held-out check (CheckCorpus).
	// DefaultTeacherModels lists what `annactl adapt` uses by default.
	TeacherModels []string
	// Judged, when set, is a file of judged queries (JSON lines {"query",
	// "pos_ids"}: the index's documents relevant to each) that the check
	// uses instead of held-out pseudo-queries: both models search the
	// whole corpus, scored by nDCG@10 against the judgments. They are
	// never trained on.
	Judged string
	// LogThreshold, when set, replaces the calibrated threshold a logged
	// query's top document must reach (the teacher's calibrated log-odds;
	// math.Inf(-1) keeps every logged query whose engine guess the teacher
	// ranks first). nil: the LogQuantile quantile described above.
	LogThreshold *float64
	// Generate, when > 0, writes a query for each of Generate documents
	// (chosen with Seed) with the instruct decoder in Generator, a llama
	// GGUF file with a ChatML template (doc2query.Load; `annactl adapt`
	// resolves the catalogue's smollm2-135m-instruct, as `annactl
	// doc2query` does).
	Generate  int
	Generator string

	Steps, BatchQueries, Group, MaxLength, CheckpointEvery int
	LR, Distill                                            float64
	Seed                                                   uint64
	// Mix, in (0, 1], is how far the served student's weights move from
	// its starting checkpoint's towards the trained ones (see stage 3).
	Mix        float64
	MaxQueries int     // cap on the queries used (0: all)
	MinGain    float64 // the student must beat the base by this much nDCG@10 (default 0)
	// KeepModel copies the student under $ANNA_HOME/models before the
	// reindex (engine.Options.KeepModel), so deleting Work breaks nothing.
	KeepModel bool
	// KeepFusion leaves the index's fusion alone (stage 6 is skipped).
	KeepFusion bool
	// NegativesFrom is the search whose top candidates the miner labels and
	// samples negatives from: engine.ModeHybrid (""; BM25 and the index's
	// model fused) or engine.ModeLexical (BM25 alone: documents that share
	// the query's words and that the teacher finds not relevant, the ones
	// a dense list fused with BM25 must push down; DPR's negatives).
	NegativesFrom engine.Mode
	// TeacherWithoutBM25 leaves BM25 out of the teacher's signals (the
	// index's model and the teacher models' cosines only): on pseudo-queries
	// cut from the documents BM25 finds the source almost always, so the
	// calibrated teacher weighs it most, and a student taught by it grows
	// like the BM25 list it is then fused with. Candidates are still
	// retrieved by NegativesFrom.
	TeacherWithoutBM25 bool
	// Serve is what the run serves: ServeStudent ("" too, the default) or
	// ServeEnsemble, the calibrated teacher's models as one ensemble
	// (needs TeacherModels; its stages are EnsembleStages).
	Serve string

	Progress func(Progress)
	Logf     func(format string, args ...any)
}

// Defaults are the settings `annactl adapt` starts from.
func Defaults() Config {
	return Config{Steps: 200, BatchQueries: 16, Group: 8, MaxLength: 128, CheckpointEvery: 20, LR: 2e-5, Distill: 1, Seed: 42, Mix: 0.5}
}

// Progress is one report of a stage's work.
type Progress struct {
	Stage         string
	Index, Stages int
	Unit          string
	Done, Total   int
	// PerUnit is the time per unit measured since the first report of the
	// stage's current unit in this process (0 until some are done after
	// it); ETA the rest at that rate.
	PerUnit, ETA time.Duration
}

// Report is what a run did.
type Report struct {
	Queries, HeldOut int // queries written for training, held out
	Generated        int // of them, generated (doc2query), training and held out
	Logged           int // of them, from the query log, training and held out
	Examples         int // mined training examples
	Filtered         int // positives the teacher did not rank first
	// LogThreshold is the teacher's score a logged training query's top
	// document needed (see the package doc); LogKept and LogDropped count
	// the logged training queries the teacher ranked first that reached it
	// and did not; LogReference the confirmed scores it was taken from (0:
	// too few, the threshold is even odds; -1: Config.LogThreshold gave it).
	LogThreshold                      float64
	LogKept, LogDropped, LogReference int
	Steps                             int     // training steps
	Model                             string  // the served student's model directory (float32; mixed with the base unless Mix is 1)
	Trained                           string  // the trained student's model directory, before the mix
	BaseScore                         float64 // base model's held-out nDCG@10
	StudentScore                      float64 // student's held-out nDCG@10
	CheckQueries                      int     // held-out queries scored
	Check                             string  // which check scored them: CheckJudged, CheckCorpus or CheckCandidates
	Reindexed                         bool
	Estimate                          time.Duration // the up-front estimate
	Took                              map[string]time.Duration

	// Precision is the index's model's quantization, which the adapted
	// model keeps: "" (float32) or "int8". Served is the model the check
	// scored and the reindex serves: Model for a float32 index, its int8
	// conversion (Model + "-int8") for an int8 one. Both are recorded by
	// the check ("" before it).
	Precision, Served string

	// Serve is ServeEnsemble when the run served the ensemble ("" for the
	// student).
	Serve string `json:",omitempty"`

	// FusionScores are the fusion stage's hybrid nDCG@10 of each fusion
	// tried on FusionQueries queries (pseudo-judged, or judged with
	// Config.Judged); Fusion is the one it recorded with judged queries,
	// or the one the index keeps with pseudo-judged ones ("" when the
	// stage did not run: no teacher model, or KeepFusion).
	FusionScores  map[string]float64 `json:",omitempty"`
	Fusion        string             `json:",omitempty"`
	FusionQueries int                `json:",omitempty"`
}

// The held-out checks (Report.Check; see the package doc).
const (
	// CheckCorpus: whole-corpus retrieval of every held-out query,
	// against the top 10 of BM25 fused with Config.TeacherModel.
	CheckCorpus = "whole corpus against BM25 + the teacher model"
	// CheckJudged: whole-corpus retrieval of Config.Judged's queries,
	// against their judgments.
	CheckJudged = "whole corpus against your judged queries"
	// CheckCandidates: the teacher's document among its mined
	// candidates (no Config.TeacherModel).
	CheckCandidates = "the teacher's document among its candidates"
)

// Stages are the stage names, in order.
var Stages = []string{"queries", "mine", "train", "check", "reindex", "fusion"}

type settings struct {
	Base, Queries, Generator string
	// TeacherModel is the one teacher model of a run (so that a work
	// folder begun with one resumes); TeacherModels, more than one.
	TeacherModel                                      string   `json:",omitempty"`
	TeacherModels                                     []string `json:",omitempty"`
	Generate                                          int
	NoExtractive, KeepQueryInPositive                 bool
	LogThreshold                                      string `json:",omitempty"` // "": calibrated
	NegativesFrom                                     string `json:",omitempty"` // "": hybrid
	TeacherWithoutBM25                                bool   `json:",omitempty"`
	Serve                                             string `json:",omitempty"` // "": the student
	Steps, BatchQueries, Group, MaxLength, MaxQueries int
	LR, Distill                                       float64
	Seed                                              uint64
	Mix                                               float64
}

// state is adapt.json: the settings, the finished stages and the report
// so far.
type state = stagefile.Record[settings, Report]

type run struct {
	cfg   Config
	st    *state
	stage int
	unit  string
	t0    time.Time
	// genBatch, when > 0, replaces GenerateBatch (tests).
	genBatch int
	done0    int
	// embedBase, in tests, embeds the index model's side of the check
	// instead of reading stored vectors; storedHits counts those read.
	embedBase  bool
	storedHits int
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// report sends progress, the ETA from the rate measured since the first
// report of the stage's unit with some work done (a unit's first report at
// 0 done starts the clock: doc2query's, before its first batch).
func (r *run) report(unit string, done, total int) {
	if r.cfg.Progress == nil {
		return
	}
	names, _ := r.stageFuncs()
	p := Progress{Stage: names[r.stage], Index: r.stage + 1, Stages: len(names), Unit: unit, Done: done, Total: total}
	if unit != r.unit {
		r.unit, r.t0 = unit, time.Time{}
	}
	if r.t0.IsZero() && (done > 0 || unit != "") {
		r.t0, r.done0 = time.Now(), done
	} else if !r.t0.IsZero() && done > r.done0 {
		p.PerUnit = time.Since(r.t0) / time.Duration(done-r.done0)
		if total > done {
			p.ETA = p.PerUnit * time.Duration(total-done)
		}
	}
	r.cfg.Progress(p)
}

func (c *Config) validate() error {
	if c.Index == "" {
		return errors.New("adapt: Index is required")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Steps", c.Steps}, {"BatchQueries", c.BatchQueries}, {"MaxLength", c.MaxLength}, {"CheckpointEvery", c.CheckpointEvery}} {
		if f.v < 1 {
			return fmt.Errorf("adapt: %s must be at least 1 (got %d)", f.name, f.v)
		}
	}
	switch {
	case c.Group < 2:
		return fmt.Errorf("adapt: Group must be at least 2 (got %d)", c.Group)
	case !(c.LR > 0 && c.LR < 1):
		return fmt.Errorf("adapt: LR must be in (0, 1) (got %g)", c.LR)
	case !(c.Mix > 0 && c.Mix <= 1):
		return fmt.Errorf("adapt: Mix must be in (0, 1] (got %g)", c.Mix)
	case !(c.Distill >= 0 && c.Distill <= 1e3):
		return fmt.Errorf("adapt: Distill must be in [0, 1000] (got %g)", c.Distill)
	case c.MaxQueries < 0:
		return fmt.Errorf("adapt: MaxQueries must not be negative (got %d)", c.MaxQueries)
	case c.Generate < 0:
		return fmt.Errorf("adapt: Generate must not be negative (got %d)", c.Generate)
	case c.NegativesFrom != "" && c.NegativesFrom != engine.ModeHybrid && c.NegativesFrom != engine.ModeLexical:
		return fmt.Errorf("adapt: NegativesFrom must be %s or %s (got %q)", engine.ModeHybrid, engine.ModeLexical, c.NegativesFrom)
	case c.Generate > 0 && c.Generator == "":
		return errors.New("adapt: Generate needs Generator, the decoder's GGUF file")
	case c.NoExtractive && c.Queries == "" && c.Generate == 0:
		return errors.New("adapt: no queries: give a query log (Queries), generated queries (Generate) or keep the extractive pseudo-queries")
	case c.Serve != "" && c.Serve != ServeStudent && c.Serve != ServeEnsemble:
		return fmt.Errorf("adapt: Serve must be %s or %s (got %q)", ServeStudent, ServeEnsemble, c.Serve)
	case c.Serve == ServeEnsemble && len(c.TeacherModels) == 0:
		return hint.Errorf(hint.Action{Kind: hint.InstallModel, Model: DefaultTeacher}, "adapt: serving the ensemble (Serve %s) joins teacher models to the index's model, and TeacherModels names none: install a catalogue model and give it", ServeEnsemble)
	case c.Serve == ServeEnsemble && c.TeacherWithoutBM25:
		return errors.New("adapt: Serve ensemble weighs the models as a teacher with BM25 does (the list it is fused with): TeacherWithoutBM25 does not apply")
	}
	if c.Serve == ServeStudent {
		c.Serve = ""
	}
	if c.Judged != "" {
		if _, err := os.Stat(c.Judged); err != nil {
			return fmt.Errorf("adapt: the judged queries (Judged): %w", err)
		}
	}
	if fi, err := os.Stat(c.Index); err != nil || !fi.IsDir() {
		return fmt.Errorf("adapt: index %s is not a directory: %w", c.Index, errors.Join(err, os.ErrNotExist))
	}
	if c.Queries != "" {
		if _, err := os.Stat(c.Queries); err != nil {
			return fmt.Errorf("adapt: query log: %w", err)
		}
		c.Queries = abs(c.Queries)
	}
	if c.Generate > 0 {
		if fi, err := os.Stat(c.Generator); err != nil || fi.IsDir() {
			return fmt.Errorf("adapt: Generator %s is not a GGUF file: %w", c.Generator, errors.Join(err, os.ErrNotExist))
		}
		c.Generator = abs(c.Generator)
	} else {
		c.Generator = "" // unused: not a setting a rerun must repeat
	}
	c.Index = abs(c.Index)
	if c.Work == "" {
		c.Work = c.Index + ".adapt"
	}
	c.Work = abs(c.Work)
	if c.Base != "" {
		c.Base = abs(c.Base)
	}
	c.TeacherModels = slices.Clone(c.TeacherModels)
	for i, t := range c.TeacherModels {
		if fi, err := os.Stat(t); err != nil || !fi.IsDir() {
			return fmt.Errorf("adapt: teacher model %s is not a model directory: %w", t, errors.Join(err, os.ErrNotExist))
		}
		c.TeacherModels[i] = abs(t)
	}
	return nil
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func (r *run) open() error {
	c := &r.cfg
	want := settings{Base: c.Base, Queries: c.Queries, Generator: c.Generator, Generate: c.Generate,
		NoExtractive: c.NoExtractive, KeepQueryInPositive: c.KeepQueryInPositive, Steps: c.Steps,
		BatchQueries: c.BatchQueries, Group: c.Group, MaxLength: c.MaxLength, MaxQueries: c.MaxQueries,
		LR: c.LR, Distill: c.Distill, Seed: c.Seed, Mix: c.Mix}
	if c.NegativesFrom != engine.ModeHybrid {
		want.NegativesFrom = string(c.NegativesFrom)
	}
	want.TeacherWithoutBM25 = c.TeacherWithoutBM25
	want.Serve = c.Serve
	if c.Serve == ServeEnsemble { // nothing is trained: the training settings do not bind the work folder
		want.Steps, want.BatchQueries, want.MaxLength, want.LR, want.Distill, want.Mix = 0, 0, 0, 0, 0, 0
	}
	switch len(c.TeacherModels) {
	case 0:
	case 1:
		want.TeacherModel = c.TeacherModels[0]
	default:
		want.TeacherModels = c.TeacherModels
	}
	if c.LogThreshold != nil {
		want.LogThreshold = strconv.FormatFloat(*c.LogThreshold, 'g', -1, 64)
	}
	st, err := stagefile.Open[settings, Report]("adapt", "run", c.Work, "adapt.json", want)
	if err != nil {
		return err
	}
	r.st = st
	return nil
}

// Adapt runs the stages not yet recorded as done in cfg.Work (see the
// package doc). It returns ErrWorse, with the report, when the held-out
// check refuses the student.
func Adapt(ctx context.Context, cfg Config) (rep Report, err error) {
	ctx = safe.Ctx(ctx)
	return adapt(ctx, cfg, 0)
}

// adapt is Adapt, doc2query decoding genBatch documents together (> 0; 0
// for GenerateBatch).
func adapt(ctx context.Context, cfg Config, genBatch int) (rep Report, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	if err := refuseEnsembleStudent(cfg); err != nil {
		return Report{}, err
	}
	r := &run{cfg: cfg, genBatch: genBatch}
	if err := r.open(); err != nil {
		return Report{}, err
	}
	if r.st.Report.Took == nil {
		r.st.Report.Took = map[string]time.Duration{}
	}
	names, steps := r.stageFuncs()
	for i, f := range steps {
		name := names[i]
		if r.st.Done[name] {
			continue
		}
		r.stage, r.t0 = i, time.Time{}
		r.report("", 0, 0)
		t := time.Now()
		err := f(ctx)
		r.st.Report.Took[name] += time.Since(t)
		if err != nil {
			if errors.Is(err, ErrWorse) {
				return r.st.Report, err
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("adapt: stopped in stage %q (%w); run again with the same settings to continue from %s", name, err, r.cfg.Work)
			}
			return r.st.Report, err
		}
		r.st.Done[name] = true
		if err := r.st.Save(); err != nil {
			return r.st.Report, err
		}
	}
	return r.st.Report, nil
}
