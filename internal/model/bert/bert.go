// Package bert runs a BERT encoder's forward pass in pure Go, for
// inference: the weights of an installed model directory's model.onnx
// (the graph anna's converter writes, model/onnx's BuildBERT, fused or
// unfused) read back under Hugging Face's BertModel names (ReadGraph), and
// a forward in transformers' order (embeddings and LayerNorm, then per
// layer self-attention, residual and LayerNorm, the activation MLP,
// residual and LayerNorm), and a cross-encoder's
// BertForSequenceClassification head (Classify). An int8 graph (model/
// onnx's Quantize int8) runs with that graph's arithmetic (bert_int8.go:
// ReadGraphInt8, NewInt8, LoadGraph for either kind): its products on
// uint8 activations and 7-bit weights summed exactly in int32
// (internal/tensor's Int8Weight), the quantizing, FastGelu and
// SkipLayerNorm in ONNX Runtime's order of float32 operations, attention
// in float32; the one departure is that the Q/K/V input's scale comes from
// the batch's real tokens only (ONNX Runtime's also sees its padding).
// It is what internal/inference's "go" backend
// runs where ONNX Runtime is not built in (CGO_ENABLED=0, -tags annapure)
// or not wanted.
//
// The forward is built for speed: the layers' weights are packed once, in
// New, for internal/tensor's inference GEMM (AVX-512 or AVX2 micro-kernels
// on amd64), the query, key and value projections are one product, only a
// batch's real tokens are computed (padding costs nothing), attention runs
// per (sequence, head) on goroutines taking tasks in turn, and the bias,
// GELU, residuals and LayerNorms are done on each block of a product's
// rows while it is in cache (internal/ops's inference helpers, AVX2). The
// trainer (internal/train/bert) has its own forward, on internal/ops's training
// ops, which keeps every activation for its backward: the arithmetic is
// the same up to float32 rounding (the order of sums, fused
// multiply-adds), not bit for bit. Results do not depend on the number of
// goroutines, nor, for an int8 graph, on the CPU's int8 kernel (VNNI,
// AVX2 or Go: the same bits).
//
// Invariants: a Model is read-only after New and safe for concurrent use
// (a Forward takes its activations from a pool of the Model's and gives
// them back; its result is its own). Sequences are
// right-padded: each starts with a real token, and positions past a
// sequence's last real token get no attention from real ones; their rows
// of the output are zero (pool with the mask). Bad input (a
// config that is not a BERT encoder, missing or misshapen tensors, ids
// outside the vocabularies, a batch whose shape disagrees with its data)
// is an error, never a panic.
package bert

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Model is a BERT encoder's weights, ready for Forward.
type Model struct {
	cfg                       model.Config
	wte, wpe, wtt, elnw, elnb []float32
	layers                    []layer
	work                      sync.Pool // *work: activations reused between Forwards
	// pooler and classifier are BertForSequenceClassification's head
	// (dense+tanh on [CLS], then the classifier), nil without one.
	pooler, classifier *ops.Linear
	// q is an int8 graph's layers (bert_int8.go), nil for float32 (layers).
	q *qmodel
}

// layer is one encoder layer: its products' weights packed for the
// inference GEMM (qkv: the query, key and value weights stacked, 3·hidden
// outputs), their biases, and the two LayerNorms.
type layer struct {
	qkv, ao, fi, fo                 *tensor.Weight
	qkvBias, aoBias, fiBias, foBias []float32
	ln1w, ln1b, ln2w, ln2b          []float32
}

// New builds a Model from cfg and tensors named as in a Hugging Face
// BertModel checkpoint (an optional "bert." prefix, as in
// BertForSequenceClassification, is accepted). The tensors are not
// copied: the caller must not change them afterwards.
func New(cfg *model.Config, tensors map[string]*safetensors.Tensor) (*Model, error) {
	return build(cfg, tensors, nil)
}

