package metrics

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// steps are n step records with both loss parts, every field set.
func steps(n int) []Step {
	var out []Step
	for i := 1; i <= n; i++ {
		x := float64(i)
		label, distill := 1/x, 0.25/x
		out = append(out, Step{Step: i, Loss: label + distill, Contrastive: &label, Distillation: &distill,
			LR: 1e-3 * x, GradNorm: 2 / x, ExamplesPerS: 30 + x, ElapsedS: 1.5 * x})
	}
	return out
}

func TestMetricsLogResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	write := func(from, to int) {
		l, err := OpenLog(path, from)
		must(t, err)
		for _, s := range steps(to)[from:] {
			must(t, l.AddStep(s))
			if s.Step%2 == 0 {
				must(t, l.AddEval(Eval{Step: s.Step, Loss: 1, Accuracy: 0.5, Queries: 3, ElapsedS: s.ElapsedS}))
			}
		}
		must(t, l.Close())
	}
	write(0, 5)
	// A crash mid-write leaves a partial last line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(`{"type":"step","step":6,"loss":0.`)
	must(t, err)
	must(t, f.Close())
	// Resumed from a step-3 checkpoint.
	write(3, 8)
	f, err = os.Open(path)
	must(t, err)
	m, err := Read(f)
	f.Close()
	must(t, err)
	want := Metrics{Steps: steps(8)}
	if len(m.Steps) != 8 {
		t.Fatalf("%d steps, want 8", len(m.Steps))
	}
	for i, s := range m.Steps {
		w := want.Steps[i]
		if s.Step != i+1 || s.Loss != w.Loss || s.LR != w.LR || *s.Contrastive != *w.Contrastive || *s.Distillation != *w.Distillation || s.ElapsedS != w.ElapsedS {
			t.Fatalf("record %d: %+v, want %+v", i, s, w)
		}
	}
	var evals []int
	for _, e := range m.Evals {
		evals = append(evals, e.Step)
	}
	if len(evals) != 4 || evals[0] != 2 || evals[1] != 4 || evals[2] != 6 || evals[3] != 8 {
		t.Fatalf("evaluations at %v, want [2 4 6 8]", evals)
	}
	// A new run starts afresh; steps must increase.
	l, err := OpenLog(path, 0)
	must(t, err)
	defer l.Close()
	if got := l.Metrics(); len(got.Steps) != 0 {
		t.Fatalf("a new run kept %d steps", len(got.Steps))
	}
	must(t, l.AddStep(Step{Step: 1}))
	if err := l.AddStep(Step{Step: 1}); err == nil {
		t.Fatal("step 1 accepted twice")
	}
}

// Values JSON cannot hold are written as null and read back as NaN.
func TestMetricsNonFinite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	l, err := OpenLog(path, 0)
	must(t, err)
	must(t, l.AddStep(Step{Step: 1, Loss: 1, GradNorm: math.Inf(1)}))
	must(t, l.AddEval(Eval{Step: 1, Loss: math.NaN(), Accuracy: 0.25, Queries: 4}))
	must(t, l.Close())
	b, err := os.ReadFile(path)
	must(t, err)
	wantFile := `{"type":"step","step":1,"loss":1,"lr":0,"grad_norm":null,"examples_per_s":0,"elapsed_s":0}` + "\n" +
		`{"type":"eval","step":1,"loss":null,"accuracy":0.25,"queries":4,"elapsed_s":0}` + "\n"
	if string(b) != wantFile {
		t.Fatalf("file:\n%s\nwant:\n%s", b, wantFile)
	}
	m, err := Read(bytes.NewReader(b))
	must(t, err)
	if !math.IsNaN(m.Steps[0].GradNorm) || !math.IsNaN(m.Evals[0].Loss) || m.Evals[0].Accuracy != 0.25 {
		t.Fatalf("read back %+v %+v", m.Steps[0], m.Evals[0])
	}
	if _, err := Read(strings.NewReader("{\"type\":\"step\",\"step\":1}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a malformed line: want an error naming line 2, got %v", err)
	}
}
