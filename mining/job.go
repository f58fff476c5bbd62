package mining

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/rerank"
)

// Mine wires and runs the whole pipeline from files, as `annactl
// mine-negatives` does: the embedding model and its index of the corpus
// (built or completed from a BEIR folder), the other models' indexes, the
// teacher, the fusion teacher's calibration, the miner, and the stats file.

// The teachers Config.Teacher names.
const (
	TeacherDense        = "dense"         // the cosine of the embedding model
	TeacherFusion       = "fusion"        // the calibrated fusion of BM25, every model's cosine and the reranker's logit
	TeacherCrossEncoder = "cross-encoder" // the reranker's score alone
)

// Config is one mining run from files. Output and either Dataset or Input
// (with Index or Dataset for the corpus) are required.
type Config struct {
	Options Options // the miner's (start from DefaultOptions); Options.Progress is chained after Config.Progress

	// Dataset is a BEIR folder: its corpus is indexed into Index (unchanged
	// documents skipped) and, unless Input is set, its Split's qrels are
	// the input.
	Dataset, Split string
	Input          string // JSON lines of (query, positives) pairs (OpenPairs)
	// Index is the engine directory holding the corpus; "" with Dataset
	// is one under $ANNA_HOME/cache/mining per dataset and model.
	Index  string
	Output string // the mined JSON lines
	Stats  string // the stats summary as JSON ("" = Output + ".stats.json")
	// Model is the embedding model directory; "" is the one Index
	// records, else the installed default.
	Model string
	// Mode is the candidates' pipeline: engine.ModeLexical, ModeDense or
	// ModeHybrid ("" = hybrid).
	Mode engine.Mode
	// Teacher is TeacherDense, TeacherFusion or TeacherCrossEncoder (which
	// needs Reranker); "" chooses (DefaultTeacher).
	Teacher  string
	Reranker string // a cross-encoder's model directory: the teacher, or with TeacherFusion one of its signals
	// TeacherModels are other embedding models' directories, each with its
	// own index of Dataset's corpus (built once under the cache);
	// TeacherIndexes existing indexes of the same corpus. Their dense lists
	// join the candidates by RRF and their cosines the fusion teacher.
	TeacherModels, TeacherIndexes []string
	Calibrate                     int // queries whose labels calibrate the fusion teacher (default 256)
	Prompt                        PromptDefaults
	// Engine are the index's engine options (a remote backend, say);
	// Encoder, Model and Logf are set by Mine.
	Engine engine.Options

	Progress func(Progress)                   // long steps' progress (nil: none)
	Logf     func(format string, args ...any) // what the run found and did, a line each (nil: nothing)
}

// Progress is one report of a long step: Start (Done 0), then counts, then
// End.
type Progress struct {
	Stage       string // StageIndexing or StageMining
	Name        string // the corpus's folder, or the input's name
	Done, Total int    // Total 0: unknown
	Start, End  bool
}

// The long steps (Progress.Stage).
const (
	StageIndexing = "indexing" // the corpus into an index
	StageMining   = "mining"   // the input's queries
)

// CalibrationPath is where Mine keeps the fusion teacher's calibration
// beside output (reused by a resumed run).
func CalibrationPath(output string) string { return output + ".teacher.json" }

// StatsPath is the stats file Mine writes for c.
func (c *Config) StatsPath() string {
	if c.Stats != "" {
		return c.Stats
	}
	return c.Output + ".stats.json"
}

// DefaultTeacher is the teacher a run without one uses — the strongest
// scorer available: the cross-encoder given (reranker), else an installed
// one measured to help on its own (installed.HelpfulReranker: its scores
// alone label the pairs, so it must have helped alone, not only fused with
// the lists), else the calibrated fusion of BM25 and the cosines (on
// SciFact train its soft labels rank the positives at nDCG@10 0.734, the
// cosine alone at 0.676). It returns the teacher, the reranker it uses,
// whether that reranker was chosen here, and for a message the installed
// rerankers that were not.
func DefaultTeacher(reranker string) (teacher, rr string, chosen bool, others []string, err error) {
	if reranker == "" {
		dir, others, err := installed.HelpfulReranker(home.ModelsDir(), true)
		if err != nil || dir == "" {
			return TeacherFusion, "", false, others, err
		}
		return TeacherCrossEncoder, dir, true, nil, nil
	}
	return TeacherCrossEncoder, reranker, false, nil, nil
}

// job is one Mine run, wired.
type job struct {
	cfg    Config
	eng    *engine.Engine
	enc    *namedEncoder
	rr     *rerank.Model
	others []teacherEngine
}

func (j *job) logf(format string, args ...any) {
	if j.cfg.Logf != nil {
		j.cfg.Logf(format, args...)
	}
}