// build is New, and with q NewInt8: the layers' products then come from
// q, the other tensors from tensors.
func build(cfg *model.Config, tensors map[string]*safetensors.Tensor, q *Int8Graph) (*Model, error) {
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
	if _, ok := tensors["bert."+arch.WordEmbeddings]; ok {
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
		case !slices.Equal(t.Shape, shape) || len(t.Data) != n:
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
	m.work.New = func() any { return new(work) }
	m.wte = get(arch.WordEmbeddings, cfg.VocabSize, C)
	m.wpe = get(arch.PositionEmbeddings, cfg.MaxPositionEmbeddings, C)
	m.wtt = get(arch.TokenTypeEmbeddings, cfg.TypeVocabSize, C)
	m.elnw = get(arch.EmbeddingsNorm+".weight", C)
	m.elnb = get(arch.EmbeddingsNorm+".bias", C)
	layout := arch.EncoderOf(cfg)
	if q != nil {
		m.q = &qmodel{act: q.Act, qkvPerBatch: q.QKVPerBatch}
	}
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := arch.EncoderLayer(l)
		if q != nil {
			m.q.layers = append(m.q.layers, newQLayer(q, p, C, FF, get, &missing))
			continue
		}
		// w is the layer's tensor of role r (its bias with bias), as the
		// layout names and shapes it.
		w := func(r arch.Role, bias bool) []float32 {
			lw, _ := layout.Find(r, bias)
			return get(p+lw.Name, lw.Shape...)
		}
		q, k, v := w(arch.EncQuery, false), w(arch.EncKey, false), w(arch.EncValue, false)
		m.layers = append(m.layers, layer{
			qkv:     tensor.PackWeight(slices.Concat(q, k, v), 3*C, C, false),
			qkvBias: slices.Concat(w(arch.EncQuery, true), w(arch.EncKey, true), w(arch.EncValue, true)),
			ao:      tensor.PackWeight(w(arch.EncAttnOut, false), C, C, false),
			aoBias:  w(arch.EncAttnOut, true),
			ln1w:    w(arch.EncAttnNorm, false), ln1b: w(arch.EncAttnNorm, true),
			fi:     tensor.PackWeight(w(arch.EncInter, false), FF, C, false),
			fiBias: w(arch.EncInter, true),
			fo:     tensor.PackWeight(w(arch.EncOut, false), C, FF, false),
			foBias: w(arch.EncOut, true),
			ln2w:   w(arch.EncOutNorm, false), ln2b: w(arch.EncOutNorm, true),
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
// (ONNX's last_hidden_state); rows of padding positions (past a
// sequence's last real token) are zero.
//
// Only the real tokens are computed: the sequences' first lens[n] rows
// (up to the last real token) go through the layers back to back, so a
// batch's padding costs nothing. Per layer: the query, key and value
// projections as one product (qkv), attention per (sequence, head), the
// output projection with the residual and LayerNorm done per block of
// rows as soon as the block is computed, and the MLP likewise, the GELU
// and the second residual and LayerNorm on each block while it is in
// cache.
func (m *Model) Forward(b *Batch, threads int) ([]float32, error) {
	return m.ForwardProfile(b, threads, nil)
}

// ForwardProfile is Forward that adds its time and work by op class to p
// (nil: none), for a roofline of the forward (benchmarks'
// EncoderRoofline).
func (m *Model) ForwardProfile(b *Batch, threads int, p *Profile) ([]float32, error) {
	if err := b.validate(&m.cfg); err != nil {
		return nil, err
	}
	t0 := p.now()
	th := threads
	if th <= 0 {
		th = runtime.GOMAXPROCS(0)
	}
	N, T := b.N, b.T
	C, FF, H := m.cfg.HiddenSize, m.cfg.IntermediateSize, m.cfg.NumAttentionHeads
	eps := float32(m.cfg.LayerNormEps)
	lens, offs := make([]int, N), make([]int, N+1)
	for n := range lens {
		for t := T - 1; t >= 0; t-- {
			if b.Mask[n*T+t] != 0 {
				lens[n] = t + 1
				break
			}
		}
		offs[n+1] = offs[n] + lens[n]
	}
	R := offs[N] // real rows
	w := m.work.Get().(*work)
	defer m.work.Put(w)
	x, res := grow(&w.x, R*C), grow(&w.res, R*C)
	qkv, ctx, ff := grow(&w.qkv, R*3*C), grow(&w.ctx, R*C), grow(&w.ff, R*FF)
	// keyBias is 0 for a key to attend to, −Inf for a hole in the mask.
	keyBias := grow(&w.keyBias, R)
	for n := range lens {
		for t := 0; t < lens[n]; t++ {
			r := offs[n] + t
			keyBias[r] = 0
			if b.Mask[n*T+t] == 0 {
				keyBias[r] = float32(math.Inf(-1))
			}
			id, ty := int(b.IDs[n*T+t]), 0
			if b.Types != nil {
				ty = int(b.Types[n*T+t])
			}
			o, we, pe, te := res[r*C:r*C+C], m.wte[id*C:id*C+C], m.wpe[t*C:t*C+C], m.wtt[ty*C:ty*C+C]
			for c := range o {
				o[c] = we[c] + pe[c] + te[c]
			}
		}
	}
	clear(x)
	if m.q == nil {
		ops.ParallelFor(R, th, func(lo, hi int) {
			ops.AddLayerNorm(x[lo*C:hi*C], x[lo*C:hi*C], res[lo*C:hi*C], m.elnw, m.elnb, hi-lo, C, eps)
		})
	}
	p.add(Elementwise, t0, float64(2*R*C))
	att := ops.PackedAttention{H: H, KV: H, D: C / H, Lens: lens, Offs: offs, KeyBias: keyBias}
	if len(w.att) < th {
		w.att = make([]ops.AttScratch, th)
	}
	// Per layer: the products' multiply-adds, attention's (Q·Kᵀ and P·V
	// over every head), the values the fused steps write.
	var attOps float64
	for _, L := range lens {
		attOps += 4 * float64(L) * float64(L) * float64(C)
	}
	gemmOps := func(k, n int) float64 { return 2 * float64(R) * float64(k) * float64(n) }
	if m.q != nil {
		if err := m.forwardInt8(w, x, res, qkv, ctx, ff, att, R, th, p, attOps); err != nil {
			return nil, err
		}
	}
	for l := range m.layers {
		ly := &m.layers[l]
		t := p.now()
		ly.qkv.MatMul(qkv, 3*C, x, C, R, ly.qkvBias, th)
		p.gemm(t, gemmOps(C, 3*C), 0)
		t = p.now()
		if err := att.Forward(ctx, qkv, w.att[:th]); err != nil {
			return nil, fmt.Errorf("bert: layer %d attention: %w", l, err)
		}
		p.add(Attention, t, attOps)
		// x ← LayerNorm(x + ctx·Woᵀ + bo), per block of rows.
		t = p.now()
		ly.ao.MatMulThen(res, C, ctx, C, R, ly.aoBias, th, p.fused(func(lo, hi int) {
			ops.AddLayerNorm(x[lo*C:hi*C], x[lo*C:hi*C], res[lo*C:hi*C], ly.ln1w, ly.ln1b, hi-lo, C, eps)
		}))
		p.gemm(t, gemmOps(C, C), float64(R*C))
		t = p.now()
		ly.fi.MatMulThen(ff, FF, x, C, R, ly.fiBias, th, p.fused(func(lo, hi int) {
			m.act(ff[lo*FF : hi*FF])
		}))
		p.gemm(t, gemmOps(C, FF), float64(R*FF))
		t = p.now()
		ly.fo.MatMulThen(res, C, ff, FF, R, ly.foBias, th, p.fused(func(lo, hi int) {
			ops.AddLayerNorm(x[lo*C:hi*C], x[lo*C:hi*C], res[lo*C:hi*C], ly.ln2w, ly.ln2b, hi-lo, C, eps)
		}))
		p.gemm(t, gemmOps(FF, C), float64(R*C))
	}
	t := p.now()
	out := make([]float32, N*T*C)
	for n := range lens {
		copy(out[n*T*C:], x[offs[n]*C:offs[n+1]*C])
	}
	p.add(Elementwise, t, float64(N*T*C))
	return out, nil
}

// act applies the MLP's activation in place.
func (m *Model) act(x []float32) {
	if m.cfg.HiddenAct == ops.ActGELU {
		ops.GELUInPlace(x)
		return
	}
	ops.ActivationForward(m.cfg.HiddenAct, x, x, 1)
}

// work is one Forward's activations, kept between calls in Model.work.
type work struct {
	x, res, qkv, ctx, ff, keyBias []float32
	att                           []ops.AttScratch // one per goroutine
	q                             qwork            // an int8 model's
}

func grow(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}
