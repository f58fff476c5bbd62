package decoder

import (
	"fmt"

	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/ops"
)

// Layout is the model as a device trainer (internal/train/cuda) reads it: the same
// parameters, in the same order of ops as Forward and Backward. It is a
// view (no copies): the device uploads the weights, trains those that are
// not Frozen (the LoRA factors, or under full fine-tuning every weight),
// and copies them back into these Params.
type Layout struct {
	Embed, Norm *ops.Param
	Layers      []LayerLayout
	Causal      bool
	Recompute   bool // Model.Recompute: one layer's activations held, recomputed in the backward
}

// LayerLayout is one layer: its norms (QN, KN are Qwen3's per-head q/k
// norms, nil otherwise) and its projections in q, k, v, o, gate, up, down
// order (Bias and LoRA may be nil).
type LayerLayout = llama.Layer

// DeviceLayout describes the model for a device trainer, which trains
// what the model trains — LoRA factors over a frozen base, or every
// weight (full fine-tuning), or nothing (AutoRegEmbed's frozen decoder:
// its backward reaches the inputs only) — except a trainable pooling
// head, which stays on the host (HeadForward, HeadBackward). A trained
// parameter the layout does not hold is an error.
func (m *Model) DeviceLayout() (*Layout, error) {
	lo := &Layout{Embed: m.Embedding(), Norm: m.FinalNorm(), Layers: m.Layers, Causal: m.Causal, Recompute: m.Recompute}
	held := map[*ops.Param]bool{m.Embedding(): true, m.FinalNorm(): true}
	for _, ly := range m.Layers {
		for _, p := range []*ops.Param{ly.LN1, ly.LN2, ly.QN, ly.KN} {
			held[p] = true
		}
		for _, lin := range ly.Proj {
			held[lin.W], held[lin.Bias] = true, true
			if lin.LoRA != nil {
				held[lin.LoRA.A], held[lin.LoRA.B] = true, true
			}
		}
	}
	for _, p := range m.Params {
		if !p.Frozen && !held[p] && !isHeadName(p.Name) {
			return nil, fmt.Errorf("decoder: %s trains, and the device path does not hold it", p.Name)
		}
	}
	return lo, nil
}

// Validate checks a batch as Forward would (shape, right padding, ids in
// the vocabulary, length within the positions).
func (m *Model) Validate(b *Batch) error {
	_, err := b.lengths(&m.Cfg)
	return err
}
