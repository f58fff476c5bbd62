// Package decoder trains Llama-family decoder LLMs (model_type llama,
// mistral, qwen2, qwen3) as text embedders on the CPU, in float32, llm.c
// style: the forward pass is train/ops's ops in transformers' order
// (embeddings → layers of RMSNorm, attention with rotary positions and
// grouped-query heads, RMSNorm, SwiGLU MLP, each with a residual → final
// RMSNorm), and the backward is each op's hand-written backward in reverse.
// Pooling is the last token (the EOS the tokenizer appends, as the import
// path's tokenizer does; the model appends nothing), the mean over real
// tokens, or a trainable head (EnableHead: latent cross-attention over the
// last layer, or paper 002's Multi-Layers Trainable Pooling over every
// layer's last-token state); attention is causal (as pretrained) or
// bidirectional, chosen per model. LoRA adapts any of q, k, v, o, gate, up and down projections
// (rank 64, alpha 32 by default) with the base frozen; without LoRA every
// weight trains. Under LoRA the projection weights can stay in the type
// their file stores them in (LoadOptions.KeepBase: a GGUF file's Q4_1,
// Q8_0, …, a checkpoint's float16 or bfloat16), widened while the GEMM
// packs them, so every product is bit for bit the float32 model's; the
// trainer does this whenever it trains LoRA. The losses are
// train/objective's.
//
// Weights are named as transformers' LlamaModel / Qwen2Model state dict,
// with or without the "model." prefix — what onnx.LlamaFromGGUF returns for
// a GGUF file. An embedder stops at the final norm; the language-model head
// (the checkpoint's lm_head, else the tied input embedding) serves the
// papers' generative objectives and generation.
//
// Generation (NewCache, Extend, Step, Generate: doc2query's queries) runs
// the same ops incrementally with a key/value cache — a shared prefix once,
// the prompts as chunks, then one row per sequence and new token — and gives
// the logits Forward gives the whole sequence (TestStepMatchesForward); it
// needs causal attention.
//
// Invariants: sequences are right-padded (a mask of ones then zeros, at
// least one real token); positions are 0..T−1 as transformers numbers them;
// padded positions are computed but nothing real depends on them, and they
// get no gradient. The gradients are checked against PyTorch autograd on
// transformers' models (TestLlamaGradientsMatchPyTorch,
// tools/decoder_torch_ref.py). A Model is not safe for concurrent use: it
// keeps its activation workspace. Bad input (a config it cannot train,
// missing or misshapen tensors, ids outside the vocabulary, left padding)
// is an error naming the tensor, field or position; sizes inside the ops
// are the package's own contract and a violation there panics.
package decoder

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train/objective"
	"github.com/anna-search/anna/train/ops"
	"github.com/anna-search/anna/train/tensor"
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

// projNames lists a layer's projections in a fixed order.
var projNames = []string{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj}

// projPath is the module path of a projection inside a layer.
func projPath(p string) string {
	switch p {
	case QProj, KProj, VProj, OProj:
		return "self_attn." + p
	}
	return "mlp." + p
}

type layer struct {
	ln1, ln2 *ops.Param
	qn, kn   *ops.Param     // Qwen3's per-head q/k norms; nil otherwise
	proj     [7]*ops.Linear // in projNames order
	names    [7]string      // module paths, with the model's prefix
}

func (l *layer) q() *ops.Linear    { return l.proj[0] }
func (l *layer) k() *ops.Linear    { return l.proj[1] }
func (l *layer) v() *ops.Linear    { return l.proj[2] }
func (l *layer) o() *ops.Linear    { return l.proj[3] }
func (l *layer) gate() *ops.Linear { return l.proj[4] }
func (l *layer) up() *ops.Linear   { return l.proj[5] }
func (l *layer) down() *ops.Linear { return l.proj[6] }

