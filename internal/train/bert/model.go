package bert

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/model"
)

// Param is one trainable tensor, its gradient and optimizer flags (the
// decoder trainer's too). BERT names are Hugging Face's, with "bert." for
// classification checkpoints.
type Param = ops.Param

type layer struct {
	q, qb, k, kb, v, vb, ao, aob *Param
	ln1w, ln1b                   *Param
	fi, fib, fo, fob             *Param
	ln2w, ln2b                   *Param
}

// Model is a BERT encoder, optionally with the sequence-classification head
// (pooler dense+tanh on [CLS], then a classifier) of a cross-encoder. A
// Model is not safe for concurrent use: it keeps its activation workspace.
type Model struct {
	Cfg model.Config
	// Params in a fixed order (the checkpoint and optimizer order).
	Params []*Param
	byName map[string]*Param
	prefix string // "bert." when the checkpoint is BertForSequenceClassification

	wte, wpe, wtt, elnw, elnb *Param
	layers                    []layer
	poolW, poolB              *Param // nil when the checkpoint has no pooler
	clsW, clsB                *Param // nil for bi-encoders
	lora                      map[*Param]*ops.LoRA

	// Threads bounds the goroutines used by every op (≤ 0: GOMAXPROCS).
	Threads int
	ws      *Acts // reused activation workspace
}

// Param returns the parameter with the given Hugging Face name, or nil.
func (m *Model) Param(name string) *Param { return m.byName[name] }

// HasClassifier reports whether the model carries a cross-encoder head.
func (m *Model) HasClassifier() bool { return m.clsW != nil }

// HeadParams are the cross-encoder head's parameters (pooler, classifier),
// nil without one: a device trainer runs the head on the host.
func (m *Model) HeadParams() []*Param {
	if !m.HasClassifier() {
		return nil
	}
	return []*Param{m.poolW, m.poolB, m.clsW, m.clsB}
}

// Prefix is what the checkpoint's encoder names start with: "bert." for a
// BertForSequenceClassification checkpoint, else "".
func (m *Model) Prefix() string { return m.prefix }

// LoRAOf is the LoRA pair adapting weight w, or nil.
func (m *Model) LoRAOf(w *Param) *ops.LoRA { return m.lora[w] }

