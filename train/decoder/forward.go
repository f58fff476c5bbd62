package decoder

import (
	"fmt"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train/objective"
	"github.com/anna-search/anna/train/ops"
)

// Batch is a right-padded batch of N token sequences of length T.
type Batch struct {
	N, T int
	IDs  []int32   // N×T token ids (padding ids must be in the vocabulary too)
	Mask []float32 // N×T: ones for the real tokens, then zeros
	// Inputs, when set, are the N×T×C input embeddings (transformers'
	// inputs_embeds) used instead of the IDs' rows of the embedding table,
	// which IDs may then be nil: how Causal2Vec's contextual token, Anchor's
	// prefix and AutoRegEmbed's compressed vectors enter the decoder
	// (EmbedTokens builds the token rows). Backward then leaves
	// ∂loss/∂Inputs in Acts.DInputs instead of the embedding's gradient
	// (EmbedBackward routes the token rows' share there).
	Inputs []float32
}

// lengths checks the batch and returns each sequence's number of real
// tokens.
func (b *Batch) lengths(cfg *model.Config) ([]int, error) {
	if b.N <= 0 || b.T <= 0 || (b.Inputs == nil || b.IDs != nil) && len(b.IDs) != b.N*b.T || len(b.Mask) != b.N*b.T {
		return nil, fmt.Errorf("decoder: batch shape N=%d T=%d does not match its %d ids, %d mask values", b.N, b.T, len(b.IDs), len(b.Mask))
	}
	if b.Inputs != nil && len(b.Inputs) != b.N*b.T*cfg.HiddenSize {
		return nil, fmt.Errorf("decoder: batch shape N=%d T=%d C=%d does not match its %d input embedding values", b.N, b.T, cfg.HiddenSize, len(b.Inputs))
	}
	if b.T > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("decoder: sequence length %d exceeds max_position_embeddings %d", b.T, cfg.MaxPositionEmbeddings)
	}
	lens := make([]int, b.N)
	for n := 0; n < b.N; n++ {
		L := 0
		for t := 0; t < b.T; t++ {
			switch mk := b.Mask[n*b.T+t]; {
			case mk == 1 && L == t:
				L++
			case mk == 0:
			default:
				return nil, fmt.Errorf("decoder: sequence %d, position %d: mask %g (want ones then zeros: right padding only)", n, t, mk)
			}
		}
		if L == 0 {
			return nil, fmt.Errorf("decoder: sequence %d has no tokens", n)
		}
		lens[n] = L
	}
	for i, id := range b.IDs {
		if id < 0 || int(id) >= cfg.VocabSize {
			return nil, fmt.Errorf("decoder: token id %d at sequence %d, position %d outside the vocabulary of %d", id, i/b.T, i%b.T, cfg.VocabSize)
		}
	}
	return lens, nil
}

// layerActs is what one layer's backward needs from its forward.
type layerActs struct {
	x, xn1       []float32 // layer input (residual stream, Acts.xs[l]) and its RMSNorm, rows×C
	rstd1        []float32
	qraw, kraw   []float32 // projections before the q/k norm (Qwen3)
	qrstd, krstd []float32
	q, k, v      []float32 // after norm and rotation: rows×H·D, rows×KV·D
	att          []float32
	ctx          []float32 // rows×H·D
	h, xn2       []float32 // x + attention, and its RMSNorm
	rstd2        []float32
	g, u, act    []float32 // rows×F: gate, up, silu(gate)·up
	xa           [7][]float32
}

// Acts holds one forward pass's activations. It belongs to the Model that
// made it and is overwritten by the next Forward.
type Acts struct {
	N, T   int
	ids    []int32
	inputs bool // the batch gave Inputs: Backward fills DInputs
	lens   []int
	xs     [][]float32 // each layer's input, rows×C
	// layers holds every layer's activations, or with Model.Recompute one
	// workspace that the backward refills layer by layer.
	layers []layerActs
	tmp    []float32 // a recomputed layer's (unused) output
	// Backward's scratch, reused from step to step.
	dx, dh, dn, dact, dg, du, dctx, dq, dk, dv, dqraw, dkraw []float32
	// dEOS, set by a multilayer head's PoolBackward for the next Backward:
	// per layer l < L−1, the gradient of layer l's output at each
	// sequence's last token (N×C).
	dEOS  [][]float32
	last  []float32 // the last layer's output, before the final norm
	rstdF []float32
	// Hidden is the final hidden state (last_hidden_state), N×T×C.
	Hidden []float32
	// DInputs is, after Backward of a batch given by Inputs, ∂loss/∂Inputs
	// (N×T×C, zero at padded positions).
	DInputs []float32
}

