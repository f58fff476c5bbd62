// Package llama runs Llama-family decoders (model_type llama, mistral,
// qwen2, qwen3) on the CPU in float32: the model as its Hugging Face
// checkpoint or llama GGUF file describes it (internal/model/llama/llamaload.Load,
// New; model.onnx: ReadGraph), its weights as a
// checkpoint again (Tensors, LoRA factors merged), and generation with a
// key/value cache (NewCache, Extend, Step, Generate) — a shared prefix
// fed once, the prompts as chunks, then one row per sequence and new token
// — on internal/ops's forward ops, in transformers' order (embeddings →
// layers of RMSNorm, attention with rotary positions and grouped-query
// heads, RMSNorm, SwiGLU MLP, each with a residual → final RMSNorm → the
// language-model head: the checkpoint's lm_head, else the tied input
// embedding). The trainer's decoder (internal/train/decoder) is this Model with its
// activations, backward passes, LoRA and pooling; doc2query generates
// with it.
//
// Serving (embed.go, head*.go, graph.go, graph_quant.go, embed_quant.go): ReadGraph
// reads a converted decoder's float32 model.onnx (model/onnx's BuildLlama)
// back into the checkpoint's tensors (ReadQuantizedGraph also an int8 or
// int4 one), and an Embedder runs them for inference — internal/inference's "go"
// backend, where ONNX Runtime is not built in or not wanted — computing
// what the graph outputs: the last hidden state (pooled outside: last
// token, mean), a trained pooling head's embedding (latent,
// multi-layer), AutoRegEmbed's memory-token mean, Causal2Vec's
// [h_C; h_EOS], or a decoder reranker's label logits (one head per
// technique, head_*.go, chosen once from config.json), causal or
// bidirectional as config.json says, within float32 rounding of ONNX
// Runtime (internal/inference's TestGoDecoderMatchesORT) and of a naive
// reference (TestEmbedderMatchesReference). Its weights are packed once
// for internal/tensor's inference GEMM; only a batch's real rows are
// computed; results do not depend on the thread count. An int8 graph's
// layer products run as the graph runs them (each input row quantized to
// uint8 with its own scale, the sums exact in int32 on internal/tensor's
// int8 GEMM, then the graph's float32 scaling), within 1e-6 of a naive
// reference of the quantized graph (TestQuantizedEmbedderMatchesReference);
// an int4 graph's 4-bit weights (and int8 token table) are dequantized as
// MatMulNBits (accuracy level 1) and the graph's Cast/Mul do and run as
// float32. ReadGraph refuses quantized graphs; ReadQuantizedGraph reads
// them. Nothing here imports the trainer (train/…).
//
// Weights are named as transformers' LlamaModel / Qwen2Model state dict,
// with or without the "model." prefix — what onnx.LlamaFromGGUF returns for
// a GGUF file. LoadOptions.KeepBase keeps the layers' projection weights in
// the type their file stores them in (a GGUF file's Q4_1, Q8_0, …, a
// checkpoint's float16 or bfloat16), widened while the GEMM packs them, so
// every product is bit for bit the float32 model's.
//
// Invariants: generation needs causal attention; Extend's logits equal
// those a full forward of the same sequences gives at the same positions
// (train/decoder's TestStepMatchesForward); equal seeds give equal
// samples. Bad input (a config that is not a decoder, missing, misshapen or
// unknown tensors, ids outside the vocabulary, a cache too small) is an
// error naming the tensor, field or position; sizes inside the ops are the
// package's own contract and a violation there panics. A Model is not safe
// for concurrent use while generating (a KVCache is its caller's; an
// Embedder is read-only and safe for concurrent use), and its
// weights must not change while a cache built from them is in use.
//
// A nil context.Context given to a function of this package is
// context.Background().
package llama

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Projections of a layer, by their transformers (and peft target) names.
const (
	QProj    = "q_proj"
	KProj    = "k_proj"
	VProj    = "v_proj"
	OProj    = "o_proj"
	GateProj = "gate_proj"
	UpProj   = "up_proj"
	DownProj = "down_proj"
)

// Projections lists a layer's projections in the order of Layer.Proj.
func Projections() []string {
	return []string{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj}
}

// Layer is one decoder layer's parameters: its norms (QN, KN are Qwen3's
// per-head q/k norms, nil otherwise) and its projections in Projections()
// order (a Linear's Bias and LoRA may be nil), with their module paths
// (the model's prefix included).
type Layer struct {
	LN1, LN2, QN, KN *ops.Param
	Proj             [7]*ops.Linear
	Names            [7]string
}

