package decoder

import (
	"context"
	"fmt"
	"runtime"

	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
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
	// Ctx, when not nil, stops Forward and Backward between layers (and
	// halfway through a layer's backward) with its error once it is done,
	// as bert.Batch's: the gradients then partial, the weights untouched.
	Ctx context.Context
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
	lens, err := RightPadded(b.Mask, b.N, b.T)
	if err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	for i, id := range b.IDs {
		if id < 0 || int(id) >= cfg.VocabSize {
			return nil, fmt.Errorf("decoder: token id %d at sequence %d, position %d outside the vocabulary of %d", id, i/b.T, i%b.T, cfg.VocabSize)
		}
	}
	return lens, nil
}

// RightPadded checks that a mask of N sequences of T is right padding
// (ones, then zeros; at least one one) and returns each sequence's number
// of real tokens.
func RightPadded(mask []float32, N, T int) ([]int, error) {
	lens := make([]int, N)
	for n := 0; n < N; n++ {
		L := 0
		for t := 0; t < T; t++ {
			switch mk := mask[n*T+t]; {
			case mk == 1 && L == t:
				L++
			case mk == 0:
			default:
				return nil, fmt.Errorf("sequence %d, position %d: mask %g (want ones then zeros: right padding only)", n, t, mk)
			}
		}
		if L == 0 {
			return nil, fmt.Errorf("sequence %d has no tokens", n)
		}
		lens[n] = L
	}
	return lens, nil
}

// layerActs is what one layer's backward needs from its forward: what
// the shared layer forward (llama.LayerForward) writes, and attention's
// probabilities.
type layerActs struct {
	llama.LayerActs
	att []float32
}

// Acts holds one forward pass's activations. It belongs to the Model that
// made it and is overwritten by the next Forward.
type Acts struct {
	N, T   int
	ctx    context.Context // the batch's (Batch.Ctx)
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
	C, D := cfg.HiddenSize, cfg.HeadDim()
	a.N, a.T, a.ids, a.lens, a.inputs, a.ctx = b.N, b.T, b.IDs, lens, b.Inputs != nil, b.Ctx
	if len(a.xs) != len(m.Layers) {
		a.xs = make([][]float32, len(m.Layers))
	}
	for l := range a.xs {
		a.xs[l] = ops.Grow(a.xs[l], rows*C)
	}
	nla := len(m.Layers)
	if m.Recompute {
		nla = min(nla, 1)
		a.tmp = ops.Grow(a.tmp, rows*C)
	}
	if len(a.layers) != nla {
		a.layers = make([]layerActs, nla)
	}
	for l := range a.layers {
		la := &a.layers[l]
		la.Grow(m.Model, l, rows) // every layer has the same LoRA targets
		la.att = ops.Grow(la.att, m.attention(b.N, b.T).AttSize())
	}
	a.last, a.rstdF, a.Hidden = ops.Grow(a.last, rows*C), ops.Grow(a.rstdF, rows), ops.Grow(a.Hidden, rows*C)
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
	if len(m.Layers) > 0 {
		x = a.xs[0]
	}
	if b.Inputs != nil {
		copy(x, b.Inputs)
	} else {
		m.EmbedTokens(x, b.IDs)
	}
	for l := range m.Layers {
		if err := stopped(b.Ctx); err != nil {
			return nil, err
		}
		next := a.last
		if l+1 < len(m.Layers) {
			next = a.xs[l+1]
		}
		m.layerForward(l, a, next)
	}
	ops.RMSNormForward(a.Hidden, a.rstdF, a.last, m.FinalNorm().W, rows, C, eps, th)
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
	la := a.layerActs(l)
	la.X = a.xs[l]
	th := m.threads()
	m.LayerForward(l, &la.LayerActs, out, llama.LayerPass{Rows: a.N * a.T,
		Rope: func(x []float32, heads int) { m.rope.Forward(x, a.N*a.T, heads, th) },
		Attend: func(la2 *llama.LayerActs) {
			m.attention(a.N, a.T).Forward(la2.Ctx, la.att, la2.Q, la2.K, la2.V, a.lens, th)
		}})
}

