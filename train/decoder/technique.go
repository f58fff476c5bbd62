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
