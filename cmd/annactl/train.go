package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/format/metrics"
	"github.com/anna-search/anna/internal/report"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/cuda"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/technique/anchor"
	"github.com/anna-search/anna/internal/train/technique/autoregembed"
	"github.com/anna-search/anna/internal/train/technique/causal2vec"
	"github.com/anna-search/anna/model/catalog"
	"github.com/spf13/cobra"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

// reportFile is the HTML report drawn in --output from the metrics
// train.Run reports, rewritten at every checkpoint and at the end.
const reportFile = "report.html"

// trainOptions are train's flags: the run's configuration and what the
// command reads into it.
type trainOptions struct {
	c            train.Config
	lora, device string
	tf32         bool
	loraAlpha    float64
	noInBatch    bool
	tech         techniqueFlags
}

func (a *app) trainCommand() *cobra.Command {
	var o trainOptions
	cmd := &cobra.Command{
		Use:   "train --input MINED.jsonl --output DIR [flags]",
		Short: "fine-tune a BERT or decoder (Llama-family) model on mined negatives (InfoNCE + distillation, or a cross-encoder)",
		Long: `Trains on FlagEmbedding JSON lines (annactl mine-negatives writes them) and writes
DIR/checkpoint (resumable with --resume), DIR/hf (a Hugging Face checkpoint) and
DIR/model (an anna model with a new fingerprint, for annactl reindex), and its
metrics as JSON lines (DIR/metrics.jsonl: loss, learning rate, gradient norm and
held-out metrics by step) and plotted in a self-contained DIR/report.html.`,
		Example: "  annactl train --input mined.jsonl --output ft --steps 100 --batch-queries 8 --group 4",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runTrain(cmd.Context(), o)
		},
	}
	o.register(cmd)
	return cmd
}

