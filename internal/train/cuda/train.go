package cuda

import (
	"fmt"

	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

// TrainDecoder uploads a decoder under LoRA (NewDecoder).
func (d *Device) TrainDecoder(m *decoder.Model) (train.DeviceDecoder, error) {
	c, err := NewDecoder(d, m)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// TrainEncoder and TrainDecoder make the Device a train.Accelerator:
// train.Run with Config.Device set to it runs a BERT encoder's steps (full
// fine-tuning or LoRA) or a decoder's (LoRA) here — weights, gradients and AdamW
// moments on the device; tokenising, the loss on the pooled embeddings,
// checkpoints and the export on the host.
func (d *Device) TrainEncoder(cfg *model.Config, prefix string, weights map[string][]float32, lora []train.EncoderLoRA) (train.DeviceEncoder, error) {
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
	if len(lora) > 0 {
		fs := make([]LoRAFactors, len(lora))
		for i, l := range lora {
			fs[i] = LoRAFactors{Weight: l.Weight, AName: l.A.Name, BName: l.B.Name, A: l.A.W, B: l.B.W, Rank: l.Rank, Scale: l.Scale}
		}
		if err := e.EnableLoRA(fs); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}
