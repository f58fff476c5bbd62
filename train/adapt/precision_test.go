package adapt

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// int8Model is the installed int8 form of the default model (`make setup`
// installs it beside the float32 one); the test is skipped without it.
func int8Model(t *testing.T) string {
	t.Helper()
	emb, err := home.RequireDefaultModel()
	if err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	man, err := model.LoadManifest(emb)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(emb), man.Name+"-"+model.QuantizeInt8)
	if m, err := model.LoadManifest(dir); err != nil || m.Quantization != model.QuantizeInt8 {
		t.Skipf("the default model's int8 form is not installed at %s (run make setup): %v", dir, err)
	}
	return dir
}

// TestAdaptKeepsInt8: adapting an index built with an int8 model leaves it
// on an int8 model — the student converted to int8, scored by the check as
// it will serve — and the conversion, recorded, is not run again when a
// refused check runs again.
func TestAdaptKeepsInt8(t *testing.T) {
	q8 := int8Model(t)
	tmp := t.TempDir()
	base := tinyBase(t, 0)
	index := tinyIndexWith(t, filepath.Join(tmp, "idx"), 30, q8)

	c := tinyConfig(t, index, filepath.Join(tmp, "work"), base)
	c.Logf = t.Logf
	c.MinGain = 1.01 // refused first: the conversion is recorded before the check's verdict
	var ev events
	c.Progress = ev.add
	rep, err := Adapt(context.Background(), c)
	if !errors.Is(err, ErrWorse) || rep.CheckQueries == 0 {
		t.Fatalf("a check that cannot pass: report %+v, error %v", rep, err)
	}
	if _, ok := ev.first("check", "int8 conversion"); !ok {
		t.Fatalf("no int8 conversion reported in the check: %+v", ev.all)
	}
	if rep.Precision != model.QuantizeInt8 || rep.Served == "" || rep.Served == rep.Model || !strings.Contains(err.Error(), rep.Served) {
		t.Fatalf("refused run on an int8 index: precision %q, served %q (float32 student %q), error %v", rep.Precision, rep.Served, rep.Model, err)
	}
	served, err := model.LoadManifest(rep.Served)
	if err != nil || served.Quantization != model.QuantizeInt8 {
		t.Fatalf("the served student %s: %+v, %v; want an int8 model", rep.Served, served, err)
	}
	f32, err := model.LoadManifest(rep.Model)
	if err != nil || f32.Quantization != "" || f32.Fingerprint == served.Fingerprint {
		t.Fatalf("the float32 student %s: %+v, %v", rep.Model, f32, err)
	}
	fi, err := os.Stat(filepath.Join(rep.Served, model.ONNXFile))
	if err != nil {
		t.Fatal(err)
	}

	ev = events{}
	c.MinGain, c.Progress = -1, ev.add
	rep, err = Adapt(context.Background(), c)
	if err != nil || !rep.Reindexed {
		t.Fatalf("adapt with a lower bar: %+v, %v", rep, err)
	}
	if p, ok := ev.first("check", "int8 conversion"); ok {
		t.Fatalf("the recorded int8 conversion ran again: %+v", p)
	}
	if fi2, err := os.Stat(filepath.Join(rep.Served, model.ONNXFile)); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the served student's graph was rewritten (%v)", err)
	}
	after, err := engine.RecordedModel(index)
	if err != nil || after.Fingerprint != served.Fingerprint || filepath.Clean(after.Dir) != filepath.Clean(rep.Served) {
		t.Fatalf("index model after adapt %+v (%v); want the int8 student %s (%s)", after, err, rep.Served, served.Fingerprint)
	}
	dir, err := engine.FindModel(after)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := model.LoadManifest(dir); err != nil || m.Quantization != model.QuantizeInt8 {
		t.Fatalf("the adapted index's model %s: %+v, %v; want int8", dir, m, err)
	}
}

// TestBaseOfInt8Index: the catalogue's int8 model records the archive it
// was converted from, not a checkpoint; the student starts from the
// checkpoint its float32 form (NAME beside NAME-int8) trains from.
func TestBaseOfInt8Index(t *testing.T) {
	q8 := int8Model(t)
	ctx := context.Background()
	f32, err := catalog.WithPrecision(ctx, q8, catalog.PrecisionFloat32, "", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := catalog.Checkpoint(ctx, f32, catalog.Options{ModelsDir: filepath.Dir(f32), DownloadsDir: home.DownloadsDir(), Sources: home.SourceDir()})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(ctx, filepath.Join(t.TempDir(), "idx"), engine.Options{Model: q8})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Add(ctx, []engine.Document{{ID: "a", Text: "one document"}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := (&run{}).base(ctx, eng)
	if err != nil || got != want {
		t.Fatalf("base of an int8 index: %q, %v; want the float32 model's checkpoint %q", got, err, want)
	}
}

// TestCheckReadsStoredVectors: the check's index-model side reads the
// index's stored vectors of whole candidate documents (the cloze-cut
// positives are embedded) and scores exactly as embedding them all does.
func TestCheckReadsStoredVectors(t *testing.T) {
	tmp := t.TempDir()
	base := tinyBase(t, 0)
	index := tinyIndex(t, filepath.Join(tmp, "idx"), checkDocs)
	c := tinyConfig(t, index, filepath.Join(tmp, "work"), base)
	c.MinGain = 1.01 // stops after the check
	if _, err := Adapt(context.Background(), c); !errors.Is(err, ErrWorse) {
		t.Fatalf("a check that cannot pass: %v", err)
	}
	ctx := context.Background()
	score := func(embedBase bool) (float64, int, time.Duration) {
		r := &run{cfg: c, embedBase: embedBase}
		if err := r.cfg.validate(); err != nil {
			t.Fatal(err)
		}
		if err := r.open(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := r.check(ctx); !errors.Is(err, ErrWorse) {
			t.Fatalf("check: %v", err)
		}
		return r.st.Report.BaseScore, r.storedHits, time.Since(start)
	}
	embedded, _, te := score(true)
	stored, hits, ts := score(false)
	held, err := countLines(filepath.Join(c.Work, "heldout-mined.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("check of %d held-out queries: %s embedding both sides, %s reading %d stored vectors", held, te, ts, hits)
	if hits == 0 || hits >= held*c.Group {
		t.Fatalf("%d stored vectors read for %d held-out queries of %d candidates: want the negatives' (the cloze-cut positives embedded)", hits, held, c.Group)
	}
	if math.Abs(stored-embedded) > 1e-9 {
		t.Fatalf("the index's model scored %v from stored vectors, %v embedding them", stored, embedded)
	}
}

// checkDocs is TestCheckReadsStoredVectors' index size.
const checkDocs = 30
