package adapt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model"
)

// What a run serves (Config.Serve).
const (
	// ServeStudent (the default, also ""): the index's model fine-tuned on
	// the teacher's labels (the stages of the package doc).
	ServeStudent = "student"
	// ServeEnsemble: the calibrated teacher's dense part itself, as one
	// model. The teacher is calibrated on the training pseudo-queries as
	// the mine stage calibrates it, and its weight of each embedding model's
	// cosine (the calibrated weight over that cosine's standard deviation:
	// log-odds per unit of cosine) becomes the model's weight in an ensemble (encoder.Ensemble: the index's model
	// and every teacher model, each text embedded by all of them, one joined
	// vector whose cosine is their weighted mean); the index is reindexed
	// with it. Nothing is trained, and there is no held-out check: the
	// judges adapt has without judged queries are made of the same models.
	// The dense list then ranks as the teacher's models together do, and
	// hybrid fuses it with BM25 as before. It costs every model's forward
	// for each document indexed and each query (MiniLM, bge-small and
	// e5-small-v2: measured at about 7 times MiniLM-int8's CPU a document
	// and 5 times a query). Measured on the shared sets in
	// docs/results/adapt.md.
	ServeEnsemble = "ensemble"
)

// EnsembleStages are the stage names of a run serving the ensemble, in
// order (Stages are the student's).
var EnsembleStages = []string{"queries", "calibrate", "ensemble", "reindex", "fusion"}

// stageFuncs are the run's stage names and functions, in order.
func (r *run) stageFuncs() ([]string, []func(context.Context) error) {
	if r.cfg.Serve == ServeEnsemble {
		return EnsembleStages, []func(context.Context) error{r.queries, r.calibrate, r.ensemble, r.reindex, r.fusion}
	}
	return Stages, []func(context.Context) error{r.queries, r.mine, r.train, r.check, r.reindex, r.fusion}
}

// calibrate is the ensemble's stage 2: the fusion teacher (BM25, the
// index's model and the teacher models) calibrated as the mine stage
// calibrates it, into Work/teacher.json, without mining: the teacher
// models embed only the candidates the calibration scores (through the
// shared embedding cache).
func (r *run) calibrate(ctx context.Context) error {
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	ts, err := r.cachedTeachers(ctx)
	if err != nil {
		return err
	}
	defer closeTeachers(ts)
	extra := denseSignals(ts)
	_, err = r.miner(ctx, eng, extra, func(done, total int) { r.report("queries", done, total) })
	return err
}

// ensemble is the ensemble's stage 3: the ensemble of the index's model
// and the teacher models, weighted by the calibration (ensembleParts),
// written to Work/ensemble (a manifest naming its parts) and recorded as
// the model to serve. With Config.KeepModel the reindex keeps it under
// $ANNA_HOME/models as ensemble-FINGERPRINT12, as it keeps a student.
func (r *run) ensemble(ctx context.Context) error {
	path := r.path("teacher.json")
	cal, err := r.savedCalibration()
	if err == nil && cal == nil {
		err = fmt.Errorf("adapt: the calibration %s cannot be read (the calibrate stage writes it)", path)
	}
	if err != nil {
		return err
	}
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	dir, idx, err := indexManifest(eng)
	eng.Close()
	if err != nil {
		return fmt.Errorf("adapt: the index's model: %w", err)
	}
	parts, err := r.ensembleParts(cal, dir, idx)
	if err != nil {
		return err
	}
	man, err := encoder.NewEnsemble("", parts)
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	man.Name = "ensemble"
	man.Source = "adapt's ensemble for the index " + r.cfg.Index + ", weighted by " + path
	out := r.path("ensemble")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	if err := model.WriteManifest(out, man); err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	var ws []string
	for _, p := range man.Ensemble.Parts {
		ws = append(ws, fmt.Sprintf("%s %.3f", p.Name, p.Weight))
	}
	r.logf("ensemble %s: %s (the calibrated teacher's weight of each model's cosine, per standard deviation)", out, strings.Join(ws, ", "))
	rep := &r.st.Report
	rep.Model, rep.Served, rep.Precision, rep.Serve = out, out, idx.Quantization, ServeEnsemble
	return nil
}