func (o *trainOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	modelVar(f, &o.c.ModelDir, "model", "", "Hugging Face BERT or Llama-family decoder checkpoint directory (config.json, *.safetensors, tokenizer.json), a llama GGUF file, or an anna model directory whose source is one (default: the default model's source)")
	f.StringVar(&o.c.Data, "input", "", "training data: FlagEmbedding JSON lines `FILE` from annactl mine-negatives")
	f.StringVar(&o.c.OutDir, "output", "", "output directory `DIR`: checkpoint/, hf/ and model/")
	f.StringVar(&o.c.Objective, "objective", "contrastive", "contrastive (bi-encoder), bce or listwise (cross-encoder reranker)")
	f.StringVar(&o.c.Pooling, "pooling", "", "bi-encoder pooling: mean, cls or lasttoken (default: what the checkpoint's sentence-transformers files say — cls for bge-small — else mean for BERT, lasttoken for decoders); decoders also latent or multilayer, a trainable head the exported graph applies")
	f.IntVar(&o.c.HeadLatents, "head-latents", 0, "trainable pooling head: latent queries (0: 16)")
	f.IntVar(&o.c.HeadHeads, "head-heads", 0, "trainable pooling head: attention heads, dividing the hidden size (0: 8)")
	f.BoolVar(&o.c.Bidirectional, "bidirectional", false, "decoders: attend over the whole sequence instead of causally (exported with anna_attention \"bidirectional\", which the graph follows)")
	f.StringVar(&o.tech.name, "technique", "", "decoders: one of the papers' methods instead of the plain contrastive step: causal2vec (paper 004: a small encoder's vector as a contextual token; the export is paired with --context-model), anchor (paper 000's stage I: reconstruct the document from the query's EOS embedding and back; stage II is a plain run from its output), autoregembed-compress then autoregembed-align (paper 001's two stages; each exports a memory-token model)")
	f.StringVar(&o.tech.stage1, "autoreg-stage1", "", "--technique autoregembed-align: the autoregembed-compress run's output `DIR`")
	modelVar(f, &o.tech.contextModel, "context-model", "", "--technique causal2vec: the small encoder, an anna model `DIR` (default: the default model, all-MiniLM-L6-v2)")
	f.StringVar(&o.tech.contextTrain, "context-train", "", "--technique causal2vec: `MODE` is frozen (the default: its embeddings cached), full, or lora=RANK[:targets] (BERT targets, default query,value) to train the small encoder with the decoder (exported to DIR/context/model, which the decoder is paired with)")
	f.Float64Var(&o.tech.anchorAlpha, "anchor-alpha", 0, "--technique anchor: weight of EBQ2D, query → document (1 − alpha for document → query; 0: the paper's 0.2)")
	f.BoolVar(&o.c.NoExport, "no-export", false, "skip the export to DIR/hf and DIR/model at the end")
	f.BoolVar(&o.c.Recompute, "recompute", false, "decoders: recompute each layer in the backward (gradient checkpointing: one layer's activations in memory, about a third more compute)")
	f.IntVar(&o.c.MaxLength, "max-length", 128, "tokens per text (per pair for cross-encoders)")
	f.IntVar(&o.c.ExportMaxLength, "export-max-length", 0, "tokens per text the exported model is served at (0: its base model's when --model is an anna model, --max-length for cross-encoders, else min(512, the model's positions))")
	f.IntVar(&o.c.BatchSize, "batch-queries", 16, "queries per micro-batch")
	f.IntVar(&o.c.GroupSize, "group", 8, "documents per query: 1 positive + group-1 negatives")
	f.IntVar(&o.c.Accum, "accum", 1, "micro-batches per optimizer step (gradient accumulation)")
	f.IntVar(&o.c.Epochs, "epochs", 1, "passes over the training split")
	f.IntVar(&o.c.MaxSteps, "steps", 0, "optimizer steps (overrides --epochs when > 0)")
	f.Float64Var(&o.c.LR, "lr", 0, "peak learning rate (0: 2e-5; 1e-4 with --lora)")
	f.Float64Var(&o.c.WeightDecay, "weight-decay", 0.01, "AdamW weight decay")
	f.Float64Var(&o.c.Warmup, "warmup", 0.1, "warm-up fraction of the steps")
	f.Float64Var(&o.c.ClipNorm, "clip", 1, "gradient norm clip (negative: off)")
	f.Float64Var(&o.c.Temperature, "temperature", 0.05, "InfoNCE temperature")
	f.BoolVar(&o.noInBatch, "no-in-batch", false, "use only each query's own negatives")
	f.Float64Var(&o.c.DistillWeight, "distill", 0, "weight of the distillation term on the teacher's pos/neg scores (0: off; needs pos_scores/neg_scores): KL to its softmax (contrastive, listwise), cross-entropy against sigmoid(score/τ_t) (bce)")
	f.Float64Var(&o.c.TeacherTemperature, "teacher-temperature", 1, "teacher softmax temperature")
	f.StringVar(&o.lora, "lora", "", "LoRA instead of full fine-tuning: rank[:targets], e.g. 8 or 8:query,value,intermediate.dense (BERT; default query,value), 64 or 64:q_proj,v_proj (decoders; default all seven projections)")
	f.Float64Var(&o.loraAlpha, "lora-alpha", 0, "LoRA alpha (0: 2×rank for BERT, rank/2 for decoders)")
	f.Uint64Var(&o.c.Seed, "seed", 42, "seed for sampling and initialisation (runs are reproducible)")
	f.IntVar(&o.c.Threads, "threads", 0, "goroutines per op (0: all cores)")
	f.Float64Var(&o.c.EvalFraction, "eval-fraction", 0.05, "held-out share of the examples (negative: none)")
	f.IntVar(&o.c.EvalEvery, "eval-every", 50, "steps between held-out evaluations")
	f.IntVar(&o.c.CheckpointEvery, "checkpoint-every", 50, "steps between checkpoints")
	f.BoolVar(&o.c.Resume, "resume", false, "continue from --output/checkpoint")
	f.StringVar(&o.c.Name, "name", "", "exported model name (default: --output's base name)")
	f.StringVar(&o.device, "device", "cpu", "cpu, or cuda: the steps on the GPU — a BERT encoder fully fine-tuned or under --lora (any objective), or a decoder fully fine-tuned or under --lora (any pooling, any --technique); CUDA driver, cuBLAS and NVRTC loaded at run time (internal/train/cuda)")
	f.BoolVar(&o.tf32, "tf32", false, "with --device cuda: TF32 products (about 3e-4 relative error, several times faster) instead of FP32")
}

