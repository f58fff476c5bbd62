package train

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/internal/format/metrics"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

// Param is one trainable tensor, its gradient and optimizer flags, of any
// architecture.
type Param = ops.Param

// Objectives.
const (
	ObjectiveContrastive = "contrastive" // bi-encoder: InfoNCE (+ distillation)
	ObjectiveBCE         = "bce"         // cross-encoder: binary cross-entropy per pair
	ObjectiveListwise    = "listwise"    // cross-encoder: softmax over a query's candidates
)

// Pooling modes (the manifest's names): BERT's and decoders' PoolMean and
// PoolLast, BERT's PoolCLS, and decoders' trainable heads.
const (
	PoolMean       = ops.PoolMean
	PoolCLS        = ops.PoolCLS
	PoolLast       = ops.PoolLast
	PoolLatent     = decoder.PoolLatent
	PoolMultiLayer = decoder.PoolMultiLayer
)

// ContrastiveConfig sets the bi-encoder objective (objective.ContrastiveConfig).
type ContrastiveConfig = objective.ContrastiveConfig

// isHead reports whether pooling is a decoder's trainable head.
func isHead(pooling string) bool { return pooling == PoolLatent || pooling == PoolMultiLayer }

// Config is one training run. Zero values pick the defaults noted.
type Config struct {
	// ModelDir is a Hugging Face checkpoint (config.json, *.safetensors,
	// tokenizer.json) of a BERT encoder or a Llama-family decoder, or a
	// llama GGUF file (internal/train/decoder).
	ModelDir string
	Data     string // FlagEmbedding JSON lines (annactl mine's output)
	OutDir   string // checkpoint/, hf/ (the trained checkpoint), model/ (the anna model) and metrics.jsonl go here

	Objective string // contrastive (default), bce or listwise
	// Pooling is the bi-encoder pooling: for BERT what ModelDir's
	// sentence-transformers files say (its Pooling module), else mean; cls,
	// lasttoken (decoders' default), or for decoders a trainable head,
	// latent or multilayer (HeadLatents, HeadHeads), which the exported
	// graph applies; a checkpoint exported with a head defaults to it.
	Pooling   string
	MaxLength int // tokens per text (per pair for cross-encoders); default 128

	BatchSize int // queries per micro-batch (default 16)
	GroupSize int // documents per query: 1 positive + GroupSize−1 negatives (default 8)
	Accum     int // micro-batches per optimizer step (default 1)
	Epochs    int // default 1; MaxSteps, when set, wins
	MaxSteps  int

	LR          float64 // peak learning rate (default 2e-5; 1e-4 with LoRA)
	WeightDecay float64 // default 0.01
	Warmup      float64 // warm-up as a fraction of the steps (default 0.1)
	ClipNorm    float64 // global gradient norm clip (default 1; negative: off)

	Temperature        float64 // InfoNCE temperature (default 0.05)
	NoInBatch          bool    // only the query's own negatives (default: in-batch too)
	DistillWeight      float64 // weight of the KL distillation term (0: off)
	TeacherTemperature float64 // default 1

	// LoRA, nil for full fine-tuning. Alpha ≤ 0 means 2×rank for BERT and
	// rank/2 for decoders (paper 003's rank 64, alpha 32); no targets means
	// query and value for BERT, every projection for decoders (q_proj,
	// k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj).
	LoRA *LoRAConfig
	// Bidirectional lets a decoder's tokens attend to the whole sequence
	// instead of the tokens before them. anna's ONNX decoder graph is
	// causal, so such a run needs NoExport.
	Bidirectional bool
	// Recompute is gradient checkpointing for decoders: each layer's
	// activations are recomputed in the backward instead of kept (one
	// layer's memory instead of all of them, for about a third more
	// compute), with bit-for-bit the same gradients.
	Recompute bool
	// HeadLatents and HeadHeads shape a trainable pooling head (0: 16
	// latent queries, 8 attention heads).
	HeadLatents, HeadHeads int

	// Technique, when set, replaces a decoder's plain contrastive step with
	// one of the papers' methods (the Method of a package under
	// internal/train/technique), which also decides what the run saves and exports.
	Technique decoder.Method

	// Device, when set, runs the steps on an accelerator (train/cuda's
	// Device) instead of the Go CPU path (Accelerator says what it covers;
	// the rest is refused). Checkpoints and the export are the same files
	// either way.
	Device Accelerator

	Seed            uint64
	Threads         int     // goroutines per op (≤ 0: GOMAXPROCS)
	EvalFraction    float64 // held-out share of the examples (default 0.05; negative: none)
	EvalEvery       int     // steps between evaluations (default 50)
	CheckpointEvery int     // steps between checkpoints (default 50)
	Resume          bool    // continue from OutDir/checkpoint when present
	NoExport        bool    // skip the export at the end
	Name            string  // exported model name (default: OutDir's base name)
	// ExportMaxLength is the max length recorded in the exported model's
	// manifest, i.e. what inference will use. 0: MaxLength for the
	// cross-encoder objectives (they score pairs as trained), else the import
	// path's default. A bi-encoder trained on short texts is usually served
	// at its base model's length (MiniLM: trained at 128, served at 256).
	ExportMaxLength int

	// Progress, when set, is called after every step and evaluation.
	Progress func(Progress)
	// Report, when set, is given the run's description and its metrics so
	// far at every checkpoint before the last, when the run stops early
	// (cancelled, a loss that is not finite) and at the end — where a
	// report is drawn (annactl train: DIR/report.html, package report). An
	// error stops the run.
	Report func(metrics.Run, metrics.Metrics) error
}

