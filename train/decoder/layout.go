package decoder

import (
	"errors"
	"fmt"
	"slices"

	"github.com/anna-search/anna/train/ops"
)

// Layout is the model as a device trainer (train/cuda) reads it: the same
// parameters, in the same order of ops as Forward and Backward. It is a
// view (no copies): the device uploads the weights and the LoRA factors,
// trains the factors, and copies them back into these Params.
type Layout struct {
	Embed, Norm *ops.Param
	Layers      []LayerLayout
	Causal      bool
}

// LayerLayout is one layer: its norms (QN, KN are Qwen3's per-head q/k
// norms, nil otherwise) and its projections in q, k, v, o, gate, up, down
// order (Bias and LoRA may be nil).
type LayerLayout struct {
	LN1, LN2, QN, KN *ops.Param
	Proj             [7]*ops.Linear
}

// DeviceLayout describes the model for a device trainer, which trains
// LoRA factors over a frozen base (a trainable pooling head stays on the
// host: HeadForward, HeadBackward), or runs a model with every parameter
// frozen (AutoRegEmbed's frozen decoder: its backward reaches the inputs
// only): it refuses a model with any other parameter training — full
// fine-tuning.
func (m *Model) DeviceLayout() (*Layout, error) {
	switch {
	case !m.lora && slices.ContainsFunc(m.Params, func(p *ops.Param) bool { return !p.Frozen }):
		return nil, errors.New("decoder: the device path trains LoRA factors over a frozen base; enable LoRA (full fine-tuning of a decoder runs on the CPU)")
	}
	lo := &Layout{Embed: m.embed, Norm: m.norm, Causal: m.Causal}
	lora := map[*ops.Param]bool{}
	for _, ly := range m.layers {
		lo.Layers = append(lo.Layers, LayerLayout{LN1: ly.ln1, LN2: ly.ln2, QN: ly.qn, KN: ly.kn, Proj: ly.proj})
		for _, lin := range ly.proj {
			if lin.LoRA != nil {
				lora[lin.LoRA.A], lora[lin.LoRA.B] = true, true
			}
		}
	}
	for _, p := range m.Params {
		if !p.Frozen && !lora[p] && !isHeadName(p.Name) {
			return nil, fmt.Errorf("decoder: %s trains, and the device path trains LoRA factors only", p.Name)
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
