package testmodels

import (
	"fmt"
	"math/rand/v2"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// Techniques are the decoder embedders' variants WithTechnique makes:
// plain (causal, pooling outside the graph), bidirectional attention, the
// trainable pooling heads, AutoRegEmbed's memory tokens and Causal2Vec's
// contextual token.
var Techniques = []string{"plain", model.AttentionBidirectional, model.PoolingLatent, model.PoolingMultiLayer, model.PoolingMemory, model.PoolingCausal2Vec}

// Tiny techniques' shapes: a head of 3 latents in 2 heads, 3 memory
// tokens, a Causal2Vec context of 8 values (Letters' width).
const (
	HeadLatents    = 3
	HeadHeads      = 2
	MemoryCount    = 3
	ContextDimTiny = 8
)

// WithTechnique sets decoder cfg up for technique (one of Techniques) and
// adds the technique's random tensors (seeded, named as the trainer
// exports them: "pooling.…", "causal2vec.mlp.…", "autoregembed.memory")
// to tensors.
func WithTechnique(cfg *model.Config, tensors map[string]*safetensors.Tensor, technique string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	H := cfg.HiddenSize
	put := func(name string, scale float64, base float32, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = base + float32(scale*rng.NormFloat64())
		}
		tensors[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: d}
	}
	switch technique {
	case "plain":
	case model.AttentionBidirectional:
		cfg.Attention = model.AttentionBidirectional
	case model.PoolingLatent, model.PoolingMultiLayer:
		cfg.PoolingHead = &model.PoolingHead{Mode: technique, Latents: HeadLatents, Heads: HeadHeads}
		put("pooling.latents", 0.5, 0, HeadLatents, H)
		if technique == model.PoolingMultiLayer {
			put("pooling.layer_weights", 0.1, 0, cfg.NumHiddenLayers, H)
		}
		for _, n := range []string{"k_proj", "v_proj", "o_proj", "mlp.fc1", "mlp.fc2"} {
			put("pooling."+n+".weight", 0.2, 0, H, H)
		}
		put("pooling.mlp.fc1.bias", 0.05, 0, H)
		put("pooling.mlp.fc2.bias", 0.05, 0, H)
	case model.PoolingMemory:
		cfg.MemoryTokens = MemoryCount
		put("autoregembed.memory", 0.2, 0, MemoryCount, H)
	case model.PoolingCausal2Vec:
		cfg.Causal2Vec = &model.Causal2Vec{ContextDim: ContextDimTiny, Bias: true}
		put("causal2vec.mlp.0.weight", 0.3, 0, H, ContextDimTiny)
		put("causal2vec.mlp.0.bias", 0.05, 0, H)
		put("causal2vec.mlp.2.weight", 0.2, 0, H, H)
		put("causal2vec.mlp.2.bias", 0.05, 0, H)
	default:
		return fmt.Errorf("testmodels: technique %q unknown (want one of %v)", technique, Techniques)
	}
	return nil
}
