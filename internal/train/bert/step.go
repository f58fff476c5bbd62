package bert

import (
	"fmt"
	"math"

	"github.com/anna-search/anna/internal/train/objective"
)

// Pass is b through m pooled by pooling (PoolMean, PoolCLS, PoolLast): what
// the contrastive step runs, and with PoolCLS the cross-encoder's.
func (m *Model) Pass(b *Batch, pooling string) objective.Pass {
	return objective.NewPass(m, b, pooling)
}

// HiddenLen is the length of the last hidden state (N×T×C).
func (a *Acts) HiddenLen() int { return len(a.Hidden) }

// ContrastiveGrad runs forward and backward for one bi-encoder batch whose
// first Q sequences are queries and the next Q·G their groups (positive
// first): objective.ContrastiveGrad over m's Pass. Gradients of scale·loss
// are added to the params; the unscaled loss is returned.
func (m *Model) ContrastiveGrad(b *Batch, Q, G int, pooling string, teacher []float32, cfg objective.ContrastiveConfig, scale float32) (objective.Loss, error) {
	return objective.ContrastiveGrad(m.Pass(b, pooling), b.N, Q, G, m.Cfg.HiddenSize, teacher, cfg, scale)
}

// CrossEncoderGrad runs forward and backward for a cross-encoder batch of
// Q·G (query, document) pairs, G per query with the positive first:
// CrossGrad over m's [CLS] Pass.
func (m *Model) CrossEncoderGrad(b *Batch, obj string, labels, teacher []float32, cc objective.CrossConfig, Q, G int, scale float32) (objective.Loss, error) {
	return m.CrossGrad(m.Pass(b, PoolCLS), b.N, obj, labels, teacher, cc, Q, G, scale)
}

// CrossGrad is the cross-encoder step over p, whose rows are the [CLS]
// hidden states (PoolCLS) of N = Q·G pairs — this model's on the CPU, or a
// device's: the head (pooler, tanh, classifier) and the objective
// (objective.CrossEncoderLoss: "bce" with labels per pair, or "listwise";
// teacher, Q·G raw scores, may be nil when cc.DistillWeight is 0) run here,
// then scale × ∂loss/∂rows goes to p.Backward. The head's parameter
// gradients are added here. A loss that is not finite is returned without
// a backward. Loss.Correct counts the queries whose positive outscored all
// of their own candidates.
func (m *Model) CrossGrad(p objective.Pass, N int, obj string, labels, teacher []float32, cc objective.CrossConfig, Q, G int, scale float32) (objective.Loss, error) {
	return m.crossStep(p, N, obj, labels, teacher, cc, Q, G, scale, true)
}

// CrossEval is CrossGrad's forward only.
func (m *Model) CrossEval(p objective.Pass, N int, obj string, labels, teacher []float32, cc objective.CrossConfig, Q, G int) (objective.Loss, error) {
	return m.crossStep(p, N, obj, labels, teacher, cc, Q, G, 0, false)
}

func (m *Model) crossStep(p objective.Pass, N int, obj string, labels, teacher []float32, cc objective.CrossConfig, Q, G int, scale float32, backward bool) (objective.Loss, error) {
	if N != Q*G {
		return objective.Loss{}, fmt.Errorf("bert: cross-encoder batch has %d pairs, want %d", N, Q*G)
	}
	if m.clsW != nil && m.clsW.Shape[0] != 1 {
		return objective.Loss{}, fmt.Errorf("bert: cross-encoder objectives need a 1-logit classifier, this one has %d labels", m.clsW.Shape[0])
	}
	cls, err := p.Forward()
	if err != nil {
		return objective.Loss{}, err
	}
	logits, h, err := m.classify(cls, N)
	if err != nil {
		return objective.Loss{}, err
	}
	var l objective.Loss
	for i := 0; i < Q; i++ {
		best := true
		for g := 1; g < G; g++ {
			if logits[i*G+g] >= logits[i*G] {
				best = false
			}
		}
		if best {
			l.Correct++
		}
	}
	loss, parts, dl, err := objective.CrossEncoderLoss(obj, logits, labels, Q, G, teacher, cc)
	if err != nil {
		return objective.Loss{Correct: l.Correct}, fmt.Errorf("bert: %w", err)
	}
	l.Value, l.Parts = loss, parts
	if !backward || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return l, nil
	}
	for i := range dl {
		dl[i] *= scale
	}
	return l, p.Backward(m.classifyBackward(h, dl))
}
