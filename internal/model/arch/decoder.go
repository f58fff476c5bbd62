// Package arch describes each model family's layers once: which weights a
// layer has, by role, with their checkpoint names and shapes, and the
// options that shape its arithmetic (norm, rotary positions, attention
// heads, biases, query/key norm): Decoder for the Llama family, Encoder
// for BERT. The readers of a checkpoint or graph (internal/model/llama's
// New and ReadGraph, hence the trainer's internal/train/decoder;
// internal/model/bert's New, ReadGraph and its int8 reader;
// internal/train/bert's NewModel), the CUDA encoder, the ONNX builders
// (internal/model/onnx's BuildLlama and BuildBERT), the GGUF importer and
// the test models read it, so that an architecture's variant is described
// here and only its genuinely new arithmetic is written elsewhere. It has
// no state and imports only package model.
package arch

import (
	"strconv"

	"github.com/anna-search/anna/model"
)

// Role is what a weight of a decoder layer does.
type Role int

// A decoder layer's roles. The projections come in transformers' order
// (q, k, v, o, gate, up, down), their index Role − QProj.
const (
	AttnNorm Role = iota // RMSNorm gain before attention (input_layernorm)
	QProj
	KProj
	VProj
	OProj
	GateProj
	UpProj
	DownProj
	QNorm   // Qwen3's per-head RMSNorm gain of the queries
	KNorm   // and of the keys
	MLPNorm // RMSNorm gain before the MLP (post_attention_layernorm)

	// A BERT encoder layer's roles (encoder.go): post-norm LayerNorms.
	EncQuery
	EncKey
	EncValue
	EncAttnOut
	EncAttnNorm // LayerNorm after attention and its residual
	EncInter    // the MLP's first product
	EncOut      // its second
	EncOutNorm  // LayerNorm after the MLP and its residual
)

// Projection is the Role of projection i (0 q … 6 down).
func Projection(i int) Role { return QProj + Role(i) }

// IsProjection reports whether r is a Linear's (a decoder's or an
// encoder's).
func (r Role) IsProjection() bool {
	return r >= QProj && r <= DownProj || r >= EncQuery && r <= EncOut && r != EncAttnNorm
}

// Weight is one tensor of a layer.
type Weight struct {
	Role Role
	Bias bool // a projection's bias (else its weight, or a norm's gain)
	// Name is the tensor's name inside the layer ("self_attn.q_proj.weight");
	// the checkpoint's is Layer(prefix, l) + Name.
	Name string
	// Shape is nn.Linear's [out, in] for a projection's weight, [n] for a
	// bias or a gain.
	Shape []int
}

// Module is the weight's module path inside the layer
// ("self_attn.q_proj", "input_layernorm").
func (w Weight) Module() string { return w.Role.Module() }

// Decoder is a Llama-family decoder layer (model_type llama, mistral,
// qwen2, qwen3): pre-norm RMSNorm, attention with rotary positions
// (rotate_half) and grouped-query heads, causal unless Bidirectional, and
// a SwiGLU MLP, each with a residual; then a final RMSNorm.
type Decoder struct {
	Hidden, Intermediate  int
	Heads, KVHeads, HeadD int
	Eps, RopeTheta        float64
	QKVBias               bool // Qwen2: biases on the q, k and v projections
	QKNorm                bool // Qwen3: per-head RMSNorm of queries and keys before the rotation
	Bidirectional         bool // anna_attention "bidirectional"
	// Weights are one layer's tensors in the checkpoint's (and the
	// trainer's parameter) order: the attention norm, each projection's
	// weight (and bias), the q/k norms, the MLP norm.
	Weights []Weight
}

// Decoder-wide tensors, outside the layers (with the checkpoint's
// "model." prefix when it has one).
const (
	EmbedTokens     = "embed_tokens.weight"
	FinalNormModule = "norm"
	FinalNorm       = FinalNormModule + ".weight"
)

