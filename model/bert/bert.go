// Package bert runs a BERT encoder's forward pass in pure Go, for
// inference: the weights of an installed model directory's model.onnx
// (the graph anna's converter writes, model/onnx's BuildBERT, fused or
// unfused) read back under Hugging Face's BertModel names (ReadGraph), and
// a forward made of internal/ops's ops in transformers' order
// (embeddings and LayerNorm, then per layer self-attention, residual and
// LayerNorm, the activation MLP, residual and LayerNorm), every product
// through internal/tensor's GEMM, and a cross-encoder's
// BertForSequenceClassification head (Classify). It is what internal/bert's "go" backend
// runs where ONNX Runtime is not built in (CGO_ENABLED=0, -tags annapure)
// or not wanted.
//
// The trainer (train/bert) has its own forward, which keeps every
// activation for its backward; the ops, and so the arithmetic, are the
// same.
//
// Invariants: a Model is read-only after New and safe for concurrent use
// (each Forward allocates its own activations). Sequences are
// right-padded: each starts with a real token, and positions past a
// sequence's last real token get no attention from real ones; their rows
// of the output are not meaningful (pool with the mask). Bad input (a
// config that is not a BERT encoder, missing or misshapen tensors, ids
// outside the vocabularies, a batch whose shape disagrees with its data)
// is an error, never a panic.
package bert

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
)

// Model is a BERT encoder's weights, ready for Forward.
type Model struct {
	cfg                       model.Config
	wte, wpe, wtt, elnw, elnb []float32
	layers                    []layer
	// pooler and classifier are BertForSequenceClassification's head
	// (dense+tanh on [CLS], then the classifier), nil without one.
	pooler, classifier *ops.Linear
}

// layer is one encoder layer; linear weights are [out, in] (nn.Linear's).
type layer struct {
	q, k, v, ao, fi, fo    *ops.Linear
	ln1w, ln1b, ln2w, ln2b []float32
}

// New builds a Model from cfg and tensors named as in a Hugging Face
// BertModel checkpoint (an optional "bert." prefix, as in
// BertForSequenceClassification, is accepted). The tensors are not
// copied: the caller must not change them afterwards.
func New(cfg *model.Config, tensors map[string]*safetensors.Tensor) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bert: config: %w", err)
	}
	if cfg.ModelType != "bert" {
		return nil, fmt.Errorf("bert: config: model_type %q: not a BERT encoder", cfg.ModelType)
	}
	if cfg.HiddenSize%cfg.NumAttentionHeads != 0 {
		return nil, fmt.Errorf("bert: config: hidden_size %d is not a multiple of num_attention_heads %d", cfg.HiddenSize, cfg.NumAttentionHeads)
	}
	switch cfg.HiddenAct {
	case ops.ActGELU, ops.ActGELUTanh, "gelu_new", ops.ActReLU:
	default:
		return nil, fmt.Errorf("bert: config: hidden_act %q not supported (want gelu, gelu_new, gelu_pytorch_tanh or relu)", cfg.HiddenAct)
	}
	prefix := ""
	if _, ok := tensors["bert.embeddings.word_embeddings.weight"]; ok {
		prefix = "bert."
	}
	C, FF := cfg.HiddenSize, cfg.IntermediateSize
	var missing []string
	get := func(name string, shape ...int) []float32 {
		t, ok := tensors[prefix+name]
		n := 1
		for _, d := range shape {
			n *= d
		}
		switch {
		case !ok:
			missing = append(missing, prefix+name)
		case !sameShape(t.Shape, shape) || len(t.Data) != n:
			missing = append(missing, fmt.Sprintf("%s%s (shape %v with %d values, want %v)", prefix, name, t.Shape, len(t.Data), shape))
		default:
			return t.Data
		}
		return make([]float32, n) // keep going, so that every problem is listed
	}
	linear := func(name string, in, out int) *ops.Linear {
		return &ops.Linear{W: &ops.Param{Name: name + ".weight", Shape: []int{out, in}, W: get(name+".weight", out, in)},
			Bias: &ops.Param{Name: name + ".bias", Shape: []int{out}, W: get(name+".bias", out)}, In: in, Out: out}
	}
	m := &Model{cfg: *cfg}
	m.wte = get("embeddings.word_embeddings.weight", cfg.VocabSize, C)
	m.wpe = get("embeddings.position_embeddings.weight", cfg.MaxPositionEmbeddings, C)
	m.wtt = get("embeddings.token_type_embeddings.weight", cfg.TypeVocabSize, C)
	m.elnw = get("embeddings.LayerNorm.weight", C)
	m.elnb = get("embeddings.LayerNorm.bias", C)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		m.layers = append(m.layers, layer{
			q: linear(p+"attention.self.query", C, C), k: linear(p+"attention.self.key", C, C), v: linear(p+"attention.self.value", C, C),
			ao:   linear(p+"attention.output.dense", C, C),
			ln1w: get(p+"attention.output.LayerNorm.weight", C), ln1b: get(p+"attention.output.LayerNorm.bias", C),
			fi: linear(p+"intermediate.dense", C, FF), fo: linear(p+"output.dense", FF, C),
			ln2w: get(p+"output.LayerNorm.weight", C), ln2b: get(p+"output.LayerNorm.bias", C),
		})
	}
	if _, ok := tensors["classifier.weight"]; ok {
		// The classifier sits outside the "bert." prefix.
		nl := 0
		if t := tensors["classifier.weight"]; len(t.Shape) == 2 {
			nl = t.Shape[0]
		}
		m.pooler = linear("pooler.dense", C, C)
		p := prefix
		prefix = ""
		m.classifier = linear("classifier", C, max(nl, 1))
		prefix = p
	}
	if len(missing) > 0 {
		list, more := missing, ""
		if len(list) > 8 {
			list, more = list[:8], fmt.Sprintf(" (and %d more)", len(missing)-8)
		}
		return nil, fmt.Errorf("bert: not a BERT model of this config: missing or misshapen tensors: %s%s", strings.Join(list, ", "), more)
	}
	return m, nil
}

