// Package decoder trains Llama-family decoder LLMs (model_type llama,
// mistral, qwen2, qwen3; the model itself is model/llama's) as text
// embedders on the CPU, in float32, llm.c style: the forward pass is
// internal/ops's ops in transformers' order (embeddings → layers of
// RMSNorm, attention with rotary positions and grouped-query heads,
// RMSNorm, SwiGLU MLP, each with a residual → final RMSNorm), keeping the
// activations the backward needs, and the backward is each op's
// hand-written backward in reverse. Pooling is the last token (the EOS
// the tokenizer appends, as the import path's tokenizer does; the model
// appends nothing), the mean over real tokens, or a trainable head
// (EnableHead: latent cross-attention over the last layer, or paper 002's
// Multi-Layers Trainable Pooling over every layer's last-token state);
// attention is causal (as pretrained) or bidirectional, chosen per model.
// LoRA adapts any of q, k, v, o, gate, up and down projections (rank 64,
// alpha 32 by default) with the base frozen; without LoRA every weight
// trains. Under LoRA the projection weights can stay in the type their
// file stores them in (LoadOptions.KeepBase), widened while the GEMM packs
// them, so every product is bit for bit the float32 model's; the trainer
// does this whenever it trains LoRA. The losses are train/objective's; a
// batch through the model is an objective.Pass (Model.Pass). The papers'
// techniques plug in as a Technique (built by a Method), their passes run
// by a Runner; the export is Model.Export.
//
// Generation (the key/value cache, Generate) is model/llama's, promoted
// through the embedded llama.Model; its logits equal this package's
// Forward's (TestStepMatchesForward).
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
//
// A nil context.Context given to a function of this package is
// context.Background().
package decoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/model/llama/llamaload"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/model"
)

// Model is a decoder embedder with its trainable parameters: a
// llama.Model (weights, configuration, generation) with the trainer's
// activations, LoRA and pooling head.
type Model struct {
	*llama.Model
	// Recompute (gradient checkpointing) keeps only each layer's input
	// from the forward and recomputes the layer's activations in the
	// backward: memory for one layer's activations instead of every
	// layer's, for one more forward of all but the last layer. Gradients
	// are bit-for-bit those without it. Set it before the first Forward.
	Recompute bool

	lora bool
	head *head     // trainable pooling head, or nil
	rope *ops.Rope // tables for the last sequence length
	ws   *Acts
}

// LoadOptions are Load's choices (llamaload.LoadOptions).
type LoadOptions = llamaload.LoadOptions

// Load reads a decoder from a llama GGUF file or a Hugging Face checkpoint
// directory (llamaload.Load), with the trained pooling head its config.json
// describes (anna_pooling_head), if any.
func Load(path string, o LoadOptions) (*Model, error) {
	lm, err := llamaload.Load(path, o)
	if err != nil {
		return nil, err
	}
	m, err := wrap(lm)
	if err != nil {
		return nil, fmt.Errorf("decoder: %s: %w", path, err)
	}
	return m, nil
}

// New builds a model from a decoder config and its tensors (llama.New),
// every weight trainable, with the trained pooling head the config
// describes, if any. The model keeps the tensors' data as its weights (no
// copy): training changes them, and the caller must not change them.
func New(cfg *model.Config, tensors map[string]*safetensors.Tensor) (*Model, error) {
	lm, err := llama.New(cfg, tensors)
	if err != nil {
		return nil, err
	}
	return wrap(lm)
}

// wrap makes lm trainable: its trained pooling head loaded (every one of
// the checkpoint's "pooling.…" tensors read).
func wrap(lm *llama.Model) (*Model, error) {
	m := &Model{Model: lm}
	hc := lm.Cfg.PoolingHead
	if hc == nil {
		return m, nil
	}
	used := map[string]bool{}
	if err := m.loadHead(*hc, used); err != nil {
		return nil, err
	}
	var bad []string
	for _, name := range lm.AuxNames() {
		if !used[name] {
			bad = append(bad, name+" (not part of a "+lm.Cfg.ModelType+" model: unsupported variant)")
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("decoder: checkpoint is not a %s model of this config: %s", lm.Cfg.ModelType, strings.Join(bad, ", "))
	}
	return m, nil
}

// RandomTensors makes a random checkpoint for cfg (llama.RandomTensors).
func RandomTensors(cfg *model.Config, std float64, seed uint64) map[string]*safetensors.Tensor {
	return llama.RandomTensors(cfg, std, seed)
}

// LoRAConfig chooses low-rank adaptation: each target projection W
// (out×in) becomes W + Alpha/Rank · B·A with A (Rank×in) and B (out×Rank)
// trained and every base weight frozen.
type LoRAConfig struct {
	Rank    int     // default 64 (paper 003)
	Alpha   float64 // default 32
	Targets []string
}

// DefaultLoRATargets are every projection of a layer (a copy: changing it
// does not change what New loads).
var DefaultLoRATargets = llama.Projections()

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
	projNames := llama.Projections()
	want := map[string]bool{}
	for _, t := range cfg.Targets {
		if !slices.Contains(projNames, t) {
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
	for l := range m.Layers {
		ly := &m.Layers[l]
		for i, name := range projNames {
			if !want[name] {
				continue
			}
			lin := ly.Proj[i]
			a := &ops.Param{Name: ly.Names[i] + ".lora_A.weight", Shape: []int{cfg.Rank, lin.In},
				W: make([]float32, cfg.Rank*lin.In), G: make([]float32, cfg.Rank*lin.In)}
			bound := 1 / math.Sqrt(float64(lin.In))
			for j := range a.W {
				a.W[j] = float32((2*rng.Float64() - 1) * bound)
			}
			b := &ops.Param{Name: ly.Names[i] + ".lora_B.weight", Shape: []int{lin.Out, cfg.Rank},
				W: make([]float32, lin.Out*cfg.Rank), G: make([]float32, lin.Out*cfg.Rank)}
			m.AddParam(a)
			m.AddParam(b)
			lin.LoRA = &ops.LoRA{A: a, B: b, Rank: cfg.Rank, Scale: float32(cfg.Alpha / float64(cfg.Rank))}
		}
	}
	m.lora = true
	return nil
}

func isLoRAName(n string) bool { return llama.IsLoRAName(n) }

// ZeroGrad clears every trainable parameter's gradient.
func (m *Model) ZeroGrad() {
	for _, p := range m.Params {
		if !p.Frozen {
			clear(p.G)
		}
	}
}