// DecoderOf describes the layers of cfg (a decoder config).
func DecoderOf(cfg *model.Config) *Decoder {
	C, F, D := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	Hq, Hk := cfg.NumAttentionHeads*D, cfg.KVHeads()*D
	d := &Decoder{Hidden: C, Intermediate: F, Heads: cfg.NumAttentionHeads, KVHeads: cfg.KVHeads(), HeadD: D,
		Eps: cfg.RMSNormEps, RopeTheta: cfg.RopeTheta, QKVBias: cfg.QKVBias(), QKNorm: cfg.QKNorm(), Bidirectional: cfg.Bidirectional()}
	add := func(r Role, bias bool, shape ...int) {
		name := r.Module() + ".weight"
		if bias {
			name = r.Module() + ".bias"
		}
		d.Weights = append(d.Weights, Weight{Role: r, Bias: bias, Name: name, Shape: shape})
	}
	add(AttnNorm, false, C)
	dims := [7][2]int{{C, Hq}, {C, Hk}, {C, Hk}, {Hq, C}, {C, F}, {C, F}, {F, C}} // in, out
	for i := range dims {
		add(Projection(i), false, dims[i][1], dims[i][0])
		if d.QKVBias && i < 3 {
			add(Projection(i), true, dims[i][1])
		}
	}
	if d.QKNorm {
		add(QNorm, false, D)
		add(KNorm, false, D)
	}
	add(MLPNorm, false, C)
	return d
}

// modules are the roles' module paths inside a layer, as transformers'
// LlamaDecoderLayer (Qwen2's, Qwen3's) names them.
var modules = [...]string{AttnNorm: "input_layernorm",
	QProj: "self_attn.q_proj", KProj: "self_attn.k_proj", VProj: "self_attn.v_proj", OProj: "self_attn.o_proj",
	GateProj: "mlp.gate_proj", UpProj: "mlp.up_proj", DownProj: "mlp.down_proj",
	QNorm: "self_attn.q_norm", KNorm: "self_attn.k_norm", MLPNorm: "post_attention_layernorm",
	EncQuery: "attention.self.query", EncKey: "attention.self.key", EncValue: "attention.self.value",
	EncAttnOut: "attention.output.dense", EncAttnNorm: "attention.output.LayerNorm",
	EncInter: "intermediate.dense", EncOut: "output.dense", EncOutNorm: "output.LayerNorm"}

// ggufModules are the roles' names in a llama.cpp GGUF file (after its
// "blk.N." prefix), where it has them.
var ggufModules = [...]string{AttnNorm: "attn_norm",
	QProj: "attn_q", KProj: "attn_k", VProj: "attn_v", OProj: "attn_output",
	GateProj: "ffn_gate", UpProj: "ffn_up", DownProj: "ffn_down", MLPNorm: "ffn_norm"}

// GGUFModule is the role's name in a llama.cpp GGUF file's layer block
// ("attn_q"), or "" where llama.cpp's llama architecture has none.
func (r Role) GGUFModule() string {
	if int(r) < len(ggufModules) {
		return ggufModules[r]
	}
	return ""
}

// Module is the role's module path inside a layer ("self_attn.q_proj").
func (r Role) Module() string { return modules[r] }

// ProjModule is projection i's module path inside a layer
// ("self_attn.q_proj").
func ProjModule(i int) string { return Projection(i).Module() }

// Layer is layer l's name prefix in a checkpoint whose names start with
// prefix ("" or "model."): "model.layers.3.".
func Layer(prefix string, l int) string { return prefix + "layers." + strconv.Itoa(l) + "." }

// Find returns the weight of role r (its bias with bias) and whether the
// layer has it.
func (d *Decoder) Find(r Role, bias bool) (Weight, bool) { return find(d.Weights, r, bias) }

func find(ws []Weight, r Role, bias bool) (Weight, bool) {
	for _, w := range ws {
		if w.Role == r && w.Bias == bias {
			return w, true
		}
	}
	return Weight{}, false
}