func (m *Model) threads() int {
	if m.Threads > 0 {
		return m.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// NewModel builds a model from a config and tensors named as in a Hugging
// Face BertModel or BertForSequenceClassification checkpoint. withHead asks
// for the cross-encoder head; if the tensors lack it, the head is
// initialised randomly from seed (as transformers does when a bi-encoder is
// loaded for sequence classification).
func NewModel(cfg *model.Config, tensors map[string]*safetensors.Tensor, withHead bool, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bert: config: %w", err)
	}
	if cfg.ModelType != "bert" {
		return nil, fmt.Errorf("bert: config: model_type %q: NewModel builds BERT encoders (decoders: internal/train/decoder)", cfg.ModelType)
	}
	m := &Model{Cfg: *cfg, byName: map[string]*Param{}}
	if _, ok := tensors["bert."+arch.WordEmbeddings]; ok {
		m.prefix = "bert."
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	C, L := cfg.HiddenSize, cfg.NumHiddenLayers
	var missing []string
	add := func(name string, noDecay, optional bool, shape ...int) *Param {
		full := name
		if !strings.HasPrefix(name, "classifier.") {
			full = m.prefix + name
		}
		t, ok := tensors[full]
		if !ok && optional {
			return nil
		}
		p := &Param{Name: full, Shape: shape, NoDecay: noDecay}
		n := 1
		for _, d := range shape {
			n *= d
		}
		switch {
		case !ok:
			missing = append(missing, full)
			return p
		case !slices.Equal(t.Shape, shape):
			missing = append(missing, fmt.Sprintf("%s (shape %v, want %v)", full, t.Shape, shape))
			return p
		}
		p.W = append([]float32(nil), t.Data...)
		p.G = make([]float32, n)
		m.Params = append(m.Params, p)
		m.byName[full] = p
		return p
	}
	m.wte = add(arch.WordEmbeddings, false, false, cfg.VocabSize, C)
	m.wpe = add(arch.PositionEmbeddings, false, false, cfg.MaxPositionEmbeddings, C)
	m.wtt = add(arch.TokenTypeEmbeddings, false, false, cfg.TypeVocabSize, C)
	m.elnw = add(arch.EmbeddingsNorm+".weight", true, false, C)
	m.elnb = add(arch.EmbeddingsNorm+".bias", true, false, C)
	layout := arch.EncoderOf(cfg)
	for l := 0; l < L; l++ {
		var ly layer
		slot := map[arch.Role][2]**Param{ // weight (or gain), bias; filled in the checkpoint's order
			arch.EncQuery: {&ly.q, &ly.qb}, arch.EncKey: {&ly.k, &ly.kb}, arch.EncValue: {&ly.v, &ly.vb},
			arch.EncAttnOut: {&ly.ao, &ly.aob}, arch.EncAttnNorm: {&ly.ln1w, &ly.ln1b},
			arch.EncInter: {&ly.fi, &ly.fib}, arch.EncOut: {&ly.fo, &ly.fob}, arch.EncOutNorm: {&ly.ln2w, &ly.ln2b}}
		arch.Bind(layout, slot, func(w arch.Weight) *Param {
			return add(arch.EncoderLayer(l)+w.Name, w.Bias || !w.Role.IsProjection(), false, w.Shape...) // no decay on gains and biases
		})
		m.layers = append(m.layers, ly)
	}
	if withHead {
		// A bi-encoder checkpoint loaded as a cross-encoder gets a fresh
		// head, initialised as transformers does (normal(0, 0.02), zero bias).
		tensors = maps.Clone(tensors) // the caller's map stays as it was
		fresh := func(name string, shape ...int) {
			if _, ok := tensors[name]; ok {
				return
			}
			n := 1
			for _, d := range shape {
				n *= d
			}
			t := &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: make([]float32, n)}
			if len(shape) == 2 {
				for i := range t.Data {
					t.Data[i] = float32(rng.NormFloat64() * 0.02)
				}
			}
			tensors[name] = t
		}
		nl := cfg.NumLabels()
		fresh(m.prefix+"pooler.dense.weight", C, C)
		fresh(m.prefix+"pooler.dense.bias", C)
		fresh("classifier.weight", nl, C)
		fresh("classifier.bias", nl)
	}
	m.poolW = add("pooler.dense.weight", false, !withHead, C, C)
	m.poolB = add("pooler.dense.bias", true, !withHead, C)
	if withHead {
		m.clsW = add("classifier.weight", false, false, cfg.NumLabels(), C)
		m.clsB = add("classifier.bias", true, false, cfg.NumLabels())
	} else if m.poolW != nil && m.poolB != nil {
		// A bi-encoder never uses the pooler: keep it unchanged.
		m.poolW.Frozen, m.poolB.Frozen = true, true
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("bert: checkpoint is not a BERT model of this config: missing or misshapen tensors: %s", strings.Join(missing, ", "))
	}
	return m, nil
}

// RandomTensors makes a randomly initialised BERT checkpoint for cfg
// (normal(0, std) matrices, small random biases, LayerNorm gains around 1),
// with the classification head when withHead. Tests and the PyTorch
// comparison use it; std 0.02 is BERT's initialiser range.
func RandomTensors(cfg *model.Config, withHead bool, std float64, seed uint64) map[string]*safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 1))
	C := cfg.HiddenSize
	out := map[string]*safetensors.Tensor{}
	prefix := ""
	if withHead {
		prefix = "bert."
	}
	put := func(name string, kind byte, shape ...int) {
		if !strings.HasPrefix(name, "classifier.") {
			name = prefix + name
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		d := make([]float32, n)
		for i := range d {
			switch kind {
			case 'w':
				d[i] = float32(rng.NormFloat64() * std)
			case 'g': // LayerNorm gain: around one, perturbed so its gradient path is exercised
				d[i] = float32(1 + 0.1*rng.NormFloat64())
			case 'b': // small nonzero biases, so bias paths are exercised too
				d[i] = float32(0.02 * rng.NormFloat64())
			}
		}
		out[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: d}
	}
	put(arch.WordEmbeddings, 'w', cfg.VocabSize, C)
	put(arch.PositionEmbeddings, 'w', cfg.MaxPositionEmbeddings, C)
	put(arch.TokenTypeEmbeddings, 'w', cfg.TypeVocabSize, C)
	put(arch.EmbeddingsNorm+".weight", 'g', C)
	put(arch.EmbeddingsNorm+".bias", 'b', C)
	layout := arch.EncoderOf(cfg)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		for _, w := range layout.Weights {
			kind := byte('w')
			switch {
			case w.Bias:
				kind = 'b'
			case !w.Role.IsProjection():
				kind = 'g'
			}
			put(arch.EncoderLayer(l)+w.Name, kind, w.Shape...)
		}
	}
	put("pooler.dense.weight", 'w', C, C)
	put("pooler.dense.bias", 'b', C)
	if withHead {
		put("classifier.weight", 'w', cfg.NumLabels(), C)
		put("classifier.bias", 'b', cfg.NumLabels())
	}
	return out
}

