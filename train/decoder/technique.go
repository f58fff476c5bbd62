package decoder

import (
	"github.com/anna-search/anna/train/objective"
	"github.com/anna-search/anna/train/ops"
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
// contrastive step of Model.ContrastiveGrad: one of the papers' objectives
// or model shapes (Causal2Vec, Anchor, AutoRegEmbed, in train/technique).
// The trainer's loop (schedule, accumulation, clipping, checkpoints,
// resume) is the same for all of them.
type Technique interface {
	// Params are the trainable parameters (and frozen ones, flagged), in a
	// fixed order: the checkpoint and optimizer order.
	Params() []*ops.Param
	ZeroGrad()
	// Grad adds scale × the gradient of the step's loss to the params and
	// returns the unscaled loss.
	Grad(s *Step, cc objective.ContrastiveConfig, scale float32) (float64, error)
	// Eval is Grad's forward only: the loss and how many queries rank
	// their positive above their group's negatives (0 where the objective
	// does not rank).
	Eval(s *Step, cc objective.ContrastiveConfig) (loss float64, correct int, err error)
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

func (r cpuRunner) Forward(b *Batch) (*Acts, error) { return r.m.Forward(b) }
func (r cpuRunner) Backward(a *Acts, dHidden []float32) error {
	r.m.Backward(a, dHidden)
	return nil
}
