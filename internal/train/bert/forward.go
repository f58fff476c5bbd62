package bert

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/internal/ops"
)

// layerActs is what one encoder layer's backward needs from its forward.
type layerActs struct {
	q, k, v, ctx     []float32 // N·T×C
	att              []float32 // N×H×T×T softmax probabilities
	res1, ln1        []float32 // attention output + input (pre-LN), and after LN
	ln1Mean, ln1Rstd []float32 // N·T
	ff1              []float32 // N·T×FF, before the activation
	res2, out        []float32 // FFN output + ln1 (pre-LN), and after LN
	ln2Mean, ln2Rstd []float32
	lora             map[*Param][]float32 // x·Aᵀ of each LoRA-adapted matrix, N·T×r
}

// Acts holds one forward pass's activations (and the backward scratch). It
// belongs to the Model that made it and is overwritten by the next Forward.
type Acts struct {
	N, T  int
	ctx   context.Context // the batch's (Batch.Ctx)
	ids   []int32
	types []int32
	mask  []float32
	lens  []int

	emb, x0          []float32 // embedding sum (pre-LN) and after LN
	embMean, embRstd []float32
	layers           []layerActs
	// Hidden is the last layer's output, N×T×C.
	Hidden []float32

	// backward scratch
	dx, dres, dln1, dctx, dq, dk, dv []float32
	// g is the activation's output, recomputed in the backward and then
	// reused for ∂loss/∂ its input; dg is ∂loss/∂g. N·T×FF each.
	g, dg []float32
}

// acts returns the workspace sized for the batch, reusing the last one.
func (m *Model) acts(b *Batch) *Acts {
	a := m.ws
	if a == nil {
		a = &Acts{}
		m.ws = a
	}
	C, FF, H := m.Cfg.HiddenSize, m.Cfg.IntermediateSize, m.Cfg.NumAttentionHeads
	NT := b.N * b.T
	a.N, a.T, a.ctx = b.N, b.T, b.Ctx
	a.ids, a.mask = b.IDs, b.Mask
	a.types = b.Types
	if a.types == nil {
		a.types = make([]int32, NT)
	}
	a.lens = b.lengths()
	a.emb, a.x0 = ops.Grow(a.emb, NT*C), ops.Grow(a.x0, NT*C)
	a.embMean, a.embRstd = ops.Grow(a.embMean, NT), ops.Grow(a.embRstd, NT)
	if len(a.layers) != len(m.layers) {
		a.layers = make([]layerActs, len(m.layers))
	}
	for l := range a.layers {
		la := &a.layers[l]
		la.q, la.k, la.v, la.ctx = ops.Grow(la.q, NT*C), ops.Grow(la.k, NT*C), ops.Grow(la.v, NT*C), ops.Grow(la.ctx, NT*C)
		la.att = ops.Grow(la.att, b.N*H*b.T*b.T)
		la.res1, la.ln1 = ops.Grow(la.res1, NT*C), ops.Grow(la.ln1, NT*C)
		la.ln1Mean, la.ln1Rstd = ops.Grow(la.ln1Mean, NT), ops.Grow(la.ln1Rstd, NT)
		la.ff1 = ops.Grow(la.ff1, NT*FF)
		la.res2, la.out = ops.Grow(la.res2, NT*C), ops.Grow(la.out, NT*C)
		la.ln2Mean, la.ln2Rstd = ops.Grow(la.ln2Mean, NT), ops.Grow(la.ln2Rstd, NT)
		if la.lora == nil {
			la.lora = map[*Param][]float32{}
		}
	}
	a.g = ops.Grow(a.g, NT*FF)
	return a
}

// Forward runs the encoder over a batch and returns its activations;
// a.Hidden is the last hidden state (ONNX's last_hidden_state) at every
// unpadded position. Padded positions (right of each sequence's last real
// token) are not computed: nothing real depends on them.
func (m *Model) Forward(b *Batch) (*Acts, error) {
	if err := b.validate(&m.Cfg); err != nil {
		return nil, err
	}
	a := m.acts(b)
	C, T := m.Cfg.HiddenSize, b.T
	NT := b.N * T
	th := m.threads()
	eps := float32(m.Cfg.LayerNormEps)

	ops.EmbeddingForward(a.emb, a.ids, a.types, m.wte.W, m.wpe.W, m.wtt.W, b.N, T, C)
	ops.LayerNormForward(a.x0, a.embMean, a.embRstd, a.emb, m.elnw.W, m.elnb.W, NT, C, eps, th)
	x := a.x0
	for l := range m.layers {
		if err := stopped(b.Ctx); err != nil {
			return nil, err
		}
		ly, la := &m.layers[l], &a.layers[l]
		m.linearForward(ly.q, ly.qb, la.q, x, NT, C, C, la)
		m.linearForward(ly.k, ly.kb, la.k, x, NT, C, C, la)
		m.linearForward(ly.v, ly.vb, la.v, x, NT, C, C, la)
		m.attention(b.N, T, a.mask).Forward(la.ctx, la.att, la.q, la.k, la.v, a.lens, th)
		m.linearForward(ly.ao, ly.aob, la.res1, la.ctx, NT, C, C, la)
		ops.AddInPlace(la.res1, x, th)
		ops.LayerNormForward(la.ln1, la.ln1Mean, la.ln1Rstd, la.res1, ly.ln1w.W, ly.ln1b.W, NT, C, eps, th)
		m.linearForward(ly.fi, ly.fib, la.ff1, la.ln1, NT, C, m.Cfg.IntermediateSize, la)
		ops.ActivationForward(m.Cfg.HiddenAct, a.g, la.ff1, th)
		m.linearForward(ly.fo, ly.fob, la.res2, a.g, NT, m.Cfg.IntermediateSize, C, la)
		ops.AddInPlace(la.res2, la.ln1, th)
		ops.LayerNormForward(la.out, la.ln2Mean, la.ln2Rstd, la.res2, ly.ln2w.W, ly.ln2b.W, NT, C, eps, th)
		x = la.out
	}
	a.Hidden = x
	return a, nil
}