// Tensors returns the model's weights as a checkpoint, LoRA merged in
// (W + alpha/r · B·A), named as the checkpoint it was loaded from.
func (m *Model) Tensors() map[string]*safetensors.Tensor {
	out := map[string]*safetensors.Tensor{}
	for _, p := range m.Params {
		if isLoRAName(p.Name) {
			continue
		}
		w := append([]float32(nil), p.W...)
		if lp := m.lora[p]; lp != nil {
			lp.MergeInto(w, p.Shape[0], p.Shape[1])
		}
		out[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: append([]int(nil), p.Shape...), Data: w}
	}
	return out
}

// ZeroGrad clears every gradient.
func (m *Model) ZeroGrad() {
	for _, p := range m.Params {
		clear(p.G)
	}
}

// Batch is a padded batch of N token sequences of length T.
type Batch struct {
	N, T  int
	IDs   []int32   // N×T token ids
	Types []int32   // N×T token type ids; nil means all zero
	Mask  []float32 // N×T attention mask, 1 for real tokens, 0 for padding
	// Ctx, when not nil, stops Forward and Backward between layers (and
	// halfway through a layer's backward) with its error once it is done:
	// a training step ends within a fraction of a second of a cancel.
	// The parameters' gradients are then partial; the weights untouched.
	Ctx context.Context
}

// PaddedBatch is the batch of tokenizer.Pad's output: ids, token types and
// mask, N×T each (N = len(ids)/T).
func PaddedBatch(ids, types, mask []int64, T int) *Batch {
	N := 0
	if T > 0 {
		N = len(ids) / T
	}
	b := &Batch{N: N, T: T, IDs: make([]int32, len(ids)), Types: make([]int32, len(ids)), Mask: make([]float32, len(ids))}
	for i := range ids {
		b.IDs[i], b.Types[i], b.Mask[i] = int32(ids[i]), int32(types[i]), float32(mask[i])
	}
	return b
}

// Validate checks a batch as Forward would: its shape, the ids and token
// types in the vocabularies, the length within the positions, and every
// sequence starting with a real token.
func (m *Model) Validate(b *Batch) error { return b.validate(&m.Cfg) }

func (b *Batch) validate(cfg *model.Config) error {
	if b.N <= 0 || b.T <= 0 || len(b.IDs) != b.N*b.T || len(b.Mask) != b.N*b.T || (b.Types != nil && len(b.Types) != b.N*b.T) {
		return fmt.Errorf("bert: batch shape N=%d T=%d does not match its %d ids, %d mask values", b.N, b.T, len(b.IDs), len(b.Mask))
	}
	if b.T > cfg.MaxPositionEmbeddings {
		return fmt.Errorf("bert: sequence length %d exceeds max_position_embeddings %d", b.T, cfg.MaxPositionEmbeddings)
	}
	for i, id := range b.IDs {
		if id < 0 || int(id) >= cfg.VocabSize {
			return fmt.Errorf("bert: token id %d at position %d outside vocabulary of %d", id, i, cfg.VocabSize)
		}
		if b.Types != nil && (b.Types[i] < 0 || int(b.Types[i]) >= cfg.TypeVocabSize) {
			return fmt.Errorf("bert: token type %d at position %d outside type vocabulary of %d", b.Types[i], i, cfg.TypeVocabSize)
		}
	}
	for n := 0; n < b.N; n++ {
		if b.Mask[n*b.T] == 0 {
			return fmt.Errorf("bert: sequence %d has no tokens (mask starts with 0)", n)
		}
	}
	return nil
}

// lengths returns, per sequence, one past the last unmasked position. Rows
// past it are padding on the right: no real token attends to them and no
// pooling reads them, so the ops skip them entirely.
func (b *Batch) lengths() []int {
	ls := make([]int, b.N)
	for n := 0; n < b.N; n++ {
		for t := b.T - 1; t >= 0; t-- {
			if b.Mask[n*b.T+t] != 0 {
				ls[n] = t + 1
				break
			}
		}
	}
	return ls
}
