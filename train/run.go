package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/anna-search/anna/internal/format/metrics"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/internal/train/objective"
)

// Run trains as cfg says and, unless NoExport, exports the result: the
// Hugging Face checkpoint in OutDir/hf and the anna model (model.onnx with a
// new fingerprint) in OutDir/model (a technique's own files, where it has
// them, too). Cancelling ctx stops within a layer's pass (a fraction of a
// second on the CPU; the GPU's passes at their end), dropping the step it
// interrupted, and writes a checkpoint of the last whole step that Resume
// continues exactly. A NaN or infinite loss stops
// the run, keeping the last good checkpoint.
//
// Every optimizer step and held-out evaluation is recorded in
// OutDir/metrics.jsonl (MetricsFile); a resumed run drops what the file
// holds past its checkpoint's step and continues it, so each step is there
// once. The held-out set, when there is one, is evaluated before training,
// every EvalEvery steps and at the end. Config.Report receives the metrics
// at every checkpoint, when the run stops and at the end.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	ctx = safe.Ctx(ctx)
	r, err := prepare(&cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.resume(); err != nil {
		return nil, err
	}
	if err := r.loop(ctx); err != nil {
		return nil, err
	}
	return r.finish(ctx)
}

// run is one Run's state, shared by its phases.
type run struct {
	cfg      *Config
	examples int // in the data file (a checkpoint is bound to it)
	trainEx  []Example
	evalEx   []Example
	// The schedule: optimizer steps, warm-up steps, queries per step and
	// steps per pass over trainEx.
	steps, warmup, perStep, stepsPerEpoch int

	src   *source
	tr    *trainer
	store store // where the weights, gradients and moments live
	opt   *AdamW

	ckptDir  string
	start    int // the step resumed from
	applied  int // the steps whose update the weights hold
	log      *metrics.Log
	lastLoss float64
	t0       time.Time
	before   float64 // seconds the metrics file records from earlier processes
	closers  []func() error
}

// prepare settles cfg's defaults, reads the data, loads the model, wraps
// it in the technique and puts it on the device when cfg asks, and splits
// off the held-out examples.
func prepare(cfg *Config) (_ *run, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	examples, err := ReadExamples(cfg.Data, cfg.DistillWeight > 0)
	if err != nil {
		return nil, err
	}
	if cfg.LoRA != nil {
		lc := *cfg.LoRA // the caller's config stays as it was
		cfg.LoRA = &lc
	}
	r := &run{cfg: cfg, examples: len(examples), opt: NewAdamW(cfg.WeightDecay), lastLoss: math.NaN(),
		ckptDir: filepath.Join(cfg.OutDir, "checkpoint")}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.src, err = loadSource(cfg); err != nil {
		return nil, err
	}
	if cfg.Objective == ObjectiveContrastive && r.src.bert != nil {
		servedPrefixes(examples, cfg.servedAs())
	}
	tok, err := tokenizer.Load(r.src.tokPath)
	if err != nil {
		return nil, fmt.Errorf("train: the model dir needs tokenizer.json: %w", err)
	}
	r.closers = append(r.closers, func() error { tok.Close(); return nil })
	if err := r.bind(tok, examples); err != nil {
		return nil, err
	}
	r.split(examples)
	return r, nil
}

// split holds out a seeded shuffle's tail and plans the steps.
func (r *run) split(examples []Example) {
	cfg := r.cfg
	order := rand.New(rand.NewPCG(cfg.Seed, 0xe7a1)).Perm(len(examples))
	nEval := 0
	if cfg.EvalFraction > 0 && len(examples) >= 20 {
		nEval = max(1, int(float64(len(examples))*cfg.EvalFraction))
	}
	for i, j := range order {
		if i < len(order)-nEval {
			r.trainEx = append(r.trainEx, examples[j])
		} else {
			r.evalEx = append(r.evalEx, examples[j])
		}
	}
	r.perStep = cfg.BatchSize * cfg.Accum
	r.stepsPerEpoch = max(1, len(r.trainEx)/r.perStep)
	r.steps = r.stepsPerEpoch * cfg.Epochs
	if cfg.MaxSteps > 0 {
		r.steps = cfg.MaxSteps
	}
	r.warmup = int(cfg.Warmup * float64(r.steps))
}

// resume restores OutDir/checkpoint when cfg.Resume and there is one.
func (r *run) resume() error {
	cfg := r.cfg
	if !cfg.Resume {
		return nil
	}
	st, err := loadCheckpoint(r.ckptDir, r.store.params(), r.opt)
	switch {
	case errors.Is(err, errNoCheckpoint):
		return nil
	case err != nil:
		return err
	case st.Seed != cfg.Seed || st.Examples != r.examples:
		return fmt.Errorf("train: checkpoint %s was made with seed %d over %d examples; this run has seed %d over %d: resuming would not continue the same run", r.ckptDir, st.Seed, st.Examples, cfg.Seed, r.examples)
	}
	if err := r.store.fromHost(r.opt); err != nil {
		return err
	}
	r.start = st.Step
	return nil
}