// NumLabels is the classifier head's number of outputs, 0 without a head.
func (m *Model) NumLabels() int {
	if m.classifier == nil {
		return 0
	}
	return m.classifier.Out
}

// Classify runs the sequence-classification head on the [CLS] rows of
// hidden (Forward's N×T×hidden output): logits = classifier(tanh(
// pooler(h_CLS))), N×NumLabels(). A model without a head is an error.
func (m *Model) Classify(hidden []float32, N, T, threads int) ([]float32, error) {
	if m.classifier == nil {
		return nil, fmt.Errorf("bert: the model has no classification head (classifier.weight)")
	}
	C := m.cfg.HiddenSize
	if N <= 0 || T <= 0 || len(hidden) != N*T*C {
		return nil, fmt.Errorf("bert: hidden states of %d values are not N=%d × T=%d × %d", len(hidden), N, T, C)
	}
	th := threads
	if th <= 0 {
		th = runtime.GOMAXPROCS(0)
	}
	cls := make([]float32, N*C)
	for n := 0; n < N; n++ {
		copy(cls[n*C:n*C+C], hidden[n*T*C:n*T*C+C])
	}
	pooled := make([]float32, N*C)
	m.pooler.Forward(pooled, cls, nil, N, th)
	ops.TanhForward(pooled, pooled)
	logits := make([]float32, N*m.classifier.Out)
	m.classifier.Forward(logits, pooled, nil, N, th)
	return logits, nil
}

// Config is the model's config (do not modify it).
func (m *Model) Config() *model.Config { return &m.cfg }

// Batch is N right-padded token sequences of length T, row-major N×T:
// tokenizer.Pad's output.
type Batch struct {
	N, T             int
	IDs, Types, Mask []int64 // Types nil: all zero; Mask 1 for real tokens, 0 for padding
}