// Model is a decoder embedder with its trainable parameters.
type Model struct {
	Cfg model.Config
	// Params in a fixed order (the checkpoint and optimizer order).
	Params []*ops.Param
	byName map[string]*ops.Param
	prefix string // "model." when the checkpoint's names carry it

	embed, norm *ops.Param
	lmHead      *ops.Param // an untied checkpoint's lm_head (frozen), or nil
	layers      []layer
	lora        bool

	// Causal chooses the attention mask: true (the pretrained model's) lets
	// each token see the tokens before it, false lets every token see the
	// whole sequence.
	Causal bool
	// Threads bounds the goroutines used by every op (≤ 0: GOMAXPROCS).
	Threads int
	// Recompute (gradient checkpointing) keeps only each layer's input
	// from the forward and recomputes the layer's activations in the
	// backward: memory for one layer's activations instead of every
	// layer's, for one more forward of all but the last layer. Gradients
	// are bit-for-bit those without it. Set it before the first Forward.
	Recompute bool

	head *head     // trainable pooling head, or nil
	rope *ops.Rope // tables for the last sequence length
	ws   *Acts
	// lastParts are, after a ContrastiveGrad call, its loss's terms.
	lastParts objective.Parts
}

// LossParts are the terms of the last ContrastiveGrad's loss.
func (m *Model) LossParts() objective.Parts { return m.lastParts }

// Param returns the parameter with the given name, or nil.
func (m *Model) Param(name string) *ops.Param { return m.byName[name] }

// Embedding is the token embedding (vocabulary × C), trained under full
// fine-tuning, frozen under LoRA; the LM head when tied.
func (m *Model) Embedding() *ops.Param { return m.embed }