// check validates the flags.
func (o *trainOptions) check(cmd *cobra.Command) error {
	c := &o.c
	if err := requireFlags(cmd, "input", "output"); err != nil {
		return err
	}
	if err := oneOf("objective", c.Objective, "contrastive", "bce", "listwise"); err != nil {
		return err
	}
	if c.Pooling != "" {
		if err := oneOf("pooling", c.Pooling, "mean", "cls", "lasttoken", "latent", "multilayer"); err != nil {
			return err
		}
	}
	if err := oneOf("device", o.device, "cpu", "cuda"); err != nil {
		return err
	}
	for name, v := range map[string]int{"max-length": c.MaxLength, "batch-queries": c.BatchSize, "group": c.GroupSize, "accum": c.Accum, "epochs": c.Epochs} {
		if err := atLeast(name, v, 1); err != nil {
			return err
		}
	}
	if c.GroupSize < 2 && c.Objective != "bce" {
		return usageErrorf("--group must be at least 2 (a positive and a negative) for --objective %s (got %d)", c.Objective, c.GroupSize)
	}
	for name, v := range map[string]int{"export-max-length": c.ExportMaxLength, "steps": c.MaxSteps, "threads": c.Threads, "eval-every": c.EvalEvery, "checkpoint-every": c.CheckpointEvery} {
		if err := atLeast(name, v, 0); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		name      string
		v, lo, hi float64
	}{{"lr", c.LR, 0, 1}, {"weight-decay", c.WeightDecay, 0, 1}, {"warmup", c.Warmup, 0, 1}, {"distill", c.DistillWeight, 0, 1e3},
		{"eval-fraction", c.EvalFraction, -1, 0.9}, {"lora-alpha", o.loraAlpha, 0, 1e6}, {"clip", c.ClipNorm, -1, 1e6}} {
		if err := inRange(r.name, r.v, r.lo, r.hi); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"temperature", c.Temperature}, {"teacher-temperature", c.TeacherTemperature}} {
		if !(r.v > 0) || math.IsInf(r.v, 0) {
			return usageErrorf("--%s must be positive (got %g)", r.name, r.v)
		}
	}
	if o.tf32 && o.device != "cuda" {
		return usageErrorf("--tf32 is a --device cuda option")
	}
	return nil
}

// runTrain trains: the device, the model's checkpoint and technique, then
// train.Run with its progress on a's stderr and what it wrote on stdout.
func (a *app) runTrain(ctx context.Context, o trainOptions) error {
	c := o.c
	c.NoInBatch = o.noInBatch
	if o.device == "cuda" {
		d, err := openCUDA(ctx, o.tf32)
		if err != nil {
			return err
		}
		defer d.Close()
		c.Device = d
		fmt.Fprintf(a.stderr, "training on %s\n", d)
	}
	if c.ModelDir == "" {
		c.ModelDir = home.DefaultModel()
	}
	if man, err := model.LoadManifest(c.ModelDir); err == nil && c.Objective == "contrastive" && c.ExportMaxLength == 0 {
		// Serve the fine-tuned encoder at the length its base was served at.
		c.ExportMaxLength = man.MaxLength
	}
	src, err := a.checkpointDir(ctx, c.ModelDir)
	if err != nil {
		return err
	}
	c.ModelDir = src
	m, closeTech, err := a.technique(ctx, o.tech)
	if err != nil {
		return err
	}
	defer closeTech()
	c.Technique = m
	if o.lora != "" {
		lc, err := parseLoRA("--lora ", o.lora, o.loraAlpha)
		if err != nil {
			return err
		}
		c.LoRA = lc
	}
	var lastEval string
	c.Progress = func(p train.Progress) {
		if p.Eval != nil {
			lastEval = fmt.Sprintf("held-out loss %.4f, accuracy %.3f over %d queries", p.Eval.Loss, p.Eval.Accuracy, p.Eval.Queries)
			fmt.Fprintf(a.stderr, "step %d/%d  eval: %s\n", p.Step, p.Steps, lastEval)
			return
		}
		fmt.Fprintf(a.stderr, "step %d/%d  loss %.4f  lr %.3g  grad-norm %.3g  %.1f queries/s  ETA %s\n",
			p.Step, p.Steps, p.Loss, p.LR, p.GradNorm, p.ExamplesPerS, p.ETA.Round(time.Second))
	}
	c.Report = func(r metrics.Run, m metrics.Metrics) error {
		return writeReport(filepath.Join(c.OutDir, reportFile), r, m)
	}
	res, err := train.Run(ctx, c)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(a.stderr, "stopped: run the same command with --resume to continue from %s/checkpoint\n", c.OutDir)
		}
		return err
	}
	a.printTrained(c, res, lastEval)
	return nil
}