// LoRAConfig chooses low-rank adaptation for a run: each target matrix W
// (out×in) becomes W + Alpha/Rank · B·A with A (Rank×in) and B (out×Rank)
// trained and W frozen. Targets name the matrices as the architecture does
// (bert.LoRAConfig, decoder.LoRAConfig).
type LoRAConfig struct {
	Rank    int
	Alpha   float64
	Targets []string
}

// Progress reports a training run's state.
type Progress struct {
	Step, Steps  int
	Loss         float64 // mean over the step's micro-batches
	LR           float64
	GradNorm     float64
	ExamplesPerS float64 // queries per second
	ETA          time.Duration
	// Eval is set on evaluation reports.
	Eval *EvalResult
}

// EvalResult is the held-out loss and how often the positive scores above
// every negative of its own group.
type EvalResult struct {
	Loss     float64
	Accuracy float64
	Queries  int
}

// Result says what a run produced.
type Result struct {
	Steps      int
	FinalLoss  float64
	Checkpoint string // OutDir/checkpoint
	HFDir      string // trained Hugging Face checkpoint (LoRA merged), or what a technique saved
	ModelDir   string // converted anna model (model.onnx + manifest); empty with NoExport
	// Run and Metrics are the run's description and its metrics (what
	// OutDir/metrics.jsonl holds, resumes included).
	Run     metrics.Run
	Metrics metrics.Metrics
}

func (c *Config) defaults() error {
	if c.ModelDir == "" || c.Data == "" || c.OutDir == "" {
		return errors.New("train: ModelDir, Data and OutDir are required")
	}
	if c.Objective == "" {
		c.Objective = ObjectiveContrastive
	}
	switch c.Objective {
	case ObjectiveContrastive, ObjectiveBCE, ObjectiveListwise:
	default:
		return fmt.Errorf("train: objective %q unknown (want contrastive, bce or listwise)", c.Objective)
	}
	if c.Pooling == "" {
		c.Pooling = PoolMean
		if c.isDecoder() {
			c.Pooling = PoolLast
			if h := c.trainedHead(); h != nil { // an export with a pooling head goes on with it
				c.Pooling = h.Mode
			}
		} else if st := c.servedAs(); st.Pooling != "" {
			c.Pooling = st.Pooling // as the checkpoint is served (bge-small: CLS)
		}
	}
	switch c.Pooling {
	case PoolMean, PoolCLS, PoolLast, PoolLatent, PoolMultiLayer:
	default:
		return fmt.Errorf("train: pooling %q unknown (want mean, cls, lasttoken, latent or multilayer)", c.Pooling)
	}
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setF := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&c.MaxLength, 128)
	setInt(&c.BatchSize, 16)
	setInt(&c.GroupSize, 8)
	setInt(&c.Accum, 1)
	setInt(&c.Epochs, 1)
	setInt(&c.EvalEvery, 50)
	setInt(&c.CheckpointEvery, 50)
	if c.LoRA != nil {
		setF(&c.LR, 1e-4)
	}
	setF(&c.LR, 2e-5)
	setF(&c.WeightDecay, 0.01)
	setF(&c.Warmup, 0.1)
	setF(&c.ClipNorm, 1)
	setF(&c.Temperature, 0.05)
	setF(&c.TeacherTemperature, 1)
	setF(&c.EvalFraction, 0.05)
	if c.GroupSize < 2 {
		return fmt.Errorf("train: group size %d leaves no negatives (want ≥ 2)", c.GroupSize)
	}
	if c.Name == "" {
		c.Name = filepath.Base(c.OutDir)
	}
	return nil
}

// isDecoder reports whether ModelDir is a GGUF file or a decoder
// checkpoint (an unreadable config is loadSource's error to report).
func (c *Config) isDecoder() bool {
	if isGGUF(c.ModelDir) {
		return true
	}
	mc, err := model.LoadConfig(c.ModelDir)
	return err == nil && mc.IsDecoder()
}

func isGGUF(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gguf") }

// servedAs is what ModelDir's sentence-transformers files say of how the
// model is served (zero when it has none, or is a GGUF file).
func (c *Config) servedAs() model.STSettings {
	if isGGUF(c.ModelDir) {
		return model.STSettings{}
	}
	st, err := model.ReadSentenceTransformers(c.ModelDir)
	if err != nil || st.PoolingErr != nil {
		return model.STSettings{}
	}
	return st
}

// trainedHead is the trainable pooling head ModelDir's config.json
// describes (an earlier export's), or nil.
func (c *Config) trainedHead() *model.PoolingHead {
	if isGGUF(c.ModelDir) {
		return nil
	}
	mc, err := model.LoadConfig(c.ModelDir)
	if err != nil {
		return nil
	}
	return mc.PoolingHead
}

// exportMaxLength picks the served max length, never past the model's
// position embeddings (0 leaves it to the import path).
func (c Config) exportMaxLength(positions int) int {
	n := c.ExportMaxLength
	if n <= 0 && (c.Objective == ObjectiveBCE || c.Objective == ObjectiveListwise) {
		n = c.MaxLength
	}
	if positions > 0 && n > positions {
		n = positions
	}
	return n
}
