package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/train/cuda"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

func init() {
	register(command{name: "train", summary: "fine-tune a BERT model on mined negatives (InfoNCE + distillation, or a cross-encoder)", run: runTrain})
}

func runTrain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	var c train.Config
	var lora string
	var loraAlpha float64
	fs.StringVar(&c.ModelDir, "model", "", "Hugging Face BERT checkpoint dir (config.json, *.safetensors, tokenizer.json), or an anna model dir whose source is one (default: the default model's source)")
	fs.StringVar(&c.Data, "data", "", "training data: FlagEmbedding JSON lines from `annactl mine` (required)")
	fs.StringVar(&c.OutDir, "out", "", "output dir: checkpoint/, hf/ and model/ (required)")
	fs.StringVar(&c.Objective, "objective", "contrastive", "contrastive (bi-encoder), bce or listwise (cross-encoder reranker)")
	fs.StringVar(&c.Pooling, "pooling", "mean", "bi-encoder pooling: mean, cls or lasttoken")
	fs.IntVar(&c.MaxLength, "max-length", 128, "tokens per text (per pair for cross-encoders)")
	fs.IntVar(&c.BatchSize, "batch", 16, "queries per micro-batch")
	fs.IntVar(&c.GroupSize, "group", 8, "documents per query: 1 positive + group-1 negatives")
	fs.IntVar(&c.Accum, "accum", 1, "micro-batches per optimizer step (gradient accumulation)")
	fs.IntVar(&c.Epochs, "epochs", 1, "passes over the training split")
	fs.IntVar(&c.MaxSteps, "steps", 0, "optimizer steps (overrides -epochs when > 0)")
	fs.Float64Var(&c.LR, "lr", 0, "peak learning rate (default 2e-5; 1e-4 with -lora)")
	fs.Float64Var(&c.WeightDecay, "weight-decay", 0.01, "AdamW weight decay")
	fs.Float64Var(&c.Warmup, "warmup", 0.1, "warm-up fraction of the steps")
	fs.Float64Var(&c.ClipNorm, "clip", 1, "gradient norm clip (negative: off)")
	fs.Float64Var(&c.Temperature, "temperature", 0.05, "InfoNCE temperature")
	var noInBatch bool
	fs.BoolVar(&noInBatch, "no-in-batch", false, "use only each query's own negatives")
	fs.Float64Var(&c.DistillWeight, "distill", 0, "weight of the KL distillation term on the teacher's pos/neg scores (0: off; needs pos_scores/neg_scores)")
	fs.Float64Var(&c.TeacherTemperature, "teacher-temperature", 1, "teacher softmax temperature")
	fs.StringVar(&lora, "lora", "", "LoRA instead of full fine-tuning: rank[:targets], e.g. 8 or 8:query,value,intermediate.dense")
	fs.Float64Var(&loraAlpha, "lora-alpha", 0, "LoRA alpha (default: 2×rank)")
	var seed uint64
	fs.Uint64Var(&seed, "seed", 42, "seed for sampling and initialisation (runs are reproducible)")
	fs.IntVar(&c.Threads, "threads", 0, "goroutines per op (0: all cores)")
	fs.Float64Var(&c.EvalFraction, "eval-fraction", 0.05, "held-out share of the examples (negative: none)")
	fs.IntVar(&c.EvalEvery, "eval-every", 50, "steps between held-out evaluations")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", 50, "steps between checkpoints")
	fs.BoolVar(&c.Resume, "resume", false, "continue from -out/checkpoint")
	fs.StringVar(&c.Name, "name", "", "exported model name (default: -out's base name)")
	device := fs.String("device", "cpu", "cpu, or cuda (CUDA driver, cuBLAS and NVRTC loaded at run time; see train/cuda)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: annactl train -data mined.jsonl -out DIR [flags]\n\nWrites DIR/checkpoint (resumable), DIR/hf (Hugging Face checkpoint) and DIR/model (anna model, new fingerprint).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	c.Seed, c.NoInBatch = seed, noInBatch
	switch *device {
	case "cpu":
	case "cuda":
		if err := checkCUDA(ctx); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--device %q: want cpu or cuda", *device)
	}
	if c.Data == "" || c.OutDir == "" {
		fs.Usage()
		return errUsage
	}
	if c.ModelDir == "" {
		c.ModelDir = home.DefaultModel()
	}
	if man, err := model.LoadManifest(c.ModelDir); err == nil && c.Objective == "contrastive" {
		// Serve the fine-tuned encoder at the length its base was served at.
		c.ExportMaxLength = man.MaxLength
	}
	c.ModelDir = checkpointDir(c.ModelDir)
	if lora != "" {
		lc, err := parseLoRA(lora, loraAlpha)
		if err != nil {
			return err
		}
		c.LoRA = lc
	}
	var lastEval string
	c.Progress = func(p train.Progress) {
		if p.Eval != nil {
			lastEval = fmt.Sprintf("held-out loss %.4f, accuracy %.3f over %d queries", p.Eval.Loss, p.Eval.Accuracy, p.Eval.Queries)
			fmt.Fprintf(os.Stderr, "step %d/%d  eval: %s\n", p.Step, p.Steps, lastEval)
			return
		}
		fmt.Fprintf(os.Stderr, "step %d/%d  loss %.4f  lr %.3g  grad-norm %.3g  %.1f queries/s  ETA %s\n",
			p.Step, p.Steps, p.Loss, p.LR, p.GradNorm, p.ExamplesPerS, p.ETA.Round(time.Second))
	}
	res, err := train.Run(ctx, c)
	if err != nil {
		return err
	}
	fmt.Printf("trained %d steps, final loss %.4f\n", res.Steps, res.FinalLoss)
	if lastEval != "" {
		fmt.Println(lastEval)
	}
	fmt.Printf("checkpoint: %s\nhugging face checkpoint: %s\n", res.Checkpoint, res.HFDir)
	if man, err := model.LoadManifest(res.ModelDir); err == nil {
		fmt.Printf("model: %s (fingerprint %s)\n", res.ModelDir, man.ShortFingerprint())
	}
	return nil
}

// checkpointDir maps an anna model dir (model.onnx, no weights) to the
// checkpoint it was converted from, which is what the trainer reads.
func checkpointDir(dir string) string {
	if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) > 0 {
		return dir
	}
	if man, err := model.LoadManifest(dir); err == nil && man.Source != "" {
		return man.Source
	}
	return dir
}

func parseLoRA(s string, alpha float64) (*train.LoRAConfig, error) {
	rank, targets, _ := strings.Cut(s, ":")
	var r int
	if _, err := fmt.Sscanf(rank, "%d", &r); err != nil || r <= 0 {
		return nil, fmt.Errorf("-lora %q: rank must be a positive integer", s)
	}
	lc := &train.LoRAConfig{Rank: r, Alpha: alpha}
	if lc.Alpha <= 0 {
		lc.Alpha = float64(2 * r)
	}
	if targets != "" {
		lc.Targets = strings.Split(targets, ",")
	}
	return lc, nil
}

// checkCUDA opens the GPU to report exactly what is missing where there is
// none. Where one is found it still refuses: the CUDA training step
// (train/cuda) has been checked only against an emulator of its kernels, not
// on hardware, and will not be offered until it has been.
func checkCUDA(ctx context.Context) error {
	d, err := cuda.Open(ctx, cuda.Options{})
	if err != nil {
		return fmt.Errorf("--device cuda: %w", err)
	}
	desc := d.String()
	d.Close()
	return fmt.Errorf("--device cuda: found %s, but the CUDA training loop is not yet verified on a GPU (train/cuda/README.md); use --device cpu", desc)
}