func (m *Model) threads() int {
	if m.Threads > 0 {
		return m.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// New builds a model from a decoder config and its tensors (see the package
// comment for the names). Attention starts causal. The model keeps the
// tensors' data as its weights (no copy): training changes them, and the
// caller must not change them.
func New(cfg *model.Config, tensors map[string]*safetensors.Tensor) (*Model, error) {
	return newModel(cfg, tensors, nil, false)
}

// isProjectionWeight reports whether name is a layer's q, k, v, o, gate,
// up or down weight (with or without the "model." prefix).
func isProjectionWeight(name string) bool {
	for _, p := range projNames {
		if strings.HasSuffix(name, "."+projPath(p)+".weight") && strings.Contains(name, "layers.") {
			return true
		}
	}
	return false
}

// compactWeight is a weight kept in its stored type (a gguf.Matrix, a
// safetensors.Half).
type compactWeight interface {
	tensor.Rows
	Dims() (rows, cols int)
	Bytes() int
}

// newModel is New with some projection weights compact (kept, by
// name): those become frozen Params with Base set and no W. frozen loads
// every weight frozen, with no gradient buffer.
func newModel(cfg *model.Config, tensors map[string]*safetensors.Tensor, kept map[string]compactWeight, frozen bool) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decoder: config: %w", err)
	}
	if !cfg.IsDecoder() {
		return nil, fmt.Errorf("decoder: config: model_type %q is not a decoder (want llama, mistral, qwen2 or qwen3)", cfg.ModelType)
	}
	m := &Model{Cfg: *cfg, byName: map[string]*ops.Param{}, Causal: !cfg.Bidirectional()}
	if _, ok := tensors["model.embed_tokens.weight"]; ok {
		m.prefix = "model."
	}
	if _, ok := kept["model.embed_tokens.weight"]; ok {
		m.prefix = "model."
	}
	C, F, D := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	Hq, Hk := cfg.NumAttentionHeads*D, cfg.KVHeads()*D
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
			m.Params = append(m.Params, p)
			m.byName[full] = p
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
		m.Params = append(m.Params, p)
		m.byName[full] = p
		return p
	}
	m.embed = add("embed_tokens.weight", false, cfg.VocabSize, C)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		pre := "layers." + strconv.Itoa(l) + "."
		var ly layer
		ly.ln1 = add(pre+"input_layernorm.weight", true, C)
		dims := [7][2]int{{C, Hq}, {C, Hk}, {C, Hk}, {Hq, C}, {C, F}, {C, F}, {F, C}} // in, out
		for i, p := range projNames {
			path := pre + projPath(p)
			lin := &ops.Linear{In: dims[i][0], Out: dims[i][1]}
			lin.W = add(path+".weight", false, lin.Out, lin.In)
			if cfg.QKVBias() && i < 3 {
				lin.Bias = add(path+".bias", true, lin.Out)
			}
			ly.proj[i], ly.names[i] = lin, m.prefix+path
		}
		if cfg.QKNorm() {
			ly.qn = add(pre+"self_attn.q_norm.weight", true, D)
			ly.kn = add(pre+"self_attn.k_norm.weight", true, D)
		}
		ly.ln2 = add(pre+"post_attention_layernorm.weight", true, C)
		m.layers = append(m.layers, ly)
	}
	m.norm = add("norm.weight", true, C)
	for _, name := range []string{"lm_head.weight", "model.lm_head.weight"} {
		if t, ok := tensors[name]; ok && slices.Equal(t.Shape, []int{cfg.VocabSize, C}) && !cfg.TieWordEmbeddings {
			m.lmHead = &ops.Param{Name: name, Shape: t.Shape, W: t.Data, Frozen: true}
		}
	}
	used := map[string]bool{}
	if hc := cfg.PoolingHead; hc != nil && len(bad) == 0 { // a trained pooling head
		if err := m.loadHead(*hc, tensors, used); err != nil {
			return nil, err
		}
	}
	// A tensor the model does not read (o_proj or MLP biases of a config
	// with attention_bias or mlp_bias, an architecture variant) would be
	// silently dropped: refuse it. The language-model head and rotary
	// buffers are not part of an embedder.
	for _, name := range sortedNames(tensors) {
		if cfg.Causal2Vec != nil && strings.HasPrefix(name, "causal2vec.") || cfg.MemoryTokens > 0 && strings.HasPrefix(name, "autoregembed.") {
			continue // a Causal2Vec export's MLP, an AutoRegEmbed export's memory tokens: the technique's, not the decoder's
		}
		if _, read := m.byName[name]; !read && !used[name] && !strings.HasSuffix(name, "lm_head.weight") && !strings.HasSuffix(name, "rotary_emb.inv_freq") {
			bad = append(bad, name+" (not part of a "+cfg.ModelType+" model: unsupported variant)")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kept)) {
		if _, read := m.byName[name]; !read {
			bad = append(bad, name+" (not part of a "+cfg.ModelType+" model: unsupported variant)")
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("decoder: checkpoint is not a %s model of this config: %s", cfg.ModelType, strings.Join(bad, ", "))
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
// PyTorch comparison use it.
func RandomTensors(cfg *model.Config, std float64, seed uint64) map[string]*safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 2))
	C, F, D := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	Hq, Hk := cfg.NumAttentionHeads*D, cfg.KVHeads()*D
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
	put("embed_tokens.weight", 'w', cfg.VocabSize, C)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "layers." + strconv.Itoa(l) + "."
		put(p+"input_layernorm.weight", 'g', C)
		put(p+"post_attention_layernorm.weight", 'g', C)
		put(p+"self_attn.q_proj.weight", 'w', Hq, C)
		put(p+"self_attn.k_proj.weight", 'w', Hk, C)
		put(p+"self_attn.v_proj.weight", 'w', Hk, C)
		put(p+"self_attn.o_proj.weight", 'w', C, Hq)
		if cfg.QKVBias() {
			put(p+"self_attn.q_proj.bias", 'b', Hq)
			put(p+"self_attn.k_proj.bias", 'b', Hk)
			put(p+"self_attn.v_proj.bias", 'b', Hk)
		}
		if cfg.QKNorm() {
			put(p+"self_attn.q_norm.weight", 'g', D)
			put(p+"self_attn.k_norm.weight", 'g', D)
		}
		put(p+"mlp.gate_proj.weight", 'w', F, C)
		put(p+"mlp.up_proj.weight", 'w', F, C)
		put(p+"mlp.down_proj.weight", 'w', C, F)
	}
	put("norm.weight", 'g', C)
	return out
}

