package train

import (
	"fmt"
	"math"

	"github.com/anna-search/anna/train/objective"
)

// Objectives.
const (
	ObjectiveContrastive = "contrastive" // bi-encoder: InfoNCE (+ distillation)
	ObjectiveBCE         = "bce"         // cross-encoder: binary cross-entropy per pair
	ObjectiveListwise    = "listwise"    // cross-encoder: softmax over a query's candidates
)

// ContrastiveGrad runs forward and backward for one bi-encoder batch whose
// first Q sequences are queries and the next Q·G their groups (positive
// first). Gradients of scale·loss are added to the params; the unscaled loss
// is returned.
func (m *Model) ContrastiveGrad(b *Batch, Q, G int, pooling string, teacher []float32, cfg ContrastiveConfig, scale float32) (float64, error) {
	if b.N != Q+Q*G {
		return 0, fmt.Errorf("train: contrastive batch has %d sequences, want %d queries + %d documents", b.N, Q, Q*G)
	}
	a, err := m.Forward(b)
	if err != nil {
		return 0, err
	}
	e, err := m.Pool(a, pooling)
	if err != nil {
		return 0, err
	}
	loss, parts, de, err := objective.ContrastiveStep(e, Q, G, m.Cfg.HiddenSize, teacher, cfg, scale)
	m.lastParts = parts
	if de == nil {
		return loss, err
	}
	dh := make([]float32, len(a.Hidden))
	m.PoolBackward(a, pooling, de, dh)
	m.Backward(a, dh)
	return loss, nil
}

// CrossEncoderGrad runs forward and backward for a cross-encoder batch of
// Q·G (query, document) pairs, G per query with the positive first.
// obj is ObjectiveBCE (labels per pair) or ObjectiveListwise;
// teacher (Q·G raw scores) may be nil when cc.DistillWeight is 0.
func (m *Model) CrossEncoderGrad(b *Batch, obj string, labels, teacher []float32, cc CrossConfig, Q, G int, scale float32) (float64, error) {
	if err := m.crossBatch(b, Q, G); err != nil {
		return 0, err
	}
	a, err := m.Forward(b)
	if err != nil {
		return 0, err
	}
	dh := make([]float32, len(a.Hidden))
	loss, back, err := m.crossHead(a, obj, labels, teacher, cc, Q, G, scale, dh)
	if back {
		m.Backward(a, dh)
	}
	return loss, err
}

// crossBatch checks a cross-encoder batch against the head.
func (m *Model) crossBatch(b *Batch, Q, G int) error {
	if b.N != Q*G {
		return fmt.Errorf("train: cross-encoder batch has %d pairs, want %d", b.N, Q*G)
	}
	if m.clsW != nil && m.clsW.Shape[0] != 1 {
		return fmt.Errorf("train: cross-encoder objectives need a 1-logit classifier, this one has %d labels", m.clsW.Shape[0])
	}
	return nil
}

// crossHead runs the cross-encoder head and loss over a forward pass's
// activations — the CPU's, or the device path's [CLS] rows as N×1×C Acts —
// setting lastParts and lastCorrect (queries whose positive outscored all
// of their own candidates). When dHidden is not nil and the loss is finite,
// it adds the head's parameter gradients and ∂(scale·loss)/∂hidden to
// dHidden, and back says so.
func (m *Model) crossHead(a *Acts, obj string, labels, teacher []float32, cc CrossConfig, Q, G int, scale float32, dHidden []float32) (loss float64, back bool, err error) {
	logits, err := m.Classify(a)
	if err != nil {
		return 0, false, err
	}
	m.lastCorrect = 0
	for i := 0; i < Q; i++ {
		best := true
		for g := 1; g < G; g++ {
			if logits[i*G+g] >= logits[i*G] {
				best = false
			}
		}
		if best {
			m.lastCorrect++
		}
	}
	loss, parts, dl, err := objective.CrossEncoderLoss(obj, logits, labels, Q, G, teacher, cc)
	m.lastParts = parts
	if err != nil {
		return 0, false, fmt.Errorf("train: %w", err)
	}
	if dHidden == nil || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, false, nil
	}
	for i := range dl {
		dl[i] *= scale
	}
	m.ClassifyBackward(a, dl, dHidden)
	return loss, true, nil
}

// EvalContrastive is ContrastiveGrad's forward only: the loss, no gradients.
func (m *Model) EvalContrastive(b *Batch, Q, G int, pooling string, teacher []float32, cfg ContrastiveConfig) (float64, error) {
	a, err := m.Forward(b)
	if err != nil {
		return 0, err
	}
	e, err := m.Pool(a, pooling)
	if err != nil {
		return 0, err
	}
	loss, correct, err := objective.ContrastiveEval(e, Q, G, m.Cfg.HiddenSize, teacher, cfg)
	m.lastCorrect = correct
	return loss, err
}

// EvalCrossEncoder is CrossEncoderGrad's forward only.
func (m *Model) EvalCrossEncoder(b *Batch, obj string, labels, teacher []float32, cc CrossConfig, Q, G int) (float64, error) {
	a, err := m.Forward(b)
	if err != nil {
		return 0, err
	}
	loss, _, err := m.crossHead(a, obj, labels, teacher, cc, Q, G, 0, nil)
	return loss, err
}
