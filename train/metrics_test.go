package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/format/metrics"
	"github.com/anna-search/anna/internal/report"
)

func readMetrics(t *testing.T, dir string) *metrics.Metrics {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, MetricsFile))
	must(t, err)
	defer f.Close()
	m, err := metrics.Read(f)
	must(t, err)
	return m
}

// reportFile is where reportTo draws a run's report: what annactl train
// does with Config.Report.
const reportFile = "report.html"

// reportTo is a Config.Report that draws OutDir/report.html.
func reportTo(dir string) func(metrics.Run, metrics.Metrics) error {
	return func(r metrics.Run, m metrics.Metrics) error {
		var buf bytes.Buffer
		if err := report.WriteTraining(&buf, r, m); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, reportFile), buf.Bytes(), 0o644)
	}
}

// errKilled stands for the process dying: a panic out of Progress leaves
// Run without its stop path (no checkpoint, no report at that step).
var errKilled = errors.New("killed")

func runUntilKilled(t *testing.T, cfg Config, at int) {
	t.Helper()
	cfg.Progress = func(p Progress) {
		if p.Eval == nil && p.Step == at {
			panic(errKilled)
		}
	}
	defer func() {
		if r := recover(); r != errKilled {
			t.Fatalf("want the run killed at step %d, got %v", at, r)
		}
	}()
	Run(context.Background(), cfg)
}