func grow(b []float32, n int) []float32 {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]float32, n)
}

func (m *Model) attention(N, T int) ops.Attention {
	return ops.Attention{N: N, T: T, H: m.Cfg.NumAttentionHeads, KV: m.Cfg.KVHeads(), D: m.Cfg.HeadDim(), Causal: m.Causal}
}

func (m *Model) acts(b *Batch, lens []int) *Acts {
	a := m.ws
	if a == nil {
		a = &Acts{}
		m.ws = a
	}
	cfg := &m.Cfg
	rows := b.N * b.T
	C, F, D := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	a.N, a.T, a.ids, a.lens, a.inputs = b.N, b.T, b.IDs, lens, b.Inputs != nil
	if len(a.xs) != len(m.layers) {
		a.xs = make([][]float32, len(m.layers))
	}
	for l := range a.xs {
		a.xs[l] = grow(a.xs[l], rows*C)
	}
	nla := len(m.layers)
	if m.Recompute {
		nla = min(nla, 1)
		a.tmp = grow(a.tmp, rows*C)
	}
	if len(a.layers) != nla {
		a.layers = make([]layerActs, nla)
	}
	for l := range a.layers {
		la := &a.layers[l]
		la.xn1, la.rstd1 = grow(la.xn1, rows*C), grow(la.rstd1, rows)
		if cfg.QKNorm() {
			la.qraw, la.kraw = grow(la.qraw, rows*H*D), grow(la.kraw, rows*KV*D)
			la.qrstd, la.krstd = grow(la.qrstd, rows*H), grow(la.krstd, rows*KV)
		}
		la.q, la.k, la.v = grow(la.q, rows*H*D), grow(la.k, rows*KV*D), grow(la.v, rows*KV*D)
		la.att = grow(la.att, m.attention(b.N, b.T).AttSize())
		la.ctx = grow(la.ctx, rows*H*D)
		la.h, la.xn2, la.rstd2 = grow(la.h, rows*C), grow(la.xn2, rows*C), grow(la.rstd2, rows)
		la.g, la.u, la.act = grow(la.g, rows*F), grow(la.u, rows*F), grow(la.act, rows*F)
		for i, lin := range m.layers[l].proj { // every layer has the same LoRA targets
			if lin.LoRA != nil {
				la.xa[i] = grow(la.xa[i], rows*lin.LoRA.Rank)
			}
		}
	}
	a.last, a.rstdF, a.Hidden = grow(a.last, rows*C), grow(a.rstdF, rows), grow(a.Hidden, rows*C)
	if m.rope == nil || m.rope.T != b.T {
		m.rope = ops.NewRope(b.T, D, cfg.RopeTheta)
	}
	return a
}

// Forward runs the decoder over a batch and returns its activations;
// a.Hidden is the final hidden state at every position (padded positions
// hold values nothing depends on).
func (m *Model) Forward(b *Batch) (*Acts, error) {
	lens, err := b.lengths(&m.Cfg)
	if err != nil {
		return nil, err
	}
	a := m.acts(b, lens)
	rows, C := b.N*b.T, m.Cfg.HiddenSize
	eps := float32(m.Cfg.RMSNormEps)
	th := m.threads()

	x := a.last
	if len(m.layers) > 0 {
		x = a.xs[0]
	}
	if b.Inputs != nil {
		copy(x, b.Inputs)
	} else {
		m.EmbedTokens(x, b.IDs)
	}
	for l := range m.layers {
		next := a.last
		if l+1 < len(m.layers) {
			next = a.xs[l+1]
		}
		m.layerForward(l, a, next)
	}
	ops.RMSNormForward(a.Hidden, a.rstdF, a.last, m.norm.W, rows, C, eps, th)
	return a, nil
}

// layerActs returns the activations of layer l: its own, or with
// Recompute the shared workspace.
func (a *Acts) layerActs(l int) *layerActs {
	if len(a.layers) == 1 {
		return &a.layers[0]
	}
	return &a.layers[l]
}