// ensembleParts are the ensemble's parts: each embedding model the
// calibration weighs (the index's model in dir, then Config.TeacherModels
// in order, as the miner lists them) with weight wᵢ/σᵢ, its calibrated
// weight over the standard deviation of its cosine (so Σ weightᵢ·cosᵢ is
// the teacher's dense part of its log-odds, up to a constant). A model
// weighed at or below 0 is left out. For an int8 index, a teacher model's
// int8 form installed beside it (DIR-int8) serves in its place (a
// text's cosines under the two forms agree to about 0.99; the teacher's
// forms are what it was calibrated with). An index whose model is itself
// an ensemble passes its parts' share of its weight on to them, and a
// teacher model one of them is a form of (NAME, NAME-int8) serves in that
// part's form, the two weights added.
func (r *run) ensembleParts(cal *mining.Calibration, dir string, idx *model.Manifest) ([]model.EnsemblePart, error) {
	dirs := append([]string{dir}, r.cfg.TeacherModels...)
	var dense []int
	for j, s := range cal.Signals {
		if strings.HasPrefix(s, "dense:") {
			dense = append(dense, j)
		}
	}
	if len(dense) != len(dirs) {
		return nil, fmt.Errorf("adapt: %s weighs %d embedding models, but the index's model and the %d teacher models are %d (delete it to calibrate again)", r.path("teacher.json"), len(dense), len(r.cfg.TeacherModels), len(dirs))
	}
	var parts []model.EnsemblePart
	add := func(p model.EnsemblePart) {
		for i := range parts {
			if parts[i].Fingerprint == p.Fingerprint {
				parts[i].Weight += p.Weight
				return
			}
		}
		parts = append(parts, p)
	}
	for k, j := range dense {
		w := cal.Weights[j] / cal.Std[j]
		d := dirs[k]
		if !(w > 0) {
			r.logf("ensemble: %s left out (the calibrated teacher weighs its cosine %.3f)", cal.Signals[j], w)
			continue
		}
		if k > 0 && idx.Quantization == model.QuantizeInt8 && !strings.HasSuffix(d, "-int8") {
			if m, err := model.LoadManifest(d + "-int8"); err == nil && m.Quantization == model.QuantizeInt8 {
				d += "-int8"
			}
		}
		if k > 0 && idx.Ensemble != nil {
			d = partForm(idx.Ensemble.Parts, d)
		}
		m, err := model.LoadManifest(d)
		if err != nil {
			return nil, fmt.Errorf("adapt: ensemble part %s: %w", cal.Signals[j], err)
		}
		if m.Ensemble != nil { // the index's model is an ensemble already
			var total float64
			for _, p := range m.Ensemble.Parts {
				total += p.Weight
			}
			for _, p := range m.Ensemble.Parts {
				p.Weight *= w / total
				add(p)
			}
			continue
		}
		add(model.EnsemblePart{Name: m.Name, Path: d, Fingerprint: m.Fingerprint, Dim: m.Dim, Weight: w})
	}
	if len(parts) < 2 {
		return nil, fmt.Errorf("adapt: the calibrated teacher weighs %d embedding model(s) above 0: no ensemble to serve (%s)", len(parts), r.path("teacher.json"))
	}
	return parts, nil
}

// partForm is the directory of the part of parts that the teacher model in
// dir is a form of (the same name, or its NAME-int8), else dir.
func partForm(parts []model.EnsemblePart, dir string) string {
	name := filepath.Base(dir)
	for _, p := range parts {
		if p.Name == name || p.Name == name+"-int8" || p.Name+"-int8" == name {
			if p.Path != "" {
				return p.Path
			}
			return filepath.Join(filepath.Dir(dir), p.Name)
		}
	}
	return dir
}

// refuseEnsembleStudent refuses, before any work, to train a student for
// an index that serves an ensemble with no Base given: an ensemble has no
// weights of its own to start from.
func refuseEnsembleStudent(c Config) error {
	if c.Serve == ServeEnsemble || c.Base != "" {
		return nil
	}
	m, err := engine.RecordedModel(c.Index)
	if err != nil || m.Fingerprint == "" {
		return nil // the stages say what is wrong
	}
	dir, err := engine.FindModel(m)
	if err != nil {
		return nil
	}
	if man, err := model.LoadManifest(dir); err == nil && man.Ensemble != nil {
		return hint.Errorf(hint.Action{Kind: hint.SetOption, Option: "adapt.Config.Serve", Value: ServeEnsemble},
			"adapt: %s serves an ensemble of models (%s), which has no weights to train a student from: serve the ensemble again, calibrated anew, or give the student's checkpoint (Base)", c.Index, man.ShortFingerprint())
	}
	return nil
}