func (j *job) progress(p Progress) {
	if j.cfg.Progress != nil {
		j.cfg.Progress(p)
	}
}

func (c *Config) validate() error {
	switch {
	case c.Output == "":
		return errors.New("mining: no output file")
	case c.Dataset == "" && c.Input == "":
		return errors.New("mining: no input: give a BEIR dataset, or a pairs file with an index")
	case c.Dataset == "" && c.Index == "":
		return errors.New("mining: a pairs file needs an index (the corpus to mine from), or a BEIR dataset for the corpus")
	case len(c.TeacherModels) > 0 && c.Dataset == "":
		return errors.New("mining: a teacher model needs a BEIR dataset (its corpus is indexed with the model); give a teacher index for an index you built")
	case c.Mode == engine.ModeRerank:
		return errors.New("mining: candidates from lexical, dense or hybrid search (give a reranker to make the cross-encoder the teacher)")
	case c.Teacher == TeacherCrossEncoder && c.Reranker == "":
		return errors.New("mining: the cross-encoder teacher needs a reranker")
	}
	switch c.Teacher {
	case "", TeacherDense, TeacherFusion, TeacherCrossEncoder:
	default:
		return fmt.Errorf("mining: teacher %q: want %s, %s or %s", c.Teacher, TeacherDense, TeacherFusion, TeacherCrossEncoder)
	}
	return nil
}

// Mine runs the pipeline c describes and returns its stats (nil when it
// stopped before mining), which it also writes to c.StatsPath(). A
// cancelled ctx stops it at the miner's last checkpoint: Options.Resume
// continues it.
func Mine(ctx context.Context, c Config) (*Stats, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.Teacher == "" {
		var err error
		if c.Teacher, c.Reranker, _, _, err = DefaultTeacher(c.Reranker); err != nil {
			return nil, err
		}
	}
	if c.Calibrate <= 0 {
		c.Calibrate = 256
	}
	if c.Mode == "" {
		c.Mode = engine.ModeHybrid
	}
	j := &job{cfg: c}
	defer j.close()
	if err := j.open(ctx); err != nil {
		return nil, err
	}
	return j.run(ctx)
}

// open loads the models and opens (and fills) the indexes.
func (j *job) open(ctx context.Context) error {
	c := &j.cfg
	// The model behind the on-disk embedding cache: the corpus is embedded
	// once, and the teacher's query embedding is a cache hit after retrieval's.
	enc, err := loadEncoder(ctx, c.Model, c.Index)
	if err != nil {
		return err
	}
	j.enc = enc
	dir := c.Index
	if dir == "" {
		dir = defaultIndex(c.Dataset, enc.Fingerprint())
	}
	if c.Reranker != "" {
		if j.rr, err = rerank.Load(ctx, c.Reranker, rerank.Options{}); err != nil {
			return err
		}
	}
	opts := c.Engine
	opts.Encoder, opts.Model, opts.Logf = enc, c.Model, j.logf
	if j.eng, err = engine.Open(ctx, dir, opts); err != nil {
		return err
	}
	if c.Dataset != "" {
		if err := j.indexDataset(ctx, j.eng, c.Dataset); err != nil {
			return err
		}
	}
	// The other models of the pipeline: one engine (index of the same
	// corpus) each.
	for _, m := range c.TeacherModels {
		o, err := j.openTeacherEngine(ctx, m, "", c.Dataset)
		if err != nil {
			return fmt.Errorf("teacher model %s: %w", m, err)
		}
		j.others = append(j.others, o)
	}
	for _, dir := range c.TeacherIndexes {
		o, err := j.openTeacherEngine(ctx, "", dir, "")
		if err != nil {
			return fmt.Errorf("teacher index %s: %w", dir, err)
		}
		j.others = append(j.others, o)
	}
	return nil
}

func (j *job) close() {
	for _, o := range j.others {
		o.close()
	}
	if j.eng != nil {
		j.eng.Close()
	}
	if j.rr != nil {
		j.rr.Close()
	}
	if j.enc != nil {
		j.enc.close()
	}
}

// teacher builds the teacher the config names; fusion is set for the
// fusion teacher, which calibrate fits.
func (j *job) teacher() (t Teacher, fusion *FusionTeacher) {
	dense := func(enc *namedEncoder, eng *engine.Engine) Teacher {
		return &DenseTeacher{Enc: enc, Label: "dense:" + enc.label(), Vectors: StoredVectors(eng)}
	}
	switch j.cfg.Teacher {
	case TeacherDense:
		return dense(j.enc, j.eng), nil
	case TeacherCrossEncoder:
		return &CrossEncoderTeacher{R: j.rr, Label: "cross-encoder:" + j.rr.Manifest().Name}, nil
	}
	fusion = &FusionTeacher{Signals: []Teacher{MaxNormalized{Teacher: EngineLexical{E: j.eng}}, dense(j.enc, j.eng)}}
	for _, o := range j.others {
		fusion.Signals = append(fusion.Signals, dense(o.enc, o.eng))
	}
	if j.rr != nil {
		// A cross-encoder given with the fusion teacher is one more
		// signal: the calibration weighs it against the others.
		fusion.Signals = append(fusion.Signals, &CrossEncoderTeacher{R: j.rr, Label: "cross-encoder:" + j.rr.Manifest().Name})
	}
	return fusion, fusion
}