// layerForward runs layer l on a.xs[l], keeping its activations in
// a.layerActs(l), and writes its output to out.
func (m *Model) layerForward(l int, a *Acts, out []float32) {
	cfg := &m.Cfg
	rows, C, D := a.N*a.T, cfg.HiddenSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	eps := float32(cfg.RMSNormEps)
	th := m.threads()
	ly, la := &m.layers[l], a.layerActs(l)
	la.x = a.xs[l]
	ops.RMSNormForward(la.xn1, la.rstd1, la.x, ly.ln1.W, rows, C, eps, th)
	if cfg.QKNorm() {
		ly.q().Forward(la.qraw, la.xn1, la.xa[0], rows, th)
		ly.k().Forward(la.kraw, la.xn1, la.xa[1], rows, th)
		ops.RMSNormForward(la.q, la.qrstd, la.qraw, ly.qn.W, rows*H, D, eps, th)
		ops.RMSNormForward(la.k, la.krstd, la.kraw, ly.kn.W, rows*KV, D, eps, th)
	} else {
		ly.q().Forward(la.q, la.xn1, la.xa[0], rows, th)
		ly.k().Forward(la.k, la.xn1, la.xa[1], rows, th)
	}
	ly.v().Forward(la.v, la.xn1, la.xa[2], rows, th)
	m.rope.Forward(la.q, rows, H, th)
	m.rope.Forward(la.k, rows, KV, th)
	m.attention(a.N, a.T).Forward(la.ctx, la.att, la.q, la.k, la.v, a.lens, th)
	ly.o().Forward(la.h, la.ctx, la.xa[3], rows, th)
	ops.AddInPlace(la.h, la.x, th)
	ops.RMSNormForward(la.xn2, la.rstd2, la.h, ly.ln2.W, rows, C, eps, th)
	ly.gate().Forward(la.g, la.xn2, la.xa[4], rows, th)
	ly.up().Forward(la.u, la.xn2, la.xa[5], rows, th)
	ops.SwiGLUForward(la.act, la.g, la.u, th)
	ly.down().Forward(out, la.act, la.xa[6], rows, th)
	ops.AddInPlace(out, la.h, th)
}