// attention is BERT's multi-head self-attention over N sequences of T
// positions as ops.Attention: bidirectional, every head its own key/value
// head, keys hidden by the batch's mask (Hugging Face adds the float32
// minimum there, which underflows exp to exactly 0).
func (m *Model) attention(N, T int, mask []float32) ops.Attention {
	H := m.Cfg.NumAttentionHeads
	return ops.Attention{N: N, T: T, H: H, KV: H, D: m.Cfg.HiddenSize / H, KeyMask: mask}
}

// Backward accumulates into every unfrozen parameter's G the gradient of
// the loss given dHidden = ∂loss/∂Hidden (N×T×C). a must be the latest
// Forward of this model. It stops early with the error of the batch's
// context (Batch.Ctx) once that is done, the gradients then partial.
func (m *Model) Backward(a *Acts, dHidden []float32) error {
	C, FF, T := m.Cfg.HiddenSize, m.Cfg.IntermediateSize, a.T
	NT := a.N * T
	th := m.threads()
	a.dx, a.dres, a.dln1 = ops.Grow(a.dx, NT*C), ops.Grow(a.dres, NT*C), ops.Grow(a.dln1, NT*C)
	a.dctx, a.dq, a.dk, a.dv = ops.Grow(a.dctx, NT*C), ops.Grow(a.dq, NT*C), ops.Grow(a.dk, NT*C), ops.Grow(a.dv, NT*C)
	a.dg = ops.Grow(a.dg, NT*FF)
	copy(a.dx, dHidden)
	for l := len(m.layers) - 1; l >= 0; l-- {
		if err := stopped(a.ctx); err != nil {
			return err
		}
		ly, la := &m.layers[l], &a.layers[l]
		in := a.x0
		if l > 0 {
			in = a.layers[l-1].out
		}
		// out = LN(res2); res2 = fo(act(ff1)) + ln1
		clear(a.dres)
		ops.LayerNormBackward(a.dres, ly.ln2w.Grad(), ly.ln2b.Grad(), a.dx, la.res2, ly.ln2w.W, la.ln2Mean, la.ln2Rstd, NT, C, th)
		ops.ActivationForward(m.Cfg.HiddenAct, a.g, la.ff1, th) // recomputed rather than stored
		clear(a.dg)
		m.linearBackward(ly.fo, ly.fob, a.dg, a.dres, a.g, NT, FF, C, la)
		dff1 := a.g // g is spent: its buffer takes ∂loss/∂ff1
		clear(dff1)
		ops.ActivationBackward(m.Cfg.HiddenAct, dff1, a.dg, la.ff1, th)
		copy(a.dln1, a.dres)
		m.linearBackward(ly.fi, ly.fib, a.dln1, dff1, la.ln1, NT, C, FF, la)
		if err := stopped(a.ctx); err != nil {
			return err
		}
		// ln1 = LN(res1); res1 = ao(ctx) + in
		clear(a.dres)
		ops.LayerNormBackward(a.dres, ly.ln1w.Grad(), ly.ln1b.Grad(), a.dln1, la.res1, ly.ln1w.W, la.ln1Mean, la.ln1Rstd, NT, C, th)
		clear(a.dctx)
		m.linearBackward(ly.ao, ly.aob, a.dctx, a.dres, la.ctx, NT, C, C, la)
		clear(a.dq)
		clear(a.dk)
		clear(a.dv)
		m.attention(a.N, T, a.mask).Backward(a.dq, a.dk, a.dv, a.dctx, la.att, la.q, la.k, la.v, a.lens, th)
		copy(a.dx, a.dres) // the residual path
		m.linearBackward(ly.q, ly.qb, a.dx, a.dq, in, NT, C, C, la)
		m.linearBackward(ly.k, ly.kb, a.dx, a.dk, in, NT, C, C, la)
		m.linearBackward(ly.v, ly.vb, a.dx, a.dv, in, NT, C, C, la)
	}
	clear(a.dres)
	ops.LayerNormBackward(a.dres, m.elnw.Grad(), m.elnb.Grad(), a.dx, a.emb, m.elnw.W, a.embMean, a.embRstd, NT, C, th)
	ops.EmbeddingBackward(m.wte.Grad(), m.wpe.Grad(), m.wtt.Grad(), a.dres, a.ids, a.types, a.N, T, C)
	return nil
}

