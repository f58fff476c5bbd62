package train

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/anna-search/anna/internal/format/metrics"
)

// MetricsFile, in OutDir, holds a JSON line per optimizer step and per
// held-out evaluation (internal/format/metrics). A resumed run continues it from
// its checkpoint's step: each step appears once.
const MetricsFile = "metrics.jsonl"

// describe is the run for a report's title and settings, with steps
// planned; c has its defaults.
func (c *Config) describe(steps int) metrics.Run {
	r := metrics.Run{Name: c.Name, Model: c.ModelDir, Objective: c.Objective, BatchSize: c.BatchSize, Accum: c.Accum,
		GroupSize: c.GroupSize, LR: c.LR, Steps: steps, Seed: c.Seed}
	add := func(name string, v any) {
		var s string
		switch x := v.(type) {
		case float64:
			s = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			s = fmt.Sprint(x)
		}
		r.Settings = append(r.Settings, metrics.Setting{Name: name, Value: s})
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