func (l *Layer) Q() *ops.Linear    { return l.Proj[0] }
func (l *Layer) K() *ops.Linear    { return l.Proj[1] }
func (l *Layer) V() *ops.Linear    { return l.Proj[2] }
func (l *Layer) O() *ops.Linear    { return l.Proj[3] }
func (l *Layer) Gate() *ops.Linear { return l.Proj[4] }
func (l *Layer) Up() *ops.Linear   { return l.Proj[5] }
func (l *Layer) Down() *ops.Linear { return l.Proj[6] }

// Model is a decoder's parameters and configuration.
type Model struct {
	Cfg model.Config
	// Params in a fixed order (the checkpoint and optimizer order).
	Params []*ops.Param
	Layers []Layer
	// Causal chooses the attention mask: true (the pretrained model's) lets
	// each token see the tokens before it, false lets every token see the
	// whole sequence. New sets it from the config (anna_attention).
	Causal bool
	// Threads bounds the goroutines used by every op (≤ 0: GOMAXPROCS).
	Threads int

	byName      map[string]*ops.Param
	prefix      string // "model." when the checkpoint's names carry it
	embed, norm *ops.Param
	lmHead      *ops.Param // an untied checkpoint's lm_head (frozen), or nil
	// aux are the checkpoint's tensors that are not the decoder's but
	// travel with it, as loaded: a trained pooling head's ("pooling.…",
	// config anna_pooling_head).
	aux map[string]*safetensors.Tensor
}

// Param returns the parameter with the given name, or nil.
func (m *Model) Param(name string) *ops.Param { return m.byName[name] }

// AddParam appends a parameter (a LoRA factor, a pooling head's weight) to
// Params, where Param finds it by name.
func (m *Model) AddParam(p *ops.Param) {
	m.Params = append(m.Params, p)
	m.byName[p.Name] = p
}

// Embedding is the token embedding (vocabulary × C); the LM head when tied.
func (m *Model) Embedding() *ops.Param { return m.embed }

// FinalNorm is the final RMSNorm's gain (C).
func (m *Model) FinalNorm() *ops.Param { return m.norm }

// LMHead is the language-model head's weight (vocabulary × C): the
// checkpoint's lm_head when it has one (kept frozen: an embedder does not
// train it), else the input embedding it is tied to.
func (m *Model) LMHead() *ops.Param {
	if m.lmHead != nil {
		return m.lmHead
	}
	return m.embed
}

// Aux returns the checkpoint's tensor of that name that travels with the
// decoder without being its own (a trained pooling head's "pooling.…"), or
// nil.
func (m *Model) Aux(name string) *safetensors.Tensor { return m.aux[name] }

// AuxNames lists the Aux tensors' names, sorted.
func (m *Model) AuxNames() []string { return slices.Sorted(maps.Keys(m.aux)) }

// EmbedTokens writes the embedding-table rows of ids into dst
// (len(ids)×C).
func (m *Model) EmbedTokens(dst []float32, ids []int32) {
	ops.GatherRows(dst, m.embed.W, ids, m.Cfg.HiddenSize)
}

