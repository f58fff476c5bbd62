package train

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/report"
)

// The files a run writes beside its checkpoint for people to look at.
const (
	// MetricsFile holds a JSON line per optimizer step and per held-out
	// evaluation (report.ReadMetrics reads it). A resumed run continues it
	// from its checkpoint's step: each step appears once.
	MetricsFile = "metrics.jsonl"
	// ReportFile is the HTML report drawn from MetricsFile, rewritten at
	// every checkpoint and at the end.
	ReportFile = "report.html"
)

// reportRun describes the run for the report's title and settings.
func (c *Config) reportRun(steps int) report.TrainingRun {
	r := report.TrainingRun{Name: c.Name, Model: c.ModelDir, Objective: c.Objective, BatchSize: c.BatchSize, Accum: c.Accum,
		GroupSize: c.GroupSize, LR: c.LR, Steps: steps, Seed: c.Seed}
	add := func(name string, v any) {
		var s string
		switch x := v.(type) {
		case float64:
			s = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			s = fmt.Sprint(x)
		}
		r.Settings = append(r.Settings, report.Setting{Name: name, Value: s})
	}
	add("data", c.Data)
	add("max length (tokens)", c.MaxLength)
	if c.Objective == ObjectiveContrastive {
		add("pooling", c.Pooling)
		add("temperature", c.Temperature)
		add("in-batch negatives", !c.NoInBatch)
		add("distillation weight", c.DistillWeight)
		if c.DistillWeight > 0 {
			add("teacher temperature", c.TeacherTemperature)
		}
	}
	if c.MaxSteps > 0 {
		add("max steps", c.MaxSteps)
	} else {
		add("epochs", c.Epochs)
	}
	add("weight decay", c.WeightDecay)
	add("warm-up (share of steps)", c.Warmup)
	if c.ClipNorm > 0 {
		add("gradient clip norm", c.ClipNorm)
	} else {
		add("gradient clip norm", "off")
	}
	if c.Bidirectional {
		add("attention", "bidirectional")
	}
	if c.Recompute {
		add("recompute layers in the backward", true)
	}
	if isHead(c.Pooling) {
		add("pooling head (latents, attention heads; 0: default)", fmt.Sprintf("%d, %d", c.HeadLatents, c.HeadHeads))
	}
	if c.LoRA != nil {
		add("LoRA", fmt.Sprintf("rank %d, alpha %g, targets %s", c.LoRA.Rank, c.LoRA.Alpha, strings.Join(c.LoRA.Targets, ", ")))
	} else {
		add("LoRA", "off (full fine-tuning)")
	}
	if c.EvalFraction > 0 {
		add("held-out share", c.EvalFraction)
		add("evaluation every (steps)", c.EvalEvery)
	} else {
		add("held-out share", "none")
	}
	add("checkpoint every (steps)", c.CheckpointEvery)
	add("output", c.OutDir)
	return r
}

// writeReport draws OutDir/report.html from the metrics so far, replacing
// the old one whole.
func (c *Config) writeReport(steps int, m report.Metrics) error {
	var buf bytes.Buffer
	if err := report.WriteTraining(&buf, c.reportRun(steps), m); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	path := filepath.Join(c.OutDir, ReportFile)
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("train: report: %w", err)
	}
	return nil
}