// Backward accumulates into every unfrozen parameter's G the gradient of
// the loss given dHidden = ∂loss/∂Hidden (N×T×C, zero at padded
// positions). a must be the latest Forward of this model.
func (m *Model) Backward(a *Acts, dHidden []float32) {
	cfg := &m.Cfg
	rows, C, F, D := a.N*a.T, cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	th := m.threads()
	att := m.attention(a.N, a.T)

	// dx is ∂/∂ the residual stream, dn ∂/∂ a norm's output.
	a.dx, a.dh, a.dn = grow(a.dx, rows*C), grow(a.dh, rows*C), grow(a.dn, rows*C)
	a.dact, a.dg, a.du = grow(a.dact, rows*F), grow(a.dg, rows*F), grow(a.du, rows*F)
	a.dctx, a.dq = grow(a.dctx, rows*H*D), grow(a.dq, rows*H*D)
	a.dk, a.dv = grow(a.dk, rows*KV*D), grow(a.dv, rows*KV*D)
	if cfg.QKNorm() {
		a.dqraw, a.dkraw = grow(a.dqraw, rows*H*D), grow(a.dkraw, rows*KV*D)
	}
	dx, dh, dn, dact, dg, du := a.dx, a.dh, a.dn, a.dact, a.dg, a.du
	dctx, dq, dk, dv, dqraw, dkraw := a.dctx, a.dq, a.dk, a.dv, a.dqraw, a.dkraw
	clear(dx)
	ops.RMSNormBackward(dx, m.norm.Grad(), dHidden, a.last, m.norm.W, a.rstdF, rows, C, th)
	for l := len(m.layers) - 1; l >= 0; l-- {
		if len(a.layers) == 1 && l < len(m.layers)-1 {
			m.layerForward(l, a, a.tmp) // Recompute: the workspace holds layer l+1
		}
		if l < len(a.dEOS) { // a multilayer head read layer l's output
			for n := 0; n < a.N; n++ {
				eos := n*a.T + a.lens[n] - 1
				for c, v := range a.dEOS[l][n*C : n*C+C] {
					dx[eos*C+c] += v
				}
			}
		}
		ly, la := &m.layers[l], a.layerActs(l)
		// out = h + down(silu(gate(xn2))·up(xn2)), xn2 = norm2(h)
		copy(dh, dx)
		clear(dact)
		ly.down().Backward(dact, dx, la.act, la.xa[6], rows, th)
		clear(dg)
		clear(du)
		ops.SwiGLUBackward(dg, du, dact, la.g, la.u, th)
		clear(dn)
		ly.gate().Backward(dn, dg, la.xn2, la.xa[4], rows, th)
		ly.up().Backward(dn, du, la.xn2, la.xa[5], rows, th)
		ops.RMSNormBackward(dh, ly.ln2.Grad(), dn, la.h, ly.ln2.W, la.rstd2, rows, C, th)
		// h = x + o(attn(rope(q), rope(k), v)), q, k, v from xn1 = norm1(x)
		copy(dx, dh)
		clear(dctx)
		ly.o().Backward(dctx, dh, la.ctx, la.xa[3], rows, th)
		clear(dq)
		clear(dk)
		clear(dv)
		att.Backward(dq, dk, dv, dctx, la.att, la.q, la.k, la.v, a.lens, th)
		m.rope.Backward(dq, rows, H, th)
		m.rope.Backward(dk, rows, KV, th)
		clear(dn)
		if cfg.QKNorm() {
			clear(dqraw)
			clear(dkraw)
			ops.RMSNormBackward(dqraw, ly.qn.Grad(), dq, la.qraw, ly.qn.W, la.qrstd, rows*H, D, th)
			ops.RMSNormBackward(dkraw, ly.kn.Grad(), dk, la.kraw, ly.kn.W, la.krstd, rows*KV, D, th)
			ly.q().Backward(dn, dqraw, la.xn1, la.xa[0], rows, th)
			ly.k().Backward(dn, dkraw, la.xn1, la.xa[1], rows, th)
		} else {
			ly.q().Backward(dn, dq, la.xn1, la.xa[0], rows, th)
			ly.k().Backward(dn, dk, la.xn1, la.xa[1], rows, th)
		}
		ly.v().Backward(dn, dv, la.xn1, la.xa[2], rows, th)
		ops.RMSNormBackward(dx, ly.ln1.Grad(), dn, la.x, ly.ln1.W, la.rstd1, rows, C, th)
	}
	a.dEOS = a.dEOS[:0]         // consumed
	for r := 0; r < rows; r++ { // padded positions get no gradient
		if a.lens[r/a.T] <= r%a.T {
			clear(dx[r*C : r*C+C])
		}
	}
	if a.inputs {
		a.DInputs = grow(a.DInputs, rows*C)
		copy(a.DInputs, dx)
		return
	}
	m.EmbedBackward(a.ids, dx)
}

// EmbedTokens writes the embedding-table rows of ids into dst
// (len(ids)×C).
func (m *Model) EmbedTokens(dst []float32, ids []int32) {
	C := m.Cfg.HiddenSize
	for r, id := range ids {
		copy(dst[r*C:r*C+C], m.embed.W[int(id)*C:int(id)*C+C])
	}
}

// EmbedBackward adds d's rows (len(ids)×C) to the embedding gradient rows
// of ids, skipping negative ids (rows that were not token embeddings); a
// frozen embedding is left alone. Rows sharing a table row are added by
// one goroutine in a fixed order.
func (m *Model) EmbedBackward(ids []int32, d []float32) {
	g := m.embed.Grad()
	if g == nil {
		return
	}
	C := m.Cfg.HiddenSize
	for r, id := range ids {
		if id < 0 {
			continue
		}
		w := g[int(id)*C : int(id)*C+C]
		for c, v := range d[r*C : r*C+C] {
			w[c] += v
		}
	}
}

// LMHead is the language-model head's weight (vocabulary × C): the
// checkpoint's lm_head when it has one (kept frozen: an embedder does not
// train it), else the input embedding it is tied to.
func (m *Model) LMHead() *ops.Param {
	if m.lmHead != nil {
		return m.lmHead
	}
	return m.embed
}

// Pooling modes (the manifest's names).
const (
	PoolMean = model.PoolingMean
	PoolLast = model.PoolingLastToken
)

