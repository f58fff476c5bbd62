package adapt

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model"
)

// TestServeEnsemble: Serve ensemble calibrates the teacher without mining
// or training, writes an ensemble of the index's model and the teacher
// model weighted by the calibration (wᵢ/σᵢ of each cosine), and reindexes
// the index with it; run again it does nothing; a student for the index
// it now serves is refused before any work.
func TestServeEnsemble(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 40)
	teacher, err := home.RequireDefaultEmbedModel() // the int8 form: another model to the index
	if err != nil {
		t.Skipf("no int8 default model: %v", err)
	}
	c := tinyConfig(t, index, filepath.Join(tmp, "work"), "")
	c.TeacherModels, c.Serve = []string{teacher}, ServeEnsemble
	var ev events
	c.Progress = ev.add
	rep, err := Adapt(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Steps != 0 || rep.Examples != 0 || !rep.Reindexed || rep.Served != filepath.Join(c.Work, "ensemble") {
		t.Fatalf("report %+v: want no steps, no examples, the index reindexed with Work/ensemble", rep)
	}
	for _, p := range ev.all {
		if !slices.Contains(EnsembleStages, p.Stage) || p.Stages != len(EnsembleStages) {
			t.Fatalf("progress %+v: want the ensemble's stages %v", p, EnsembleStages)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Work, "mined.jsonl")); err == nil {
		t.Error("the ensemble run mined")
	}
	man, err := model.LoadManifest(rep.Served)
	if err != nil {
		t.Fatal(err)
	}
	cal := readCalibration(t, filepath.Join(c.Work, "teacher.json"))
	if len(man.Ensemble.Parts) != 2 {
		t.Fatalf("ensemble parts %+v: want the index's model and the teacher", man.Ensemble.Parts)
	}
	for k, p := range man.Ensemble.Parts {
		j := k + 1 // signal 0 is BM25
		if w := cal.Weights[j] / cal.Std[j]; p.Weight != w || !strings.HasPrefix(cal.Signals[j], "dense:") {
			t.Errorf("part %d (%s): weight %v, want %s's calibrated %v", k, p.Name, p.Weight, cal.Signals[j], w)
		}
	}
	// KeepModel keeps it as it keeps a student (here under a folder of the
	// test's own): an ensemble is its manifest alone.
	kept, _, copied, err := installed.Keep(ctx, rep.Served, t.TempDir())
	if err != nil || !copied || !strings.HasPrefix(filepath.Base(kept), "ensemble-") {
		t.Fatalf("keeping the ensemble: %s (copied %v), %v", kept, copied, err)
	}
	eng, err := engine.Open(ctx, index, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := eng.Model(); m.Fingerprint != man.Fingerprint || m.Dim != 2*384 {
		t.Fatalf("the index's model %+v: want the ensemble %.12s of dim 768", m, man.Fingerprint)
	}
	res, err := eng.Search(ctx, "graph search", engine.SearchOptions{Mode: engine.ModeDense, K: 3})
	eng.Close()
	if err != nil || len(res) != 3 {
		t.Fatalf("dense search with the ensemble: %d results, %v", len(res), err)
	}

	again, err := Adapt(ctx, c)
	if err != nil || again.Served != rep.Served {
		t.Fatalf("run again: %+v, %v", again, err)
	}
	// A student for an index that serves an ensemble has nothing to start
	// from: refused before any work.
	c.Serve, c.Work = "", filepath.Join(tmp, "work2")
	if _, err := Adapt(ctx, c); err == nil || !strings.Contains(err.Error(), "serves an ensemble") {
		t.Fatalf("a student for an ensemble's index: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Work, "train.jsonl")); err == nil {
		t.Error("the refused run wrote queries")
	}
	// Served again, calibrated anew: the index's ensemble passes its weight
	// on to its parts, and the teacher model, one of them, adds its own:
	// the same two models.
	c.Serve, c.Work = ServeEnsemble, filepath.Join(tmp, "work3")
	rep3, err := Adapt(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	man3, err := model.LoadManifest(rep3.Served)
	if err != nil {
		t.Fatal(err)
	}
	if len(man3.Ensemble.Parts) != 2 || man3.Ensemble.Parts[0].Fingerprint != man.Ensemble.Parts[0].Fingerprint || man3.Ensemble.Parts[1].Fingerprint != man.Ensemble.Parts[1].Fingerprint {
		t.Fatalf("the ensemble served again: parts %+v, want the same two models as %+v", man3.Ensemble.Parts, man.Ensemble.Parts)
	}
}

// readCalibration reads a saved teacher calibration.
func readCalibration(t *testing.T, path string) mining.Calibration {
	t.Helper()
	bs, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cal mining.Calibration
	if err := json.Unmarshal(bs, &cal); err != nil {
		t.Fatal(err)
	}
	return cal
}