// loop runs the steps from r.start, with the held-out evaluations, the
// checkpoints and the metrics file.
func (r *run) loop(ctx context.Context) error {
	cfg := r.cfg
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	// The metrics file goes on from the checkpoint's step; its elapsed
	// times go on from the last one recorded.
	log, err := metrics.OpenLog(filepath.Join(cfg.OutDir, MetricsFile), r.start)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	r.log = log
	r.closers = append(r.closers, log.Close)
	kept := log.Metrics()
	r.before, r.t0 = kept.ElapsedS(), time.Now()
	r.applied = r.start
	// A cancel that ends a pass midway (between layers: bert.Batch.Ctx)
	// leaves partial gradients and the weights of the last whole step,
	// which the stop's checkpoint holds.
	cancelled := func(err error) bool { return ctx.Err() != nil && errors.Is(err, ctx.Err()) }
	// The baseline the later evaluations compare with (step 0), or one a
	// stopped run saved the checkpoint for but did not record.
	if r.evalDue(r.start) && (len(kept.Evals) == 0 || kept.Evals[len(kept.Evals)-1].Step != r.start) {
		if err := r.evaluate(ctx, r.start); err != nil {
			if cancelled(err) {
				return r.stop(r.start, ctx.Err())
			}
			return err
		}
	}
	for step := r.start; step < r.steps; step++ {
		if err := ctx.Err(); err != nil {
			return r.stop(step, err)
		}
		if err := r.step(ctx, step); err != nil {
			if cancelled(err) {
				return r.stop(r.applied, ctx.Err())
			}
			return err
		}
	}
	return nil
}

// step is optimizer step step+1: its micro-batches' gradients, clipping,
// the update, its record, and the checkpoint, evaluation and report due
// after it.
func (r *run) step(ctx context.Context, step int) error {
	cfg := r.cfg
	t1 := time.Now()
	if err := r.store.zeroGrad(); err != nil {
		return fmt.Errorf("train: step %d: %w", step+1, err)
	}
	var loss objective.Loss
	for micro := 0; micro < cfg.Accum; micro++ {
		l, err := r.tr.grad(ctx, r.microBatch(step, micro), float32(1/float64(cfg.Accum)), true)
		if err != nil {
			return fmt.Errorf("train: step %d: %w", step+1, err)
		}
		loss.Value += l.Value / float64(cfg.Accum)
		loss.Parts.InfoNCE += l.Parts.InfoNCE / float64(cfg.Accum)
		loss.Parts.Distill += l.Parts.Distill / float64(cfg.Accum)
	}
	norm, err := r.store.clip(cfg.ClipNorm)
	if err != nil {
		return fmt.Errorf("train: step %d: %w", step+1, err)
	}
	if math.IsNaN(loss.Value) || math.IsInf(loss.Value, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
		err := fmt.Errorf("train: loss became %v (gradient norm %v) at step %d: stopped without updating; the last good checkpoint is %s (lower the learning rate or raise the temperature)", loss.Value, norm, step+1, r.ckptDir)
		return errors.Join(err, r.report())
	}
	lr := LinearSchedule(step, r.warmup, r.steps, cfg.LR)
	if err := r.store.update(r.opt, lr); err != nil {
		return fmt.Errorf("train: step %d: %w", step+1, err)
	}
	r.lastLoss = loss.Value
	done := step + 1
	r.applied = done
	if err := r.record(done, loss, lr, norm, time.Since(t1)); err != nil {
		return err
	}
	saved := done%cfg.CheckpointEvery == 0 || done == r.steps
	if saved {
		if err := r.save(done); err != nil {
			return err
		}
	}
	if r.evalDue(done) {
		if err := r.evaluate(ctx, done); err != nil {
			return err
		}
	}
	if saved && done < r.steps {
		return r.report()
	}
	return nil
}

// microBatch is the groups of a step's micro-batch: which examples it uses
// depends only on the step, so a resumed run draws the same.
func (r *run) microBatch(step, micro int) []group {
	cfg := r.cfg
	global := (step*cfg.Accum + micro) * cfg.BatchSize
	epoch := global / (r.stepsPerEpoch * r.perStep)
	perm := rand.New(rand.NewPCG(cfg.Seed, uint64(epoch)+1)).Perm(len(r.trainEx))
	var gs []group
	for i := 0; i < cfg.BatchSize; i++ {
		k := (global + i) % (r.stepsPerEpoch * r.perStep) % len(r.trainEx)
		gs = append(gs, sampleGroup(&r.trainEx[perm[k]], cfg.GroupSize, cfg.Seed, uint64(global+i)))
	}
	return gs
}