func (m *Model) threads() int {
	if m.Threads > 0 {
		return m.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// New builds a model from a decoder config and its tensors (see the package
// comment for the names). Attention starts causal unless the config says
// bidirectional. The model keeps the tensors' data as its weights (no
// copy), every weight trainable: the caller must not change them.
func New(cfg *model.Config, tensors map[string]*safetensors.Tensor) (*Model, error) {
	return newModel(cfg, tensors, nil, false)
}

// IsProjectionWeight reports whether name is a layer's q, k, v, o, gate,
// up or down weight (with or without the "model." prefix).
func IsProjectionWeight(name string) bool {
	for i := range Projections() {
		if strings.HasSuffix(name, "."+arch.ProjModule(i)+".weight") && strings.Contains(name, "layers.") {
			return true
		}
	}
	return false
}

// StoredWeight is a weight kept in its stored type (a gguf.Matrix, a
// safetensors.Half).
type StoredWeight interface {
	tensor.Rows
	Dims() (rows, cols int)
	Bytes() int
}

// NewStored is New with some projection weights kept in their stored type
// (kept, by name; what llamaload.Load passes for LoadOptions.KeepBase):
// those become frozen Params with Base set and no W. frozen loads every
// weight frozen, with no gradient buffer.
func NewStored(cfg *model.Config, tensors map[string]*safetensors.Tensor, kept map[string]StoredWeight, frozen bool) (*Model, error) {
	return newModel(cfg, tensors, kept, frozen)
}

// newModel is New with some projection weights compact (kept, by
// name): those become frozen Params with Base set and no W. frozen loads
// every weight frozen, with no gradient buffer.
func newModel(cfg *model.Config, tensors map[string]*safetensors.Tensor, kept map[string]StoredWeight, frozen bool) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: config: %w", err)
	}
	if !cfg.IsDecoder() {
		return nil, fmt.Errorf("llama: config: model_type %q is not a decoder (want llama, mistral, qwen2 or qwen3)", cfg.ModelType)
	}
	m := &Model{Cfg: *cfg, byName: map[string]*ops.Param{}, Causal: !cfg.Bidirectional()}
	if _, ok := tensors["model.embed_tokens.weight"]; ok {
		m.prefix = "model."
	}
	if _, ok := kept["model.embed_tokens.weight"]; ok {
		m.prefix = "model."
	}
	C := cfg.HiddenSize
	var bad []string
	add := func(name string, noDecay bool, shape ...int) *ops.Param {
		full := m.prefix + name
		p := &ops.Param{Name: full, Shape: shape, NoDecay: noDecay}
		if r, ok := kept[full]; ok {
			if rr, cc := r.Dims(); len(shape) != 2 || rr != shape[0] || cc != shape[1] {
				bad = append(bad, fmt.Sprintf("%s (shape [%d %d], want %v)", full, rr, cc, shape))
				return p
			}
			p.Base, p.Frozen = r, true
			m.AddParam(p)
			return p
		}
		t, ok := tensors[full]
		switch {
		case !ok:
			bad = append(bad, full+" (missing)")
			return p
		case !slices.Equal(t.Shape, shape):
			bad = append(bad, fmt.Sprintf("%s (shape %v, want %v)", full, t.Shape, shape))
			return p
		}
		p.W = t.Data // kept, not copied: a decoder's weights are most of the memory
		if p.Frozen = frozen; !frozen {
			p.G = make([]float32, len(p.W))
		}
		m.AddParam(p)
		return p
	}
	m.embed = add(arch.EmbedTokens, false, cfg.VocabSize, C)
	layout := arch.DecoderOf(cfg)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		pre := arch.Layer("", l)
		var ly Layer
		for _, w := range layout.Weights {
			proj := w.Role.IsProjection()
			p := add(pre+w.Name, !proj || w.Bias, w.Shape...) // norms' gains and biases take no weight decay
			switch {
			case proj:
				i := int(w.Role - arch.QProj)
				if ly.Proj[i] == nil {
					ly.Proj[i], ly.Names[i] = &ops.Linear{In: w.Shape[1], Out: w.Shape[0]}, m.prefix+pre+w.Module()
				}
				if w.Bias {
					ly.Proj[i].Bias = p
				} else {
					ly.Proj[i].W = p
				}
			case w.Role == arch.AttnNorm:
				ly.LN1 = p
			case w.Role == arch.MLPNorm:
				ly.LN2 = p
			case w.Role == arch.QNorm:
				ly.QN = p
			case w.Role == arch.KNorm:
				ly.KN = p
			}
		}
		m.Layers = append(m.Layers, ly)
	}
	m.norm = add(arch.FinalNorm, true, C)
	for _, name := range []string{"lm_head.weight", "model.lm_head.weight"} {
		if t, ok := tensors[name]; ok && slices.Equal(t.Shape, []int{cfg.VocabSize, C}) && !cfg.TieWordEmbeddings {
			m.lmHead = &ops.Param{Name: name, Shape: t.Shape, W: t.Data, Frozen: true}
		}
	}
	// A tensor the model does not read (o_proj or MLP biases of a config
	// with attention_bias or mlp_bias, an architecture variant) would be
	// silently dropped: refuse it. The language-model head and rotary
	// buffers are not part of an embedder; a trained pooling head's
	// tensors travel with the model (Aux).
	for _, name := range sortedNames(tensors) {
		switch {
		case cfg.Causal2Vec != nil && strings.HasPrefix(name, "causal2vec.") || cfg.MemoryTokens > 0 && strings.HasPrefix(name, "autoregembed."):
			// a Causal2Vec export's MLP, an AutoRegEmbed export's memory
			// tokens: the technique's, not the decoder's
		case cfg.PoolingHead != nil && strings.HasPrefix(name, "pooling."):
			if m.aux == nil {
				m.aux = map[string]*safetensors.Tensor{}
			}
			m.aux[name] = tensors[name]
		default:
			if _, read := m.byName[name]; !read && !strings.HasSuffix(name, "lm_head.weight") && !strings.HasSuffix(name, "rotary_emb.inv_freq") {
				bad = append(bad, name+" (not part of a "+cfg.ModelType+" model: unsupported variant)")
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kept)) {
		if _, read := m.byName[name]; !read {
			bad = append(bad, name+" (not part of a "+cfg.ModelType+" model: unsupported variant)")
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("llama: checkpoint is not a %s model of this config: %s", cfg.ModelType, strings.Join(bad, ", "))
	}
	return m, nil
}

func sortedNames(m map[string]*safetensors.Tensor) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RandomTensors makes a random checkpoint for cfg (normal(0, std)
// matrices, small random biases, norm gains around 1 so their gradient
// paths are exercised), named as LlamaModel's state dict. Tests and the
// PyTorch comparisons use it.
func RandomTensors(cfg *model.Config, std float64, seed uint64) map[string]*safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 2))
	C := cfg.HiddenSize
	out := map[string]*safetensors.Tensor{}
	put := func(name string, kind byte, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		d := make([]float32, n)
		for i := range d {
			switch kind {
			case 'w':
				d[i] = float32(rng.NormFloat64() * std)
			case 'g':
				d[i] = float32(1 + 0.1*rng.NormFloat64())
			case 'b':
				d[i] = float32(0.02 * rng.NormFloat64())
			}
		}
		out[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: d}
	}
	put(arch.EmbedTokens, 'w', cfg.VocabSize, C)
	// The layers' tensors from the layout, drawn in the order the test
	// checkpoints (and the PyTorch goldens made from them) were drawn in.
	draw := []struct {
		r    arch.Role
		bias bool
	}{{arch.AttnNorm, false}, {arch.MLPNorm, false}, {arch.QProj, false}, {arch.KProj, false}, {arch.VProj, false}, {arch.OProj, false},
		{arch.QProj, true}, {arch.KProj, true}, {arch.VProj, true}, {arch.QNorm, false}, {arch.KNorm, false},
		{arch.GateProj, false}, {arch.UpProj, false}, {arch.DownProj, false}}
	layout := arch.DecoderOf(cfg)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		for _, d := range draw {
			w, ok := layout.Find(d.r, d.bias)
			switch {
			case !ok:
			case w.Bias:
				put(arch.Layer("", l)+w.Name, 'b', w.Shape...)
			case w.Role.IsProjection():
				put(arch.Layer("", l)+w.Name, 'w', w.Shape...)
			default:
				put(arch.Layer("", l)+w.Name, 'g', w.Shape...)
			}
		}
	}
	put(arch.FinalNorm, 'g', C)
	return out
}

