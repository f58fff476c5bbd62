// Package metrics is the training metrics file (metrics.jsonl): a JSON line
// per optimizer step and per held-out evaluation, which train.Run appends
// to as it goes and package report draws its training report from, and the
// description of the run the report is titled with (Run).
//
// Invariants: each line is written whole by one write; step records have
// strictly increasing steps, so a file holds each step once, and a run
// resumed from a checkpoint drops what the file holds past it (OpenLog);
// a last line cut short by a crash is skipped on reading, any other
// malformed line is an error naming its number. Values JSON cannot hold
// (NaN, ±Inf) are written as null and read back as NaN.
package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/anna-search/anna/internal/atomicfile"
)

// Step is one optimizer step of a training run: a line
// {"type":"step","step":…,"loss":…,"contrastive_loss":…,"distillation_loss":…,
// "lr":…,"grad_norm":…,"examples_per_s":…,"elapsed_s":…} of the metrics
// file. A value that is not finite is written as null and read back as NaN.
type Step struct {
	Step int     // 1-based optimizer step
	Loss float64 // mean over the step's micro-batches
	// Contrastive and Distillation are the parts of Loss when the objective
	// has parts (any objective with distillation): the label term (InfoNCE,
	// or a cross-encoder's BCE or listwise loss) and the weighted teacher
	// term (DistillWeight × KL(teacher ‖ student), or for BCE the
	// cross-entropy against the teacher's probabilities). They sum to Loss
	// up to rounding. Nil otherwise (the keys are left out).
	Contrastive, Distillation *float64
	LR                        float64 // learning rate of this step's update
	GradNorm                  float64 // global gradient norm before clipping
	ExamplesPerS              float64 // queries per second over this step
	ElapsedS                  float64 // seconds since the run began, resumes included
}

// Eval is one held-out evaluation: a line
// {"type":"eval","step":…,"loss":…,"accuracy":…,"queries":…,"elapsed_s":…}
// of the metrics file.
type Eval struct {
	Step     int     // optimizer steps done (0: before training)
	Loss     float64 // held-out loss
	Accuracy float64 // share of queries whose positive outscores all of their negatives
	Queries  int     // held-out queries
	ElapsedS float64 // seconds since the run began, resumes included
}

// The lines as written: "type" first, non-finite values as null.
type stepLine struct {
	Type         string   `json:"type"`
	Step         int      `json:"step"`
	Loss         *float64 `json:"loss"`
	Contrastive  *float64 `json:"contrastive_loss,omitempty"`
	Distillation *float64 `json:"distillation_loss,omitempty"`
	LR           *float64 `json:"lr"`
	GradNorm     *float64 `json:"grad_norm"`
	ExamplesPerS *float64 `json:"examples_per_s"`
	ElapsedS     *float64 `json:"elapsed_s"`
}

type evalLine struct {
	Type     string   `json:"type"`
	Step     int      `json:"step"`
	Loss     *float64 `json:"loss"`
	Accuracy *float64 `json:"accuracy"`
	Queries  int      `json:"queries"`
	ElapsedS *float64 `json:"elapsed_s"`
}

func (s Step) line() stepLine {
	return stepLine{lineStep, s.Step, num(s.Loss), numP(s.Contrastive), numP(s.Distillation), num(s.LR), num(s.GradNorm), num(s.ExamplesPerS), num(s.ElapsedS)}
}

func (l stepLine) step() Step {
	return Step{l.Step, val(l.Loss), l.Contrastive, l.Distillation, val(l.LR), val(l.GradNorm), val(l.ExamplesPerS), val(l.ElapsedS)}
}

func (e Eval) line() evalLine {
	return evalLine{lineEval, e.Step, num(e.Loss), num(e.Accuracy), e.Queries, num(e.ElapsedS)}
}

func (l evalLine) eval() Eval {
	return Eval{l.Step, val(l.Loss), val(l.Accuracy), l.Queries, val(l.ElapsedS)}
}

// num is v, or nil (null) when v is not finite.
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func numP(p *float64) *float64 {
	if p == nil {
		return nil
	}
	return num(*p)
}

// val is *p, or NaN for null.
func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// Metrics is a training run's record: its steps and evaluations in the
// order they happened.
type Metrics struct {
	Steps []Step
	Evals []Eval
}

// ElapsedS is the latest elapsed time recorded (0 for none).
func (m *Metrics) ElapsedS() float64 {
	var e float64
	if n := len(m.Steps); n > 0 {
		e = m.Steps[n-1].ElapsedS
	}
	if n := len(m.Evals); n > 0 {
		e = max(e, m.Evals[n-1].ElapsedS)
	}
	return e
}

// Line types of the metrics file.
const (
	lineStep = "step"
	lineEval = "eval"
)

// encodeLine marshals v as one JSON line.
func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return append(b, '\n'), nil
}

// lineHead is what every line of the metrics file has.
type lineHead struct {
	Type string `json:"type"`
	Step *int   `json:"step"`
}