// printTrained says what a training run wrote.
func (a *app) printTrained(c train.Config, res *train.Result, lastEval string) {
	if math.IsNaN(res.FinalLoss) { // resumed after the last step: nothing ran
		fmt.Fprintf(a.stdout, "trained %d steps (already complete in the checkpoint)\n", res.Steps)
	} else {
		fmt.Fprintf(a.stdout, "trained %d steps, final loss %.4f\n", res.Steps, res.FinalLoss)
	}
	if lastEval != "" {
		fmt.Fprintln(a.stdout, lastEval)
	}
	fmt.Fprintf(a.stdout, "checkpoint: %s\nhugging face checkpoint: %s\nmetrics: %s\nreport: %s\n", res.Checkpoint, res.HFDir,
		filepath.Join(c.OutDir, train.MetricsFile), filepath.Join(c.OutDir, reportFile))
	if man, err := model.LoadManifest(res.ModelDir); err == nil {
		fmt.Fprintf(a.stdout, "model: %s (fingerprint %s)\n", res.ModelDir, man.ShortFingerprint())
	}
}

// checkpointDir is what the trainer reads for --model: a checkpoint as
// given, else, for an anna model directory (model.onnx, no weights), what
// it was converted from (catalog.Checkpoint: for a catalogue model its
// training source — the GGUF file of smollm2-135m-instruct, the checkpoint
// read out of bge-small-en-v1.5's ONNX graph, MiniLM's kept safetensors —
// made once from the pinned download when needed).
func (a *app) checkpointDir(ctx context.Context, dir string) (string, error) {
	if _, err := model.LoadManifest(dir); err != nil {
		return dir, nil // not an anna model: the trainer reads it, or says why not
	}
	return catalog.Checkpoint(ctx, dir, catalog.Options{ModelsDir: home.ModelsDir(), DownloadsDir: home.DownloadsDir(), Sources: home.SourceDir()})
}

func parseLoRA(flag, s string, alpha float64) (*train.LoRAConfig, error) {
	rank, targets, _ := strings.Cut(s, ":")
	var r int
	if _, err := fmt.Sscanf(rank, "%d", &r); err != nil || r <= 0 {
		return nil, usageErrorf("%s%q: the rank must be a positive integer", flag, s)
	}
	lc := &train.LoRAConfig{Rank: r, Alpha: alpha} // alpha 0: the trainer's default for the architecture
	if targets != "" {
		lc.Targets = strings.Split(targets, ",")
	}
	return lc, nil
}

// openCUDA opens the GPU the run trains on (train.Config.Device), or says
// exactly what is missing where there is none.
func openCUDA(ctx context.Context, tf32 bool) (*cuda.Device, error) {
	o := cuda.Options{}
	if tf32 {
		o.Math = cuda.MathTF32
	}
	d, err := cuda.Open(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	return d, nil
}

// writeReport draws the training report from a run's metrics, replacing
// the file whole.
func writeReport(path string, r metrics.Run, m metrics.Metrics) error {
	var buf bytes.Buffer
	if err := report.WriteTraining(&buf, r, m); err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, buf.Bytes())
}

// techniqueFlags are annactl train's technique options.
type techniqueFlags struct {
	name, stage1, contextModel, contextTrain string
	anchorAlpha                              float64
}