func (j *job) openSource(ctx context.Context) (Source, error) {
	if j.cfg.Input != "" {
		return OpenPairs(ctx, j.cfg.Input, j.cfg.Prompt)
	}
	return OpenBEIR(ctx, j.cfg.Dataset, j.cfg.Split, j.cfg.Prompt)
}

func (j *job) run(ctx context.Context) (*Stats, error) {
	c := &j.cfg
	teacher, fusion := j.teacher()
	opt := c.Options
	var name string // the input's, once its source is open
	next := opt.Progress
	opt.Progress = func(done, total int) {
		if name != "" {
			j.progress(Progress{Stage: StageMining, Name: name, Done: done, Total: total})
		}
		if next != nil {
			next(done, total)
		}
	}
	others := make([]*engine.Engine, len(j.others))
	for i, o := range j.others {
		others[i] = o.eng
	}
	miner, err := New(Pipeline(j.eng, c.Mode, others...), teacher, EngineCorpus{E: j.eng}, opt)
	if err != nil {
		return nil, err
	}
	if fusion != nil {
		if err := j.calibrate(ctx, miner, fusion); err != nil {
			return nil, err
		}
	}
	src, err := j.openSource(ctx)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	name = src.Name()
	j.progress(Progress{Stage: StageMining, Name: name, Total: src.Len(), Start: true})
	st, runErr := miner.Run(ctx, src, c.Output)
	j.progress(Progress{Stage: StageMining, Name: name, Total: src.Len(), End: true})
	if st != nil {
		if b, err := json.MarshalIndent(statsJSON(st), "", "  "); err == nil {
			if err := os.WriteFile(c.StatsPath(), append(b, '\n'), 0o644); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	return st, runErr
}

// calibrate gives the fusion teacher its calibration: the one saved
// beside the output by the run being resumed, else a fit on the first
// queries of the input, saved for a later resume.
func (j *job) calibrate(ctx context.Context, miner *Miner, t *FusionTeacher) error {
	c := &j.cfg
	path := CalibrationPath(c.Output)
	if c.Options.Resume {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			var cal Calibration
			if err := json.Unmarshal(b, &cal); err != nil {
				return fmt.Errorf("%s: %w (delete it and the output to start over)", path, err)
			}
			t.Cal = &cal
			return nil
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
	}
	src, err := j.openSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	j.logf("calibrating the fusion teacher on the first %d queries...", c.Calibrate)
	cal, err := miner.Calibrate(ctx, src, c.Calibrate, t)
	if err != nil {
		return err
	}
	j.logf("fusion teacher: %s\n  on %d queries (%d positives, %d candidates): AUC %.4f (signals alone %s), weights %s",
		t.Name(), cal.Units, cal.Positives, cal.Negatives, cal.AUC, floats(cal.SignalAUC), floats(cal.Weights))
	b, err := json.MarshalIndent(cal, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// statsJSON is the stats file: the counters plus readable score summaries
// (the raw quantile sample stays in the progress file only).
func statsJSON(st *Stats) any {
	sum := func(s *Summary) map[string]float64 {
		if s.N == 0 {
			return map[string]float64{"n": 0}
		}
		return map[string]float64{"n": float64(s.N), "mean": s.Mean(), "std": s.Std(), "min": s.Min,
			"p10": s.Quantile(0.1), "p50": s.Quantile(0.5), "p90": s.Quantile(0.9), "max": s.Max}
	}
	c := *st
	c.PosScores, c.NegScores = Summary{}, Summary{}
	return struct {
		Stats
		PosScores map[string]float64 `json:"pos_scores"`
		NegScores map[string]float64 `json:"neg_scores"`
		Quality   map[string]float64 `json:"teacher_quality"`
	}{c, sum(&st.PosScores), sum(&st.NegScores), map[string]float64{
		"queries": float64(st.Quality.Units), "ndcg@10": st.Quality.NDCG10(), "top1_positive": st.Quality.Top1Rate()}}
}

// ReadShots reads few-shot examples (PromptDefaults.Examples), one JSON
// object {"query", "response"} a line.
func ReadShots(path string) ([]Shot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read examples: %w", err)
	}
	var out []Shot
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var s Shot
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