func (b *Batch) validate(cfg *model.Config) error {
	NT := b.N * b.T
	if b.N <= 0 || b.T <= 0 || len(b.IDs) != NT || len(b.Mask) != NT || (b.Types != nil && len(b.Types) != NT) {
		return fmt.Errorf("bert: batch shape N=%d T=%d does not match its %d ids, %d types, %d mask values", b.N, b.T, len(b.IDs), len(b.Types), len(b.Mask))
	}
	if b.T > cfg.MaxPositionEmbeddings {
		return fmt.Errorf("bert: sequence length %d exceeds max_position_embeddings %d", b.T, cfg.MaxPositionEmbeddings)
	}
	for i, id := range b.IDs {
		if id < 0 || id >= int64(cfg.VocabSize) {
			return fmt.Errorf("bert: token id %d at position %d outside the vocabulary of %d", id, i, cfg.VocabSize)
		}
		if b.Types != nil && (b.Types[i] < 0 || b.Types[i] >= int64(cfg.TypeVocabSize)) {
			return fmt.Errorf("bert: token type %d at position %d outside the type vocabulary of %d", b.Types[i], i, cfg.TypeVocabSize)
		}
	}
	for n := 0; n < b.N; n++ {
		if b.Mask[n*b.T] == 0 {
			return fmt.Errorf("bert: sequence %d has no tokens (its mask starts with 0)", n)
		}
	}
	return nil
}

// Forward runs the encoder over b with up to threads goroutines per op
// (≤ 0: GOMAXPROCS) and returns the last hidden state, N×T×hidden
// (ONNX's last_hidden_state); rows of padding positions are not
// meaningful.
func (m *Model) Forward(b *Batch, threads int) ([]float32, error) {
	if err := b.validate(&m.cfg); err != nil {
		return nil, err
	}
	th := threads
	if th <= 0 {
		th = runtime.GOMAXPROCS(0)
	}
	N, T := b.N, b.T
	C, FF, H := m.cfg.HiddenSize, m.cfg.IntermediateSize, m.cfg.NumAttentionHeads
	NT := N * T
	eps := float32(m.cfg.LayerNormEps)
	ids, types, mask := make([]int32, NT), make([]int32, NT), make([]float32, NT)
	for i := range ids {
		ids[i], mask[i] = int32(b.IDs[i]), float32(b.Mask[i])
		if b.Types != nil {
			types[i] = int32(b.Types[i])
		}
	}
	lens := make([]int, N)
	for n := range lens {
		for t := T - 1; t >= 0; t-- {
			if mask[n*T+t] != 0 {
				lens[n] = t + 1
				break
			}
		}
	}
	att := ops.Attention{N: N, T: T, H: H, KV: H, D: C / H, KeyMask: mask}
	x, res := make([]float32, NT*C), make([]float32, NT*C)
	q, k, v, ctx := make([]float32, NT*C), make([]float32, NT*C), make([]float32, NT*C), make([]float32, NT*C)
	mean, rstd := make([]float32, NT), make([]float32, NT)
	ff, g := make([]float32, NT*FF), make([]float32, NT*FF)
	probs := make([]float32, att.AttSize())

	ops.EmbeddingForward(res, ids, types, m.wte, m.wpe, m.wtt, N, T, C)
	ops.LayerNormForward(x, mean, rstd, res, m.elnw, m.elnb, NT, C, eps, th)
	for l := range m.layers {
		ly := &m.layers[l]
		ly.q.Forward(q, x, nil, NT, th)
		ly.k.Forward(k, x, nil, NT, th)
		ly.v.Forward(v, x, nil, NT, th)
		att.Forward(ctx, probs, q, k, v, lens, th)
		ly.ao.Forward(res, ctx, nil, NT, th)
		ops.AddInPlace(res, x, th)
		ops.LayerNormForward(x, mean, rstd, res, ly.ln1w, ly.ln1b, NT, C, eps, th)
		ly.fi.Forward(ff, x, nil, NT, th)
		ops.ActivationForward(m.cfg.HiddenAct, g, ff, th)
		ly.fo.Forward(res, g, nil, NT, th)
		ops.AddInPlace(res, x, th)
		ops.LayerNormForward(x, mean, rstd, res, ly.ln2w, ly.ln2b, NT, C, eps, th)
	}
	return x, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