// scanLines calls fn with each complete line of r (without its newline) and
// its 1-based number. A last line with no newline is passed too when it
// parses as JSON: otherwise it is a write cut short and is skipped.
func scanLines(r io.Reader, fn func(line []byte, n int) error) error {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("metrics: %w", err)
		}
		complete := err == nil
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(bytes.TrimSpace(line)) > 0 && (complete || json.Valid(line)) {
			if err := fn(line, n); err != nil {
				return err
			}
		}
		if !complete {
			return nil
		}
	}
}

// Read reads a metrics file written by Log. Lines of other
// types are skipped, so that later versions may add some (every line has a
// "type" and a "step"); a malformed line
// is an error naming its number, except a last line with no newline (a
// write cut short by a crash), which is skipped.
func Read(r io.Reader) (*Metrics, error) {
	m := &Metrics{}
	err := scanLines(r, func(line []byte, n int) error {
		var h lineHead
		if err := json.Unmarshal(line, &h); err != nil {
			return fmt.Errorf("metrics: line %d: %w", n, err)
		}
		switch h.Type {
		case lineStep:
			var s stepLine
			if err := json.Unmarshal(line, &s); err != nil {
				return fmt.Errorf("metrics: line %d: %w", n, err)
			}
			m.Steps = append(m.Steps, s.step())
		case lineEval:
			var e evalLine
			if err := json.Unmarshal(line, &e); err != nil {
				return fmt.Errorf("metrics: line %d: %w", n, err)
			}
			m.Evals = append(m.Evals, e.eval())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Log appends a training run's metrics to its JSON lines file, one
// line per record, each written whole by a single write. Step records have
// strictly increasing steps, so a file holds each step once.
type Log struct {
	f *os.File
	m Metrics
}

// OpenLog opens the metrics file at path for a run that goes on
// after step from. from = 0 (a new run) starts the file afresh. from > 0 (a
// run resumed from its step-from checkpoint) keeps the records of steps up
// to and including from, in their order, and drops the rest (what a
// stopped run wrote after its checkpoint), so that the resumed run
// continues the file with no step twice and none missing; a missing file
// starts empty.
func OpenLog(path string, from int) (*Log, error) {
	l := &Log{}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND | os.O_TRUNC
	if from > 0 {
		kept, err := keepThrough(path, from)
		if err != nil {
			return nil, err
		}
		if kept != nil {
			if err := atomicfile.WriteBytes(path, kept); err != nil {
				return nil, fmt.Errorf("metrics: %w", err)
			}
			m, err := Read(bytes.NewReader(kept))
			if err != nil {
				return nil, err
			}
			l.m = *m
			flags &^= os.O_TRUNC
		}
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	l.f = f
	return l, nil
}

// keepThrough returns the lines of the file at path whose step is at most
// step (nil when there is no file).
func keepThrough(path string, step int) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	kept := []byte{}
	err = scanLines(f, func(line []byte, n int) error {
		var h lineHead
		if err := json.Unmarshal(line, &h); err != nil || h.Step == nil {
			return fmt.Errorf("metrics: %s:%d: not a metrics record (want a JSON object with a step): %v", path, n, err)
		}
		if *h.Step <= step {
			kept = append(append(kept, line...), '\n')
		}
		return nil
	})
	return kept, err
}

// Metrics returns the records of the file so far: those kept on opening and
// those added since. The slices are the caller's.
func (l *Log) Metrics() Metrics {
	return Metrics{Steps: slices.Clone(l.m.Steps), Evals: slices.Clone(l.m.Evals)}
}

// AddStep appends a step record. Its step must come after the last one's.
func (l *Log) AddStep(s Step) error {
	if n := len(l.m.Steps); n > 0 && s.Step <= l.m.Steps[n-1].Step {
		return fmt.Errorf("metrics: step %d after step %d", s.Step, l.m.Steps[n-1].Step)
	}
	if err := l.write(s.line()); err != nil {
		return err
	}
	l.m.Steps = append(l.m.Steps, s)
	return nil
}

// AddEval appends an evaluation record.
func (l *Log) AddEval(e Eval) error {
	if err := l.write(e.line()); err != nil {
		return err
	}
	l.m.Evals = append(l.m.Evals, e)
	return nil
}

func (l *Log) write(v any) error {
	b, err := encodeLine(v)
	if err != nil {
		return err
	}
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Log) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Run describes a training run for its report's title and settings table.
type Run struct {
	Name      string  // the run (the exported model's name)
	Model     string  // the checkpoint trained from (the title shows its base name)
	Objective string  // contrastive, bce or listwise
	BatchSize int     // queries per micro-batch
	Accum     int     // micro-batches per optimizer step (≤ 1: none)
	GroupSize int     // documents per query: the positive and its negatives
	LR        float64 // peak learning rate
	Steps     int     // optimizer steps planned
	Seed      uint64
	// Settings are the run's other settings, shown in this order.
	Settings []Setting
}

// Setting is one name and value of a settings table.
type Setting struct {
	Name, Value string
}
