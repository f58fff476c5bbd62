package cuda

import (
	"errors"
	"fmt"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

// TrainEncoder makes the Device a train.Accelerator: train.Run with
// Config.Device set to it runs a BERT bi-encoder's steps here (weights,
// gradients and AdamW moments on the device; tokenising, the loss on the
// pooled embeddings, checkpoints and the export on the host).
func (d *Device) TrainEncoder(cfg *model.Config, prefix string, weights map[string][]float32) (train.DeviceEncoder, error) {
	if cfg.ModelType != "bert" {
		return nil, fmt.Errorf("cuda: model_type %q: the device encoder is BERT", cfg.ModelType)
	}
	if pt := cfg.PositionEmbeddingType; pt != "" && pt != "absolute" {
		return nil, fmt.Errorf("cuda: position_embedding_type %q: the device encoder has absolute positions", pt)
	}
	ec := EncoderConfig{Vocab: cfg.VocabSize, Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers, Heads: cfg.NumAttentionHeads,
		FF: cfg.IntermediateSize, MaxPos: cfg.MaxPositionEmbeddings, TypeVocab: cfg.TypeVocabSize, Act: cfg.HiddenAct,
		Eps: float32(cfg.LayerNormEps)}
	e, err := NewEncoder(d, ec, prefix, weights)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Has reports whether the encoder holds the named weight.
func (e *Encoder) Has(name string) bool { return e.byName[name] != nil }

// State copies a weight and, after the first AdamW step, its moments into
// w, m and v (train.DeviceEncoder).
func (e *Encoder) State(name string, w, m, v []float32) (bool, error) {
	p := e.byName[name]
	if p == nil {
		return false, fmt.Errorf("cuda: the encoder has no %s", name)
	}
	if len(w) != p.N || len(m) != p.N || len(v) != p.N {
		return false, fmt.Errorf("cuda: %s: host slices of %d, %d and %d values, want %d", name, len(w), len(m), len(v), p.N)
	}
	if err := Download(w, p.W); err != nil {
		return false, err
	}
	if p.m == nil {
		return false, nil
	}
	return true, errors.Join(Download(m, p.m), Download(v, p.v))
}

// SetState replaces a weight and, when m is not nil, its moments
// (train.DeviceEncoder; resuming from a checkpoint).
func (e *Encoder) SetState(name string, w, m, v []float32) error {
	p := e.byName[name]
	if p == nil {
		return fmt.Errorf("cuda: the encoder has no %s", name)
	}
	if err := p.Upload(w); err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	return p.SetMoments(e.d, m, v)
}