// LoRAConfig chooses low-rank adaptation: each target projection W
// (out×in) becomes W + Alpha/Rank · B·A with A (Rank×in) and B (out×Rank)
// trained and every base weight frozen.
type LoRAConfig struct {
	Rank    int     // default 64 (paper 003)
	Alpha   float64 // default 32
	Targets []string
}

// DefaultLoRATargets are every projection of a layer.
var DefaultLoRATargets = projNames

// EnableLoRA freezes the model and adds LoRA factors to the target
// projections of every layer, named as peft does (….q_proj.lora_A.weight):
// A uniform in ±1/√in (peft's Kaiming init), B zero.
func (m *Model) EnableLoRA(cfg LoRAConfig, seed uint64) error {
	if cfg.Rank == 0 {
		cfg.Rank = 64
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 32
	}
	if cfg.Rank < 0 || cfg.Alpha < 0 {
		return fmt.Errorf("decoder: lora rank %d and alpha %g must be positive", cfg.Rank, cfg.Alpha)
	}
	if len(cfg.Targets) == 0 {
		cfg.Targets = DefaultLoRATargets
	}
	if m.lora {
		return fmt.Errorf("decoder: lora already enabled")
	}
	want := map[string]bool{}
	for _, t := range cfg.Targets {
		ok := false
		for _, p := range projNames {
			ok = ok || p == t
		}
		if !ok {
			return fmt.Errorf("decoder: lora target %q unknown (want some of %s)", t, strings.Join(projNames, ", "))
		}
		want[t] = true
	}
	for _, p := range m.Params {
		if !isHeadName(p.Name) { // a pooling head keeps training
			p.Frozen, p.G = true, nil // a frozen weight needs no gradient buffer
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x10a))
	for l := range m.layers {
		ly := &m.layers[l]
		for i, name := range projNames {
			if !want[name] {
				continue
			}
			lin := ly.proj[i]
			a := &ops.Param{Name: ly.names[i] + ".lora_A.weight", Shape: []int{cfg.Rank, lin.In},
				W: make([]float32, cfg.Rank*lin.In), G: make([]float32, cfg.Rank*lin.In)}
			bound := 1 / math.Sqrt(float64(lin.In))
			for j := range a.W {
				a.W[j] = float32((2*rng.Float64() - 1) * bound)
			}
			b := &ops.Param{Name: ly.names[i] + ".lora_B.weight", Shape: []int{lin.Out, cfg.Rank},
				W: make([]float32, lin.Out*cfg.Rank), G: make([]float32, lin.Out*cfg.Rank)}
			m.Params = append(m.Params, a, b)
			m.byName[a.Name], m.byName[b.Name] = a, b
			lin.LoRA = &ops.LoRA{A: a, B: b, Rank: cfg.Rank, Scale: float32(cfg.Alpha / float64(cfg.Rank))}
		}
	}
	m.lora = true
	return nil
}

func isLoRAName(n string) bool {
	return strings.HasSuffix(n, ".lora_A.weight") || strings.HasSuffix(n, ".lora_B.weight")
}

// Tensors returns the model's weights as a checkpoint, LoRA merged in
// (W + alpha/r · B·A), under the names it was loaded with, and a pooling
// head's parameters ("pooling.…", which HeadConfig describes).
func (m *Model) Tensors() map[string]*safetensors.Tensor {
	merge := map[*ops.Param]*ops.Linear{}
	for l := range m.layers {
		for _, lin := range m.layers[l].proj {
			if lin.LoRA != nil {
				merge[lin.W] = lin
			}
		}
	}
	out := map[string]*safetensors.Tensor{}
	for _, p := range m.Params {
		if isLoRAName(p.Name) {
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
	for _, ly := range m.layers {
		for _, lin := range ly.proj {
			n := int64(4 * lin.In * lin.Out)
			asFloat32 += n
			if c, ok := lin.W.Base.(compactWeight); ok && lin.W.W == nil {
				n = int64(c.Bytes())
			}
			kept += n
		}
	}
	return asFloat32, kept
}

// ZeroGrad clears every trainable parameter's gradient.
func (m *Model) ZeroGrad() {
	for _, p := range m.Params {
		if !p.Frozen {
			clear(p.G)
		}
	}
}