// Pool turns the hidden states into one vector per sequence (N×C): the
// last real token's (the EOS the tokenizer appended), the mean over the
// real tokens, or the trainable head's (whose mode it must be).
func (m *Model) Pool(a *Acts, mode string) ([]float32, error) {
	C, T := m.Cfg.HiddenSize, a.T
	if mode == PoolLatent || mode == PoolMultiLayer {
		if m.head == nil || m.head.mode != mode {
			return nil, fmt.Errorf("decoder: pooling %q needs that trainable head (EnableHead)", mode)
		}
		return m.headForward(a), nil
	}
	out := make([]float32, a.N*C)
	for n := 0; n < a.N; n++ {
		o, L := out[n*C:n*C+C], a.lens[n]
		switch mode {
		case PoolMean:
			for t := 0; t < L; t++ {
				for c, v := range a.Hidden[(n*T+t)*C : (n*T+t)*C+C] {
					o[c] += v
				}
			}
			for c := range o {
				o[c] /= float32(L)
			}
		case PoolLast:
			copy(o, a.Hidden[(n*T+L-1)*C:(n*T+L)*C])
		default:
			return nil, fmt.Errorf("decoder: pooling %q not supported (want %s, %s, %s or %s)", mode, PoolMean, PoolLast, PoolLatent, PoolMultiLayer)
		}
	}
	return out, nil
}

// PoolBackward adds to dHidden (N×T×C) the gradient given dPooled (N×C)
// (and a head's parameter gradients; a multilayer head's gradients of the
// inner layers' outputs wait in a for Backward).
func (m *Model) PoolBackward(a *Acts, mode string, dPooled, dHidden []float32) {
	C, T := m.Cfg.HiddenSize, a.T
	if mode == PoolLatent || mode == PoolMultiLayer {
		m.headBackward(a, dPooled, dHidden)
		return
	}
	for n := 0; n < a.N; n++ {
		d, L := dPooled[n*C:n*C+C], a.lens[n]
		switch mode {
		case PoolMean:
			for t := 0; t < L; t++ {
				dh := dHidden[(n*T+t)*C : (n*T+t)*C+C]
				for c, v := range d {
					dh[c] += v / float32(L)
				}
			}
		case PoolLast:
			dh := dHidden[(n*T+L-1)*C : (n*T+L)*C]
			for c, v := range d {
				dh[c] += v
			}
		}
	}
}

// ContrastiveGrad runs forward and backward for one bi-encoder batch whose
// first Q sequences are queries and the next Q·G their groups (positive
// first), with objective.ContrastiveLoss. Gradients of scale·loss are
// added to the params; the unscaled loss is returned.
func (m *Model) ContrastiveGrad(b *Batch, Q, G int, pooling string, teacher []float32, cfg objective.ContrastiveConfig, scale float32) (float64, error) {
	if b.N != Q+Q*G {
		return 0, fmt.Errorf("decoder: contrastive batch has %d sequences, want %d queries + %d documents", b.N, Q, Q*G)
	}
	a, err := m.Forward(b)
	if err != nil {
		return 0, err
	}
	e, err := m.Pool(a, pooling)
	if err != nil {
		return 0, err
	}
	loss, parts, de, err := objective.ContrastiveStep(e, Q, G, m.Cfg.HiddenSize, teacher, cfg, scale)
	m.lastParts = parts
	if de == nil {
		return loss, err
	}
	dh := make([]float32, len(a.Hidden))
	m.PoolBackward(a, pooling, de, dh)
	m.Backward(a, dh)
	return loss, nil
}

// EvalContrastive is ContrastiveGrad's forward only: the loss, and how many
// queries rank their positive above all of their own negatives.
func (m *Model) EvalContrastive(b *Batch, Q, G int, pooling string, teacher []float32, cfg objective.ContrastiveConfig) (loss float64, correct int, err error) {
	if b.N != Q+Q*G {
		return 0, 0, fmt.Errorf("decoder: contrastive batch has %d sequences, want %d queries + %d documents", b.N, Q, Q*G)
	}
	a, err := m.Forward(b)
	if err != nil {
		return 0, 0, err
	}
	e, err := m.Pool(a, pooling)
	if err != nil {
		return 0, 0, err
	}
	return objective.ContrastiveEval(e, Q, G, m.Cfg.HiddenSize, teacher, cfg)
}