// technique builds --technique's method from its flags (nil: the plain
// contrastive step) and what closes the frozen context encoder it opened.
func (a *app) technique(ctx context.Context, f techniqueFlags) (m decoder.Method, closeFn func(), err error) {
	closeFn = func() {}
	names := []string{causal2vec.Name, anchor.Name, autoregembed.NameCompress, autoregembed.NameAlign}
	if f.name != "" && !slices.Contains(names, f.name) {
		return nil, closeFn, oneOf("technique", f.name, names...)
	}
	if f.anchorAlpha != 0 && f.name != anchor.Name || f.anchorAlpha < 0 || f.anchorAlpha > 1 {
		return nil, closeFn, usageErrorf("--anchor-alpha is --technique anchor's weight of EBQ2D, in (0, 1] (got %g)", f.anchorAlpha)
	}
	if (f.stage1 != "") != (f.name == autoregembed.NameAlign) {
		return nil, closeFn, usageErrorf("--autoreg-stage1 DIR (the autoregembed-compress run's --output) goes with --technique autoregembed-align, and only with it")
	}
	if f.name != causal2vec.Name && (f.contextModel != "" || f.contextTrain != "") {
		return nil, closeFn, usageErrorf("--context-model and --context-train are --technique causal2vec's small encoder")
	}
	switch f.name {
	case "":
		return nil, closeFn, nil
	case anchor.Name:
		return anchor.Method{Alpha: f.anchorAlpha}, closeFn, nil
	case autoregembed.NameCompress:
		return autoregembed.Method{Stage: autoregembed.Compression}, closeFn, nil
	case autoregembed.NameAlign:
		return autoregembed.Method{Stage: autoregembed.Alignment, Stage1: f.stage1}, closeFn, nil
	}
	if f.contextModel == "" {
		f.contextModel = home.DefaultModel()
	}
	if f.contextTrain != "" && f.contextTrain != "frozen" {
		// The small encoder trained with the decoder, from its checkpoint,
		// served afterwards as its manifest says.
		man, err := model.LoadManifest(f.contextModel)
		if err != nil {
			return nil, closeFn, fmt.Errorf("--context-model: %w", err)
		}
		ckpt, err := a.checkpointDir(ctx, f.contextModel)
		if err != nil {
			return nil, closeFn, fmt.Errorf("--context-model: %w", err)
		}
		ct := &causal2vec.ContextTrain{Checkpoint: ckpt, Pooling: man.Pooling, Normalize: man.Normalize, MaxLength: man.MaxLength}
		if f.contextTrain != "full" {
			spec, ok := strings.CutPrefix(f.contextTrain, "lora=")
			if !ok {
				return nil, closeFn, usageErrorf("--context-train %q: want frozen, full or lora=RANK[:targets]", f.contextTrain)
			}
			lc, err := parseLoRA("--context-train lora=", spec, 0)
			if err != nil {
				return nil, closeFn, err
			}
			ct.LoRA = &bert.LoRAConfig{Rank: lc.Rank, Alpha: lc.Alpha, Targets: lc.Targets}
		}
		return causal2vec.Method{EncoderName: filepath.Base(f.contextModel), Train: ct}, closeFn, nil
	}
	// The frozen small encoder, embeddings cached by its fingerprint.
	dir, err := modelDir(f.contextModel)
	if err != nil {
		return nil, closeFn, fmt.Errorf("--context-model: %w", err)
	}
	ort, err := encoder.Load(ctx, dir, encoder.Options{})
	if err != nil {
		return nil, closeFn, fmt.Errorf("--context-model: %w", err)
	}
	cache, err := encoder.NewCache(ort, home.EmbeddingCacheDir())
	if err != nil {
		ort.Close()
		return nil, closeFn, err
	}
	path := f.contextModel
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return causal2vec.Method{Encode: func(texts []string) ([][]float32, error) { return cache.EmbedDocuments(ctx, texts) },
		Dim: ort.Dim(), EncoderName: filepath.Base(f.contextModel), EncoderPath: path, EncoderFingerprint: ort.Fingerprint()}, func() { ort.Close() }, nil
}