// Backward accumulates into every unfrozen parameter's G the gradient of
// the loss given dHidden = ∂loss/∂Hidden (N×T×C, zero at padded
// positions). a must be the latest Forward of this model. It stops early
// with the error of the batch's context (Batch.Ctx) once that is done.
func (m *Model) Backward(a *Acts, dHidden []float32) error {
	cfg := &m.Cfg
	rows, C, F, D := a.N*a.T, cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	th := m.threads()
	att := m.attention(a.N, a.T)

	// dx is ∂/∂ the residual stream, dn ∂/∂ a norm's output.
	a.dx, a.dh, a.dn = ops.Grow(a.dx, rows*C), ops.Grow(a.dh, rows*C), ops.Grow(a.dn, rows*C)
	a.dact, a.dg, a.du = ops.Grow(a.dact, rows*F), ops.Grow(a.dg, rows*F), ops.Grow(a.du, rows*F)
	a.dctx, a.dq = ops.Grow(a.dctx, rows*H*D), ops.Grow(a.dq, rows*H*D)
	a.dk, a.dv = ops.Grow(a.dk, rows*KV*D), ops.Grow(a.dv, rows*KV*D)
	if cfg.QKNorm() {
		a.dqraw, a.dkraw = ops.Grow(a.dqraw, rows*H*D), ops.Grow(a.dkraw, rows*KV*D)
	}
	dx, dh, dn, dact, dg, du := a.dx, a.dh, a.dn, a.dact, a.dg, a.du
	dctx, dq, dk, dv, dqraw, dkraw := a.dctx, a.dq, a.dk, a.dv, a.dqraw, a.dkraw
	clear(dx)
	ops.RMSNormBackward(dx, m.FinalNorm().Grad(), dHidden, a.last, m.FinalNorm().W, a.rstdF, rows, C, th)
	for l := len(m.Layers) - 1; l >= 0; l-- {
		if err := stopped(a.ctx); err != nil {
			return err
		}
		if len(a.layers) == 1 && l < len(m.Layers)-1 {
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
		ly, la := &m.Layers[l], a.layerActs(l)
		// out = h + down(silu(gate(xn2))·up(xn2)), xn2 = norm2(h)
		copy(dh, dx)
		clear(dact)
		ly.Down().Backward(dact, dx, la.Act, la.XA[6], rows, th)
		clear(dg)
		clear(du)
		ops.SwiGLUBackward(dg, du, dact, la.G, la.U, th)
		clear(dn)
		ly.Gate().Backward(dn, dg, la.XN2, la.XA[4], rows, th)
		ly.Up().Backward(dn, du, la.XN2, la.XA[5], rows, th)
		ops.RMSNormBackward(dh, ly.LN2.Grad(), dn, la.H, ly.LN2.W, la.Rstd2, rows, C, th)
		if err := stopped(a.ctx); err != nil {
			return err
		}
		// h = x + o(attn(rope(q), rope(k), v)), q, k, v from xn1 = norm1(x)
		copy(dx, dh)
		clear(dctx)
		ly.O().Backward(dctx, dh, la.Ctx, la.XA[3], rows, th)
		clear(dq)
		clear(dk)
		clear(dv)
		att.Backward(dq, dk, dv, dctx, la.att, la.Q, la.K, la.V, a.lens, th)
		m.rope.Backward(dq, rows, H, th)
		m.rope.Backward(dk, rows, KV, th)
		clear(dn)
		if cfg.QKNorm() {
			clear(dqraw)
			clear(dkraw)
			ops.RMSNormBackward(dqraw, ly.QN.Grad(), dq, la.QRaw, ly.QN.W, la.QRstd, rows*H, D, th)
			ops.RMSNormBackward(dkraw, ly.KN.Grad(), dk, la.KRaw, ly.KN.W, la.KRstd, rows*KV, D, th)
			ly.Q().Backward(dn, dqraw, la.XN1, la.XA[0], rows, th)
			ly.K().Backward(dn, dkraw, la.XN1, la.XA[1], rows, th)
		} else {
			ly.Q().Backward(dn, dq, la.XN1, la.XA[0], rows, th)
			ly.K().Backward(dn, dk, la.XN1, la.XA[1], rows, th)
		}
		ly.V().Backward(dn, dv, la.XN1, la.XA[2], rows, th)
		ops.RMSNormBackward(dx, ly.LN1.Grad(), dn, la.X, ly.LN1.W, la.Rstd1, rows, C, th)
	}
	a.dEOS = a.dEOS[:0]         // consumed
	for r := 0; r < rows; r++ { // padded positions get no gradient
		if a.lens[r/a.T] <= r%a.T {
			clear(dx[r*C : r*C+C])
		}
	}
	if a.inputs {
		a.DInputs = ops.Grow(a.DInputs, rows*C)
		copy(a.DInputs, dx)
		return nil
	}
	m.EmbedBackward(a.ids, dx)
	return nil
}

// stopped is ctx's error, nil for a nil ctx or one not done.
func stopped(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// EmbedBackward adds d's rows (len(ids)×C) to the embedding gradient rows
// of ids, skipping negative ids (rows that were not token embeddings); a
// frozen embedding is left alone. Rows sharing a table row are added by
// one goroutine in a fixed order.
func (m *Model) EmbedBackward(ids []int32, d []float32) {
	ops.ScatterAddRows(m.Embedding().Grad(), d, ids, m.Cfg.HiddenSize)
}

func (m *Model) threads() int {
	if m.Threads > 0 {
		return m.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// Pooling modes (the manifest's names).
const (
	PoolMean = ops.PoolMean
	PoolLast = ops.PoolLast
)

// Pool turns the hidden states into one vector per sequence (N×C): the
// last real token's (the EOS the tokenizer appended), the mean over the
// real tokens, or the trainable head's (whose mode it must be).
func (m *Model) Pool(a *Acts, mode string) ([]float32, error) {
	switch mode {
	case PoolLatent, PoolMultiLayer:
		if m.head == nil || m.head.mode != mode {
			return nil, fmt.Errorf("decoder: pooling %q needs that trainable head (EnableHead)", mode)
		}
		return m.headForward(a), nil
	case PoolMean, PoolLast:
		out := make([]float32, a.N*m.Cfg.HiddenSize)
		return out, ops.PoolForward(out, a.Hidden, nil, a.lens, a.N, a.T, m.Cfg.HiddenSize, mode)
	}
	return nil, fmt.Errorf("decoder: pooling %q not supported (want %s, %s, %s or %s)", mode, PoolMean, PoolLast, PoolLatent, PoolMultiLayer)
}

// PoolBackward adds to dHidden (N×T×C) the gradient given dPooled (N×C)
// (and a head's parameter gradients; a multilayer head's gradients of the
// inner layers' outputs wait in a for Backward).
func (m *Model) PoolBackward(a *Acts, mode string, dPooled, dHidden []float32) {
	if mode == PoolLatent || mode == PoolMultiLayer {
		m.headBackward(a, dPooled, dHidden)
		return
	}
	ops.PoolBackward(dHidden, dPooled, nil, a.lens, a.N, a.T, m.Cfg.HiddenSize, mode)
}

// Pass is b through m pooled by pooling (PoolLast, PoolMean or the head's
// mode): what the contrastive step runs.
func (m *Model) Pass(b *Batch, pooling string) objective.Pass {
	return objective.NewPass(m, b, pooling)
}

// HiddenLen is the length of the last hidden state (N×T×C).
func (a *Acts) HiddenLen() int { return len(a.Hidden) }