// stopped is ctx's error, nil for a nil ctx or one not done.
func stopped(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// --- linear layers (with optional LoRA) ---

// linearForward: out = inp·Wᵀ + b (+ alpha/r · (inp·Aᵀ)·Bᵀ with LoRA),
// ops.Linear's forward; inp is rows×in, W is outC×in. x·Aᵀ is kept in la.
func (m *Model) linearForward(w, b *Param, out, inp []float32, rows, in, outC int, la *layerActs) {
	l := &ops.Linear{W: w, Bias: b, LoRA: m.lora[w], In: in, Out: outC}
	var xa []float32
	if l.LoRA != nil {
		xa = ops.Grow(la.lora[w], rows*l.LoRA.Rank)
		la.lora[w] = xa
	}
	l.Forward(out, inp, xa, rows, m.threads())
}

// linearBackward adds ∂/∂inp to dinp, and ∂/∂W, ∂/∂b (or the LoRA
// factors' gradients) to the unfrozen params: ops.Linear's backward.
func (m *Model) linearBackward(w, b *Param, dinp, dout, inp []float32, rows, in, outC int, la *layerActs) {
	l := &ops.Linear{W: w, Bias: b, LoRA: m.lora[w], In: in, Out: outC}
	l.Backward(dinp, dout, inp, la.lora[w], rows, m.threads())
}

// --- pooling and the cross-encoder head ---

// Pooling modes (the manifest's names).
const (
	PoolMean = ops.PoolMean
	PoolCLS  = ops.PoolCLS
	PoolLast = ops.PoolLast
)

// Pool turns the hidden states into one vector per sequence (N×C):
// ops.PoolForward over the batch's mask.
func (m *Model) Pool(a *Acts, mode string) ([]float32, error) {
	out := make([]float32, a.N*m.Cfg.HiddenSize)
	if err := ops.PoolForward(out, a.Hidden, a.mask, a.lens, a.N, a.T, m.Cfg.HiddenSize, mode); err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	return out, nil
}

// PoolBackward adds to dHidden (N×T×C) the gradient given dPooled (N×C).
func (m *Model) PoolBackward(a *Acts, mode string, dPooled, dHidden []float32) {
	ops.PoolBackward(dHidden, dPooled, a.mask, a.lens, a.N, a.T, m.Cfg.HiddenSize, mode)
}

// headActs is what the cross-encoder head's backward needs from its
// forward: the [CLS] rows and tanh(pooler(cls)), N×C each.
type headActs struct {
	cls, tanh []float32
}

// Classify runs the cross-encoder head on [CLS]: logits = classifier(tanh(
// pooler(h_CLS))), N×numLabels.
func (m *Model) Classify(a *Acts) ([]float32, error) {
	C, T := m.Cfg.HiddenSize, a.T
	cls := make([]float32, a.N*C)
	for n := 0; n < a.N; n++ {
		copy(cls[n*C:n*C+C], a.Hidden[n*T*C:n*T*C+C])
	}
	logits, _, err := m.classify(cls, a.N)
	return logits, err
}

// classify is Classify over N [CLS] rows (N×C).
func (m *Model) classify(cls []float32, N int) ([]float32, *headActs, error) {
	if m.clsW == nil {
		return nil, nil, fmt.Errorf("bert: model has no classifier head (load it as a cross-encoder)")
	}
	C, NL := m.Cfg.HiddenSize, m.clsW.Shape[0]
	h := &headActs{cls: cls, tanh: make([]float32, N*C)}
	m.headLinear(m.poolW, m.poolB, C).Forward(h.tanh, cls, nil, N, m.threads())
	ops.TanhForward(h.tanh, h.tanh)
	logits := make([]float32, N*NL)
	m.headLinear(m.clsW, m.clsB, NL).Forward(logits, h.tanh, nil, N, m.threads())
	return logits, h, nil
}

// classifyBackward adds the head's parameter gradients given dLogits and
// returns ∂loss/∂ its [CLS] rows.
func (m *Model) classifyBackward(h *headActs, dLogits []float32) []float32 {
	C, NL := m.Cfg.HiddenSize, m.clsW.Shape[0]
	N := len(h.cls) / C
	dt := make([]float32, N*C)
	m.headLinear(m.clsW, m.clsB, NL).Backward(dt, dLogits, h.tanh, nil, N, m.threads())
	dpre := make([]float32, N*C)
	ops.TanhBackward(dpre, dt, h.tanh)
	dcls := make([]float32, N*C)
	m.headLinear(m.poolW, m.poolB, C).Backward(dcls, dpre, h.cls, nil, N, m.threads())
	return dcls
}

// headLinear is one of the head's layers (C inputs, out outputs; LoRA
// never adapts the head).
func (m *Model) headLinear(w, b *Param, out int) *ops.Linear {
	return &ops.Linear{W: w, Bias: b, In: m.Cfg.HiddenSize, Out: out}
}