// record adds step done to the metrics file and reports its progress.
func (r *run) record(done int, loss objective.Loss, lr, norm float64, took time.Duration) error {
	cfg := r.cfg
	rec := metrics.Step{Step: done, Loss: loss.Value, LR: lr, GradNorm: norm, ExamplesPerS: float64(r.perStep) / took.Seconds(), ElapsedS: r.elapsed()}
	if cfg.DistillWeight > 0 {
		rec.Contrastive, rec.Distillation = &loss.Parts.InfoNCE, &loss.Parts.Distill
	}
	if err := r.log.AddStep(rec); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if cfg.Progress != nil {
		el := time.Since(r.t0)
		rate := float64((done-r.start)*r.perStep) / el.Seconds()
		eta := time.Duration(float64(el) / float64(done-r.start) * float64(r.steps-done))
		cfg.Progress(Progress{Step: done, Steps: r.steps, Loss: loss.Value, LR: lr, GradNorm: norm, ExamplesPerS: rate, ETA: eta})
	}
	return nil
}

func (r *run) elapsed() float64 { return r.before + time.Since(r.t0).Seconds() }

func (r *run) evalDue(step int) bool {
	return len(r.evalEx) > 0 && (step == 0 || step%r.cfg.EvalEvery == 0 || step == r.steps)
}

// evaluate records the held-out loss and accuracy after step.
func (r *run) evaluate(ctx context.Context, step int) error {
	ev, err := r.tr.evaluate(ctx, r.evalEx)
	if err != nil {
		return err
	}
	if err := r.log.AddEval(metrics.Eval{Step: step, Loss: ev.Loss, Accuracy: ev.Accuracy, Queries: ev.Queries, ElapsedS: r.elapsed()}); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress(Progress{Step: step, Steps: r.steps, Eval: ev})
	}
	return nil
}

// save writes the checkpoint after step done.
func (r *run) save(done int) error {
	if err := r.store.toHost(r.opt); err != nil {
		return err
	}
	st := runState{Step: done, Steps: r.steps, Loss: r.lastLoss, Seed: r.cfg.Seed, Data: r.cfg.Data, Examples: r.examples}
	return saveCheckpoint(r.ckptDir, r.store.params(), r.opt, st)
}

// stop ends a cancelled run at step's boundary: a checkpoint (when a step
// ran since the last one), the report, and the error saying how to go on.
func (r *run) stop(step int, cause error) error {
	if step > r.start {
		if err := r.save(step); err != nil {
			return err
		}
	}
	if err := r.report(); err != nil {
		return err
	}
	return fmt.Errorf("train: stopped at step %d of %d (checkpoint in %s; run again with resume): %w", step, r.steps, r.ckptDir, cause)
}

// report hands the metrics so far to cfg.Report.
func (r *run) report() error {
	if r.cfg.Report == nil {
		return nil
	}
	if err := r.cfg.Report(r.cfg.describe(r.steps), r.log.Metrics()); err != nil {
		return fmt.Errorf("train: report: %w", err)
	}
	return nil
}

// finish reports the end and exports: the technique's files, or the
// trained model, as a Hugging Face checkpoint and an anna model.
func (r *run) finish(ctx context.Context) (*Result, error) {
	cfg := r.cfg
	if err := r.report(); err != nil {
		return nil, err
	}
	res := &Result{Steps: r.steps, FinalLoss: r.lastLoss, Checkpoint: r.ckptDir, Run: cfg.describe(r.steps), Metrics: r.log.Metrics()}
	if err := r.store.toHost(r.opt); err != nil { // for the export
		return nil, err
	}
	positions := r.src.positions()
	if t := r.tr.tech; t != nil {
		positions = t.Model().Cfg.MaxPositionEmbeddings
	}
	es := export.Settings{Name: cfg.Name, Pooling: cfg.Pooling, MaxLength: cfg.exportMaxLength(positions)}
	var err error
	if t := r.tr.tech; t != nil {
		if res.HFDir, err = t.Save(cfg.OutDir); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if cfg.NoExport {
			return res, nil
		}
		res.HFDir, res.ModelDir, err = t.Export(ctx, r.src.dir, cfg.OutDir, es)
	} else if !cfg.NoExport {
		res.HFDir, res.ModelDir, err = r.src.export(ctx, cfg.OutDir, es)
	}
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return res, nil
}

// close releases what prepare and loop opened, in reverse.
func (r *run) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}
