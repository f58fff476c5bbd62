package decoder

import (
	"context"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/internal/train/objective"
)

// Step is one training batch as a Technique sees it: Q queries, each with
// a group of G documents (its positive first), as texts and as this
// decoder's right-padded token batch (EOS appended by the tokenizer,
// instructions already on the queries), with the teacher's soft labels.
type Step struct {
	Q, G    int
	Texts   []string  // Q queries, then Q·G documents, group by group
	Batch   *Batch    // the same Q + Q·G sequences, tokenised
	Teacher []float32 // Q×G teacher scores, or nil
}

// Technique is a decoder training method that replaces the plain
// contrastive step (objective.ContrastiveGrad over Model.Pass): one of the papers' objectives
// or model shapes (Causal2Vec, Anchor, AutoRegEmbed, in internal/train/technique).
// The trainer's loop (schedule, accumulation, clipping, checkpoints,
// resume) is the same for all of them; what differs — the step, where its
// decoders' passes run, what it saves and exports — is here, so that the
// loop names no technique.
type Technique interface {
	// Params are the trainable parameters (and frozen ones, flagged), in a
	// fixed order: the checkpoint and optimizer order.
	Params() []*ops.Param
	ZeroGrad()
	// Grad adds scale × the gradient of the step's loss to the params and
	// returns the unscaled loss (and its terms, where it has them).
	Grad(s *Step, cc objective.ContrastiveConfig, scale float32) (objective.Loss, error)
	// Eval is Grad's forward only: the loss and how many queries rank
	// their positive above their group's negatives (0 where the objective
	// does not rank).
	Eval(s *Step, cc objective.ContrastiveConfig) (objective.Loss, error)
	// Model is the decoder it trains (whose embedding table a device path
	// shares with the host, and whose positions bound the export).
	Model() *Model
	// UseRunners routes the passes of every decoder it runs — Model()
	// first, then any frozen ones — through the Runner up returns for it
	// (a device's); up's error stops it and is returned.
	UseRunners(up func(m *Model) (Runner, error)) error
	// Save writes under outDir what the next stage or its inference needs
	// beside the checkpoint, and returns that directory ("" when it has
	// nothing of its own).
	Save(outDir string) (string, error)
	// Export writes the trained model as outDir/hf and the anna model
	// outDir/model (export.Write), srcDir giving config.json, the
	// tokenizer and side files; s is the run's (Pooling its choice).
	Export(ctx context.Context, srcDir, outDir string, s export.Settings) (hfDir, modelDir string, err error)
	// Close releases what it holds beside the models.
	Close() error
}

// Method is a technique before the run has loaded its decoder: what a
// trainer's configuration names (train.Config.Technique). New wraps the
// loaded decoder — its pooling head enabled when the run asks for one, and
// under LoRA its factors, unless CopiesDecoder — or refuses the run's
// settings it cannot train with.
type Method interface {
	Name() string
	// CopiesDecoder reports whether the technique trains models of its
	// own built from the decoder's weights (AutoRegEmbed) rather than the
	// decoder itself: the run then loads the decoder in float32 and leaves
	// LoRA to it (Setup.LoRA).
	CopiesDecoder() bool
	New(m *Model, s Setup) (Technique, error)
}

// Setup is what a run hands Method.New beside the decoder.
type Setup struct {
	// Tokenizer is the run's (the decoder's, EOS appended).
	Tokenizer *tokenizer.Tokenizer
	// Prompts maps each training query text (instruction + query) to its
	// instruction.
	Prompts map[string]string
	// ModelDir is the decoder's checkpoint directory or GGUF file.
	ModelDir string
	// Pooling is the run's pooling (a trainable head's mode when it has
	// one); Bidirectional says the decoder attends both ways.
	Pooling       string
	Bidirectional bool
	// Recompute is gradient checkpointing, for the models a technique
	// builds itself.
	Recompute     bool
	DistillWeight float64
	// NoExport: the run ends without an export.
	NoExport bool
	// LoRA is the run's LoRA (Alpha settled), which a CopiesDecoder
	// technique applies to its own models; nil: full fine-tuning.
	LoRA    *LoRAConfig
	Threads int
	Seed    uint64
}

// Runner runs a decoder's forward and backward passes for a Technique: the
// Model itself on the CPU (Model.RunnerOr), or its twin on a device, which
// hands back the final hidden state (Acts.Hidden) and, after Backward of a
// batch given by Inputs, ∂loss/∂Inputs (Acts.DInputs). Either way the
// Model stays the technique's description of the decoder (its config, its
// frozen embedding table and LM head, read on the host) and its Params
// the checkpoint's; a Runner holds one activation workspace, so each
// Forward overwrites the last, as the Model's own does.
type Runner interface {
	Forward(b *Batch) (*Acts, error)
	// Backward adds to the trained parameters' gradients that of the loss
	// given dHidden = ∂loss/∂Hidden (N×T×C) of a, the latest Forward.
	Backward(a *Acts, dHidden []float32) error
}

// RunnerOr is r, or, when r is nil, the Model as its own Runner (on the
// CPU): what a technique runs its passes through.
func (m *Model) RunnerOr(r Runner) Runner {
	if r != nil {
		return r
	}
	return cpuRunner{m}
}

type cpuRunner struct{ m *Model }

func (r cpuRunner) Forward(b *Batch) (*Acts, error)           { return r.m.Forward(b) }
func (r cpuRunner) Backward(a *Acts, dHidden []float32) error { return r.m.Backward(a, dHidden) }
