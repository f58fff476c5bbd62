package arch

import (
	"strconv"

	"github.com/anna-search/anna/model"
)

// Encoder is a BERT encoder layer (model_type bert; RoBERTa and XLM-R
// import as it): self-attention with biases, its output projection, the
// residual and a LayerNorm; the MLP's two products around the activation
// (hidden_act), the residual and a LayerNorm (post-norm). Absolute
// position and token-type embeddings are summed with the word embedding
// and normalised before the first layer.
type Encoder struct {
	Hidden, Intermediate, Heads int
	Eps                         float64 // layer_norm_eps
	Act                         string  // hidden_act
	// Weights are one layer's tensors in the checkpoint's (and the
	// trainer's parameter) order: query, key, value and attention output
	// (weight, bias each), the attention LayerNorm (weight, bias), the
	// MLP's products, the output LayerNorm.
	Weights []Weight
}

// The encoder's tensors outside its layers (after a "bert." prefix where
// the checkpoint has one).
const (
	WordEmbeddings      = "embeddings.word_embeddings.weight"
	PositionEmbeddings  = "embeddings.position_embeddings.weight"
	TokenTypeEmbeddings = "embeddings.token_type_embeddings.weight"
	EmbeddingsNorm      = "embeddings.LayerNorm" // .weight, .bias
	// EncFusedQKV is the module of anna's graphs' fused attention input:
	// query, key and value stacked as columns (model/onnx's fused and int8
	// BERT graphs; the readers split it back). FusedQKV names it.
	EncFusedQKV = "attention.self.qkv"
)

// EncoderOf describes the layers of cfg (a BERT config).
func EncoderOf(cfg *model.Config) *Encoder {
	C, FF := cfg.HiddenSize, cfg.IntermediateSize
	e := &Encoder{Hidden: C, Intermediate: FF, Heads: cfg.NumAttentionHeads, Eps: cfg.LayerNormEps, Act: cfg.HiddenAct}
	add := func(r Role, out, in int) {
		if in > 0 {
			e.Weights = append(e.Weights, Weight{Role: r, Name: r.Module() + ".weight", Shape: []int{out, in}})
		} else { // a LayerNorm's gain
			e.Weights = append(e.Weights, Weight{Role: r, Name: r.Module() + ".weight", Shape: []int{out}})
		}
		e.Weights = append(e.Weights, Weight{Role: r, Bias: true, Name: r.Module() + ".bias", Shape: []int{out}})
	}
	add(EncQuery, C, C)
	add(EncKey, C, C)
	add(EncValue, C, C)
	add(EncAttnOut, C, C)
	add(EncAttnNorm, C, 0)
	add(EncInter, FF, C)
	add(EncOut, C, FF)
	add(EncOutNorm, C, 0)
	return e
}

// EncoderLayer is layer l's name prefix ("encoder.layer.3."), after the
// checkpoint's own prefix if any.
func EncoderLayer(l int) string { return "encoder.layer." + strconv.Itoa(l) + "." }

// FusedQKV is the name of layer l's fused attention input in anna's BERT
// graphs ("encoder.layer.3.attention.self.qkv"; its initializers are this
// with ".weight" and ".bias", or the int8 graph's ".weight_int8" and
// ".weight_scale", "." written "_"): model/onnx's BuildBERT writes it,
// model/bert's float32 and int8 readers split it back. Unlike the layer's
// other tensors it is never under the checkpoint's own prefix (the "bert."
// of a BertForSequenceClassification checkpoint): the module is anna's,
// not the checkpoint's, and every graph anna has written names it so.
func FusedQKV(l int) string { return EncoderLayer(l) + EncFusedQKV }

// Find returns the weight of role r (its bias with bias) and whether the
// layer has it.
func (e *Encoder) Find(r Role, bias bool) (Weight, bool) { return find(e.Weights, r, bias) }

// Bind fills one layer's slots from the layout: for each weight, in the
// checkpoint's order, add(w) is stored in slots[w.Role][0] (a weight or a
// LayerNorm's gain) or [1] (a bias).
func Bind[P any](e *Encoder, slots map[Role][2]*P, add func(w Weight) P) {
	for _, w := range e.Weights {
		i := 0
		if w.Bias {
			i = 1
		}
		*slots[w.Role][i] = add(w)
	}
}