// IsLoRAName reports whether a parameter name is a LoRA factor's (peft's
// ….lora_A.weight, ….lora_B.weight).
func IsLoRAName(n string) bool {
	return strings.HasSuffix(n, ".lora_A.weight") || strings.HasSuffix(n, ".lora_B.weight")
}

// Tensors returns the model's weights as a checkpoint, LoRA merged in
// (W + alpha/r · B·A), under the names it was loaded with, with every
// other parameter added (a pooling head's "pooling.…") and an untied
// lm_head as loaded.
func (m *Model) Tensors() map[string]*safetensors.Tensor {
	merge := map[*ops.Param]*ops.Linear{}
	for l := range m.Layers {
		for _, lin := range m.Layers[l].Proj {
			if lin.LoRA != nil {
				merge[lin.W] = lin
			}
		}
	}
	out := map[string]*safetensors.Tensor{}
	for _, p := range m.Params {
		if IsLoRAName(p.Name) {
			continue
		}
		w := p.Floats()
		if p.W != nil {
			w = append([]float32(nil), p.W...)
		}
		if lin := merge[p]; lin != nil {
			lin.LoRA.MergeInto(w, lin.Out, lin.In)
		}
		out[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: append([]int(nil), p.Shape...), Data: w}
	}
	if p := m.lmHead; p != nil { // an untied head, kept as loaded
		out[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: append([]int(nil), p.Shape...), Data: append([]float32(nil), p.W...)}
	}
	return out
}

// BaseBytes is the memory the layers' projection weights take as float32,
// and as the model keeps them (the same, unless loaded with
// LoadOptions.KeepBase).
func (m *Model) BaseBytes() (asFloat32, kept int64) {
	for _, ly := range m.Layers {
		for _, lin := range ly.Proj {
			n := int64(4 * lin.In * lin.Out)
			asFloat32 += n
			if c, ok := lin.W.Base.(StoredWeight); ok && lin.W.W == nil {
				n = int64(c.Bytes())
			}
			kept += n
		}
	}
	return asFloat32, kept
}