// A run killed after its checkpoint, resumed, stopped by ctx and resumed
// again leaves a metrics file with steps 1..N once each and the
// evaluations once each, the same losses as an uninterrupted run, and a
// report at every stage.
func TestRunMetricsAcrossResume(t *testing.T) {
	src := tinyCheckpoint(t, false)
	data := writeData(t, 24, true)
	base := Config{ModelDir: src, Data: data, BatchSize: 4, GroupSize: 3, MaxSteps: 6, LR: 1e-3, DistillWeight: 0.5,
		Seed: 3, NoExport: true, EvalFraction: 0.2, EvalEvery: 2, CheckpointEvery: 2}

	full := base
	full.OutDir = filepath.Join(t.TempDir(), "full")
	full.Report = reportTo(full.OutDir)
	_, err := Run(context.Background(), full)
	must(t, err)

	part := base
	part.OutDir = filepath.Join(t.TempDir(), "part")
	part.Report = reportTo(part.OutDir)
	// Killed after step 3: the checkpoint is step 2's, the file has step 3.
	runUntilKilled(t, part, 3)
	if m := readMetrics(t, part.OutDir); len(m.Steps) != 3 {
		t.Fatalf("killed run: %d step records, want 3", len(m.Steps))
	}
	if _, err := os.Stat(filepath.Join(part.OutDir, reportFile)); err != nil {
		t.Fatalf("no report after the step-2 checkpoint: %v", err)
	}
	// A write cut short by the kill.
	f, err := os.OpenFile(filepath.Join(part.OutDir, MetricsFile), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(`{"type":"step","step":4,"lo`)
	must(t, err)
	must(t, f.Close())

	// Resumed from step 2, stopped by ctx after step 5 (checkpoint 5).
	part.Resume = true
	ctx, cancel := context.WithCancel(context.Background())
	part.Progress = func(p Progress) {
		if p.Eval == nil && p.Step == 5 {
			cancel()
		}
	}
	if _, err := Run(ctx, part); err == nil || !strings.Contains(err.Error(), "stopped at step 5") {
		t.Fatalf("want a stop at step 5, got %v", err)
	}
	part.Progress = nil
	_, err = Run(context.Background(), part)
	must(t, err)

	want, got := readMetrics(t, full.OutDir), readMetrics(t, part.OutDir)
	if len(got.Steps) != 6 {
		t.Fatalf("%d step records, want 6: %+v", len(got.Steps), got.Steps)
	}
	for i, s := range got.Steps {
		if s.Step != i+1 {
			t.Fatalf("record %d is step %d, want %d", i, s.Step, i+1)
		}
		w := want.Steps[i]
		if s.Loss != w.Loss || s.LR != w.LR || s.GradNorm != w.GradNorm {
			t.Fatalf("step %d: resumed loss %v lr %v norm %v, uninterrupted %v %v %v", s.Step, s.Loss, s.LR, s.GradNorm, w.Loss, w.LR, w.GradNorm)
		}
		if s.Contrastive == nil || s.Distillation == nil || math.Abs(*s.Contrastive+*s.Distillation-s.Loss) > 1e-9 {
			t.Fatalf("step %d: parts %v + %v do not make loss %v", s.Step, s.Contrastive, s.Distillation, s.Loss)
		}
		if !(s.ExamplesPerS > 0) || (i > 0 && s.ElapsedS < got.Steps[i-1].ElapsedS) {
			t.Fatalf("step %d: examples/s %v, elapsed %v after %v", s.Step, s.ExamplesPerS, s.ElapsedS, got.Steps[max(0, i-1)].ElapsedS)
		}
	}
	var evalSteps []int
	for i, e := range got.Evals {
		evalSteps = append(evalSteps, e.Step)
		if e.Queries != 4 || e.Loss != want.Evals[i].Loss || e.Accuracy != want.Evals[i].Accuracy {
			t.Fatalf("evaluation %d: %+v, uninterrupted %+v", i, e, want.Evals[i])
		}
	}
	if len(evalSteps) != 4 || evalSteps[0] != 0 || evalSteps[1] != 2 || evalSteps[2] != 4 || evalSteps[3] != 6 {
		t.Fatalf("evaluations at steps %v, want [0 2 4 6]", evalSteps)
	}
}

// The report drawn at the end of a run has a plot per metric and the
// run's settings in its title, and fetches nothing.
func TestRunWritesReport(t *testing.T) {
	src := tinyCheckpoint(t, false)
	data := writeData(t, 24, false)
	out := filepath.Join(t.TempDir(), "run")
	_, err := Run(context.Background(), Config{ModelDir: src, Data: data, OutDir: out, BatchSize: 4, GroupSize: 3, MaxSteps: 4,
		LR: 1e-3, Seed: 5, NoExport: true, EvalFraction: 0.2, EvalEvery: 2, Report: reportTo(out)})
	must(t, err)
	html, err := os.ReadFile(filepath.Join(out, reportFile))
	must(t, err)
	if n := bytes.Count(html, []byte("<svg")); n != 4 {
		t.Fatalf("report has %d <svg> elements, want 4 (loss, learning rate, gradient norm, accuracy)", n)
	}
	title := "model " + filepath.Base(src) + ", objective contrastive, batch 4 queries (3 documents each), lr 0.001, 4 steps, seed 5"
	if !bytes.Contains(html, []byte(title)) {
		t.Fatalf("report lacks the title line %q", title)
	}
	s := strings.NewReplacer(`xmlns="http://www.w3.org/2000/svg"`, "", `xmlns:xlink="http://www.w3.org/1999/xlink"`, "").Replace(string(html))
	if strings.Contains(s, "http://") || strings.Contains(s, "https://") {
		t.Fatal("report refers to the network")
	}
	// The file on disk redraws to the same report.
	m := readMetrics(t, out)
	if len(m.Steps) != 4 || len(m.Evals) != 3 || m.Steps[0].Contrastive != nil {
		t.Fatalf("metrics: %d steps, %d evaluations, parts %v", len(m.Steps), len(m.Evals), m.Steps[0].Contrastive)
	}
	cfg := Config{ModelDir: src, Data: data, OutDir: out, BatchSize: 4, GroupSize: 3, MaxSteps: 4, LR: 1e-3, Seed: 5, NoExport: true, EvalFraction: 0.2, EvalEvery: 2}
	must(t, cfg.defaults())
	var buf bytes.Buffer
	must(t, report.WriteTraining(&buf, cfg.describe(4), *m))
	if !bytes.Equal(buf.Bytes(), html) {
		t.Fatal("redrawing the report from metrics.jsonl gives other bytes")
	}
}
