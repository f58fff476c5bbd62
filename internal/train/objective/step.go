package objective

import (
	"errors"
	"fmt"
)

// Loss is what one batch's loss came to: its value (unscaled), its terms
// where the objective has them (a contrastive or distilled loss), and, in
// an evaluation, how many queries ranked their positive above all of their
// own negatives.
type Loss struct {
	Value   float64
	Parts   Parts
	Correct int
}

// Pass is one batch through a bi-encoder, as the contrastive step runs it:
// Forward pools each of the batch's sequences into one row (N×C, C the
// width of an embedding); Backward, after Forward, adds to the trained
// parameters' gradients that of the loss given ∂loss/∂rows. BERT
// (internal/train/bert), the decoder (internal/train/decoder), the device path (package
// train) and Causal2Vec each implement it over their own batch.
type Pass interface {
	Forward() (rows []float32, err error)
	Backward(dRows []float32) error
}

// ContrastiveGrad is the bi-encoder training step: p's N = Q + Q·G
// sequences are Q queries, then their groups of G documents (positive
// first); it pools them, takes the contrastive loss (ContrastiveStep) and
// adds scale × its gradient to the parameters through p.Backward. A loss
// that is not finite is returned without a backward (the trainer then
// stops before updating).
func ContrastiveGrad(p Pass, N, Q, G, C int, teacher []float32, cfg ContrastiveConfig, scale float32) (Loss, error) {
	e, err := forward(p, N, Q, G)
	if err != nil {
		return Loss{}, err
	}
	loss, parts, de, err := ContrastiveStep(e, Q, G, C, teacher, cfg, scale)
	l := Loss{Value: loss, Parts: parts}
	if de == nil || err != nil {
		return l, err
	}
	return l, p.Backward(de)
}

// ContrastiveForward is ContrastiveGrad's forward only (a held-out
// evaluation): the loss and how many queries ranked their positive first
// (Loss.Correct).
func ContrastiveForward(p Pass, N, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (Loss, error) {
	e, err := forward(p, N, Q, G)
	if err != nil {
		return Loss{}, err
	}
	loss, correct, err := ContrastiveEval(e, Q, G, C, teacher, cfg)
	return Loss{Value: loss, Correct: correct}, err
}

// forward checks a contrastive batch's layout and runs p forward.
func forward(p Pass, N, Q, G int) ([]float32, error) {
	if N != Q+Q*G {
		return nil, fmt.Errorf("objective: contrastive batch has %d sequences, want %d queries + %d documents", N, Q, Q*G)
	}
	return p.Forward()
}

// Model is a bi-encoder as its CPU pass runs it: Forward runs a batch (B)
// and keeps its activations (A); Pool maps them to one row per sequence
// and PoolBackward adds the rows' gradient to ∂loss/∂hidden (A's
// HiddenLen floats, zeroed first); Backward adds to the parameters'
// gradients that of the loss given ∂loss/∂hidden.
type Model[B any, A Activations] interface {
	Forward(b B) (A, error)
	Pool(a A, mode string) ([]float32, error)
	PoolBackward(a A, mode string, dPooled, dHidden []float32)
	Backward(a A, dHidden []float32) error
}

// Activations are a forward pass's, as Model keeps them: HiddenLen is the
// length of its last hidden state.
type Activations interface {
	HiddenLen() int
}

// NewPass is b through m, pooled by pooling: the CPU's Pass.
func NewPass[B any, A Activations](m Model[B, A], b B, pooling string) Pass {
	return &modelPass[B, A]{m: m, b: b, pooling: pooling}
}

type modelPass[B any, A Activations] struct {
	m       Model[B, A]
	b       B
	pooling string
	a       A    // the last Forward's
	ran     bool // Forward ran
}

func (p *modelPass[B, A]) Forward() ([]float32, error) {
	a, err := p.m.Forward(p.b)
	if err != nil {
		return nil, err
	}
	p.a, p.ran = a, true
	return p.m.Pool(a, p.pooling)
}

func (p *modelPass[B, A]) Backward(dRows []float32) error {
	if !p.ran {
		return errors.New("objective: Backward before Forward")
	}
	dh := make([]float32, p.a.HiddenLen())
	p.m.PoolBackward(p.a, p.pooling, dRows, dh)
	return p.m.Backward(p.a, dh)
}
