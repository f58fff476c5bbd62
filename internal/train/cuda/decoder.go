package cuda

import (
	"errors"
	"fmt"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/model"
)

// Decoder is a Llama-family decoder (Llama, Mistral, Qwen2's QKV biases,
// Qwen3's q/k norms) resident on a Device, the GPU twin of
// train/decoder.Model: under LoRA the frozen base in float32 and the LoRA
// factors trained, or fully fine-tuned (every weight, gain, bias and the
// token embedding trained; an untied lm_head, which an embedder does not
// use, stays on the host), the same ops in the same order as its Forward
// and Backward — every layer's activations held, or, with the model's
// Recompute (gradient checkpointing), one layer's, each layer but the last
// run forward again from its kept input before its backward — with
// last-token or mean pooling or a trainable head's input. The contrastive
// loss runs on the host, as for Encoder. Not safe for concurrent use.
type Decoder struct {
	d   *Device
	cfg model.Config
	paramSet
	causal      bool
	recompute   bool
	embed, norm *Buffer
	dembed      *Buffer // the trained embedding's gradient, else nil
	dnorm       *Buffer // the trained final norm gain's, else nil
	layers      []decLayer
	weights     []*Buffer // the frozen base, for Close

	// the rotary tables of the last T
	cosT  *Buffer
	sinT  *Buffer
	ropeT int

	// the batch and its activations, sized for capNT rows (capAtt
	// attention probabilities)
	N, T            int
	hostLens        []int32 // the last batch's lengths
	byIDs           bool    // the last batch gave token ids (not inputs)
	capNT, capAtt   int
	ids, mask, lens *Buffer
	xs              []*Buffer // each layer's input, then the last output
	acts            []decActs // each layer's, or under recompute the one layer's at hand
	recOut          *Buffer   // under recompute, a layer's output recomputed (discarded)
	hidden, rstdF   *Buffer
	dx, dh, dn      *Buffer
	dact, dg, du    *Buffer
	dctx, dq, dk    *Buffer
	dv, dqraw       *Buffer
	dkraw, dhid     *Buffer
	dxa             *Buffer
	pooled, dpl     *Buffer
	bufs            []*Buffer // the activations, for reshapes and Close
}

type decLayer struct {
	ln1, ln2, qn, kn     *Buffer
	dln1, dln2, dqn, dkn *Buffer        // the gains' gradients when trained, else nil
	proj                 [7]linearLayer // q, k, v, o, gate, up, down
}

type decActs struct {
	xn1, rstd1, qraw, kraw, qrstd, krstd *Buffer
	q, k, v, att, ctx, h, xn2, rstd2     *Buffer
	g, u, act                            *Buffer
	xa                                   [7]*Buffer
}

// NewDecoder uploads a decoder (m.DeviceLayout): its frozen weights
// widened to float32, its trained ones — the LoRA factors, or under full
// fine-tuning every weight — as Params named as on the host.
func NewDecoder(d *Device, m *decoder.Model) (*Decoder, error) {
	lo, err := m.DeviceLayout()
	if err != nil {
		return nil, err
	}
	cfg := m.Cfg
	if len(lo.Layers) == 0 {
		return nil, errors.New("cuda: a decoder without layers")
	}
	c := &Decoder{d: d, cfg: cfg, causal: lo.Causal, recompute: lo.Recompute, paramSet: paramSet{dev: d, byName: map[string]*Param{}}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	train := func(p *ops.Param) (*Param, error) {
		q, err := newParam(d, p.Name, p.W, p.NoDecay)
		if err == nil {
			c.byName[q.Name] = q // Params, in the host's order, below
		}
		return q, err
	}
	// up uploads a weight: frozen, or trained with its gradient.
	up := func(p *ops.Param) (w, g *Buffer, err error) {
		switch {
		case p == nil:
			return nil, nil, nil
		case p.Frozen:
			if w, err = d.NewF32(p.Floats()); err == nil {
				c.weights = append(c.weights, w)
			}
			return w, nil, err
		}
		q, err := train(p)
		if err != nil {
			return nil, nil, err
		}
		return q.W, q.G, nil
	}
	if c.embed, c.dembed, err = up(lo.Embed); err != nil {
		return nil, err
	}
	if c.norm, c.dnorm, err = up(lo.Norm); err != nil {
		return nil, err
	}
	for _, ly := range lo.Layers {
		var dl decLayer
		for _, pr := range []struct {
			dst, grad **Buffer
			src       *ops.Param
		}{{&dl.ln1, &dl.dln1, ly.LN1}, {&dl.ln2, &dl.dln2, ly.LN2}, {&dl.qn, &dl.dqn, ly.QN}, {&dl.kn, &dl.dkn, ly.KN}} {
			if *pr.dst, *pr.grad, err = up(pr.src); err != nil {
				return nil, err
			}
		}
		for i, lin := range ly.Proj {
			dp := linearLayer{in: lin.In, out: lin.Out}
			if dp.w, dp.gw, err = up(lin.W); err != nil {
				return nil, err
			}
			if dp.bias, dp.gb, err = up(lin.Bias); err != nil {
				return nil, err
			}
			if l := lin.LoRA; l != nil {
				if dp.a, err = train(l.A); err != nil {
					return nil, err
				}
				if dp.b, err = train(l.B); err != nil {
					return nil, err
				}
				dp.rank, dp.scale = l.Rank, l.Scale
			}
			dl.proj[i] = dp
		}
		c.layers = append(c.layers, dl)
	}
	// Params in the host model's order (its checkpoint and optimizer order).
	for _, p := range m.Params {
		if q := c.byName[p.Name]; q != nil {
			c.Params = append(c.Params, q)
		}
	}
	ok = true
	return c, nil
}

// Close frees the decoder's device memory.
func (c *Decoder) Close() error {
	var errs []error
	for _, b := range append(c.weights, c.bufs...) {
		errs = append(errs, b.Free())
	}
	for _, p := range c.byName { // every trained parameter, Params or not yet
		errs = append(errs, p.free())
	}
	errs = append(errs, c.cosT.Free(), c.sinT.Free())
	c.weights, c.bufs, c.cosT, c.sinT = nil, nil, nil, nil
	return errors.Join(errs...)
}

// shape (re)allocates the activations when the batch outgrows them.
func (c *Decoder) shape(N, T int) error {
	cfg := &c.cfg
	C, F, D := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	NT, att := N*T, N*H*T*T
	if NT <= c.capNT && att <= c.capAtt {
		return nil
	}
	for _, b := range c.bufs {
		if err := b.Free(); err != nil {
			return err
		}
	}
	c.bufs, c.capNT, c.capAtt = nil, 0, 0
	var err error
	get := func(n int) *Buffer {
		if err != nil || n == 0 {
			return nil
		}
		var b *Buffer
		if b, err = c.d.AllocF32(n); err == nil {
			c.bufs = append(c.bufs, b)
		}
		return b
	}
	qk := func(n int) int {
		if cfg.QKNorm() {
			return n
		}
		return 0
	}
	c.ids, c.mask, c.lens = get(NT), get(NT), get(N)
	c.xs = make([]*Buffer, len(c.layers)+1)
	for l := range c.xs {
		c.xs[l] = get(NT * C)
	}
	c.acts = make([]decActs, len(c.layers))
	if c.recompute {
		c.acts = c.acts[:1]
		c.recOut = get(NT * C)
	}
	for l := range c.acts {
		a, ly := &c.acts[l], &c.layers[l]
		a.xn1, a.rstd1 = get(NT*C), get(NT)
		a.qraw, a.kraw, a.qrstd, a.krstd = get(qk(NT*H*D)), get(qk(NT*KV*D)), get(qk(NT*H)), get(qk(NT*KV))
		a.q, a.k, a.v = get(NT*H*D), get(NT*KV*D), get(NT*KV*D)
		a.att, a.ctx = get(att), get(NT*H*D)
		a.h, a.xn2, a.rstd2 = get(NT*C), get(NT*C), get(NT)
		a.g, a.u, a.act = get(NT*F), get(NT*F), get(NT*F)
		for i, p := range ly.proj {
			if p.a != nil {
				a.xa[i] = get(NT * p.rank)
			}
		}
	}
	maxRank := 1
	for _, p := range c.layers[0].proj {
		maxRank = max(maxRank, p.rank)
	}
	c.hidden, c.rstdF = get(NT*C), get(NT)
	c.dx, c.dh, c.dn, c.dhid = get(NT*C), get(NT*C), get(NT*C), get(NT*C)
	c.dact, c.dg, c.du = get(NT*F), get(NT*F), get(NT*F)
	c.dctx, c.dq, c.dk, c.dv = get(NT*H*D), get(NT*H*D), get(NT*KV*D), get(NT*KV*D)
	c.dqraw, c.dkraw = get(qk(NT*H*D)), get(qk(NT*KV*D))
	c.dxa = get(NT * maxRank)
	c.pooled, c.dpl = get(N*C), get(N*C)
	if err != nil {
		return err
	}
	c.capNT, c.capAtt = NT, att
	return nil
}

func (c *Decoder) attn() Attn {
	return Attn{N: c.N, T: c.T, H: c.cfg.NumAttentionHeads, KV: c.cfg.KVHeads(), D: c.cfg.HeadDim(), Causal: c.causal}
}

// Forward runs the decoder over N right-padded sequences of T tokens
// (types are ignored: train.DeviceEncoder's signature); the final hidden
// state stays on the device.
func (c *Decoder) Forward(ids, _ []int32, mask []float32, N, T int) error {
	if N <= 0 || T <= 0 || len(ids) != N*T || len(mask) != N*T {
		return fmt.Errorf("cuda: batch N=%d T=%d does not match its %d ids, %d mask values", N, T, len(ids), len(mask))
	}
	for i, id := range ids {
		if id < 0 || int(id) >= c.cfg.VocabSize {
			return fmt.Errorf("cuda: token %d at position %d outside the vocabulary of %d", id, i, c.cfg.VocabSize)
		}
	}
	return c.forward(ids, nil, mask, N, T)
}

// ForwardInputs is Forward over input embeddings (N×T×C, transformers'
// inputs_embeds) instead of token ids: how the papers' techniques put
// their own vectors into the decoder. Backward then leaves ∂loss/∂inputs
// for DInputs.
func (c *Decoder) ForwardInputs(inputs, mask []float32, N, T int) error {
	if N <= 0 || T <= 0 || len(inputs) != N*T*c.cfg.HiddenSize || len(mask) != N*T {
		return fmt.Errorf("cuda: batch N=%d T=%d C=%d does not match its %d input values, %d mask values", N, T, c.cfg.HiddenSize, len(inputs), len(mask))
	}
	return c.forward(nil, inputs, mask, N, T)
}

// forward runs a batch given by ids or by inputs.
func (c *Decoder) forward(ids []int32, inputs, mask []float32, N, T int) error {
	cfg := &c.cfg
	if T > cfg.MaxPositionEmbeddings {
		return fmt.Errorf("cuda: sequence length %d exceeds max_position_embeddings %d", T, cfg.MaxPositionEmbeddings)
	}
	lens := make([]int32, N)
	for n := 0; n < N; n++ {
		for t := 0; t < T && mask[n*T+t] != 0; t++ {
			lens[n] = int32(t + 1)
		}
		if lens[n] == 0 {
			return fmt.Errorf("cuda: sequence %d has no tokens", n)
		}
	}
	if err := c.shape(N, T); err != nil {
		return err
	}
	c.N, c.T = N, T
	C, D := cfg.HiddenSize, cfg.HeadDim()
	if c.ropeT != T {
		rope := ops.NewRope(T, D, cfg.RopeTheta)
		if err := errors.Join(c.cosT.Free(), c.sinT.Free()); err != nil {
			return err
		}
		c.cosT, c.sinT, c.ropeT = nil, nil, 0
		var err error
		if c.cosT, err = c.d.NewF32(rope.Cos); err != nil {
			return err
		}
		if c.sinT, err = c.d.NewF32(rope.Sin); err != nil {
			return err
		}
		c.ropeT = T
	}
	if err := errors.Join(Upload(c.mask, mask), Upload(c.lens, lens)); err != nil {
		return err
	}
	c.hostLens, c.byIDs = lens, inputs == nil
	d, rows := c.d, N*T
	eps := float32(cfg.RMSNormEps)
	if inputs != nil {
		if err := Upload(c.xs[0], inputs); err != nil {
			return err
		}
	} else if err := errors.Join(Upload(c.ids, ids), d.GatherRows(c.xs[0], c.ids, c.embed, rows, C, cfg.VocabSize)); err != nil {
		return err
	}
	for l := range c.layers {
		if err := c.layerForward(l, c.layerActs(l), c.xs[l], c.xs[l+1]); err != nil {
			return err
		}
	}
	return d.RMSNormForward(c.hidden, c.rstdF, c.xs[len(c.layers)], c.norm, rows, C, eps)
}

// layerActs is where layer l's forward writes its activations and its
// backward reads them: its own set, or under recompute the one set every
// layer shares.
func (c *Decoder) layerActs(l int) *decActs {
	if c.recompute {
		return &c.acts[0]
	}
	return &c.acts[l]
}

// layerForward runs layer l from its input x into out, keeping its
// activations in a.
func (c *Decoder) layerForward(l int, a *decActs, x, out *Buffer) error {
	cfg, d := &c.cfg, c.d
	rows, T, C, D := c.N*c.T, c.T, cfg.HiddenSize, cfg.HeadDim()
	H, KV, F := cfg.NumAttentionHeads, cfg.KVHeads(), cfg.IntermediateSize
	eps := float32(cfg.RMSNormEps)
	ly, p := &c.layers[l], &c.layers[l].proj
	steps := []func() error{
		func() error { return d.RMSNormForward(a.xn1, a.rstd1, x, ly.ln1, rows, C, eps) },
	}
	if cfg.QKNorm() {
		steps = append(steps,
			func() error { return d.linearForward(&p[0], a.qraw, a.xn1, a.xa[0], rows) },
			func() error { return d.linearForward(&p[1], a.kraw, a.xn1, a.xa[1], rows) },
			func() error { return d.RMSNormForward(a.q, a.qrstd, a.qraw, ly.qn, rows*H, D, eps) },
			func() error { return d.RMSNormForward(a.k, a.krstd, a.kraw, ly.kn, rows*KV, D, eps) })
	} else {
		steps = append(steps,
			func() error { return d.linearForward(&p[0], a.q, a.xn1, a.xa[0], rows) },
			func() error { return d.linearForward(&p[1], a.k, a.xn1, a.xa[1], rows) })
	}
	steps = append(steps,
		func() error { return d.linearForward(&p[2], a.v, a.xn1, a.xa[2], rows) },
		func() error { return d.Rope(a.q, c.cosT, c.sinT, rows, T, H, D, 1) },
		func() error { return d.Rope(a.k, c.cosT, c.sinT, rows, T, KV, D, 1) },
		func() error { return d.AttentionGQAForward(a.ctx, a.att, a.q, a.k, a.v, c.mask, c.lens, c.attn()) },
		func() error { return d.linearForward(&p[3], a.h, a.ctx, a.xa[3], rows) },
		func() error { return d.AddInPlace(a.h, x, rows*C) },
		func() error { return d.RMSNormForward(a.xn2, a.rstd2, a.h, ly.ln2, rows, C, eps) },
		func() error { return d.linearForward(&p[4], a.g, a.xn2, a.xa[4], rows) },
		func() error { return d.linearForward(&p[5], a.u, a.xn2, a.xa[5], rows) },
		func() error { return d.SwiGLUForward(a.act, a.g, a.u, rows*F) },
		func() error { return d.linearForward(&p[6], out, a.act, a.xa[6], rows) },
		func() error { return d.AddInPlace(out, a.h, rows*C) })
	for _, f := range steps {
		if err := f(); err != nil {
			return fmt.Errorf("cuda: decoder layer %d: %w", l, err)
		}
	}
	return nil
}

// Hidden is the last Forward's final hidden state, N×T×C on the device.
func (c *Decoder) Hidden() *Buffer { return c.hidden }

// LastHidden copies the last Forward's final hidden state (N×T×C) to the
// host.
func (c *Decoder) LastHidden() ([]float32, error) {
	if c.N == 0 {
		return nil, errors.New("cuda: LastHidden before Forward")
	}
	out := make([]float32, c.N*c.T*c.cfg.HiddenSize)
	return out, Download(out, c.hidden)
}

// DInputs is, after Backward, ∂loss/∂ the first layer's input (the
// inputs of ForwardInputs, or the token rows), N×T×C on the host, zero at
// padded positions (decoder.Acts.DInputs).
func (c *Decoder) DInputs() ([]float32, error) {
	if c.N == 0 {
		return nil, errors.New("cuda: DInputs before Backward")
	}
	C := c.cfg.HiddenSize
	out := make([]float32, c.N*c.T*C)
	if err := Download(out, c.dx); err != nil {
		return nil, err
	}
	for n, L := range c.hostLens {
		clear(out[(n*c.T+int(L))*C : (n+1)*c.T*C])
	}
	return out, nil
}

// Pool pools the last Forward's hidden state (decoder.PoolLast: the EOS
// the tokenizer appended; decoder.PoolMean) into N×C on the host. For a
// trainable head (decoder.PoolLatent, decoder.PoolMultiLayer), which runs
// on the host, it returns the head's input instead, laid out as
// decoder.Model.HeadForward reads it: the final hidden state (N×T×C), or
// each layer's output at each sequence's last token (L×N×C, the last
// layer's after the final norm).
func (c *Decoder) Pool(mode string) ([]float32, error) {
	if c.N == 0 {
		return nil, errors.New("cuda: Pool before Forward")
	}
	C, L := c.cfg.HiddenSize, len(c.layers)
	NC := c.N * C
	switch mode {
	case decoder.PoolLast, decoder.PoolMean:
		if err := c.d.Pool(c.pooled, c.hidden, c.mask, c.lens, c.N, c.T, C, mode); err != nil {
			return nil, err
		}
		out := make([]float32, NC)
		return out, Download(out, c.pooled)
	case decoder.PoolLatent:
		return c.LastHidden()
	case decoder.PoolMultiLayer:
		out := make([]float32, L*NC)
		for l := 0; l < L; l++ {
			src := c.hidden
			if l < L-1 {
				src = c.xs[l+1]
			}
			if err := c.d.Pool(c.pooled, src, c.mask, c.lens, c.N, c.T, C, decoder.PoolLast); err != nil {
				return nil, err
			}
			if err := Download(out[l*NC:(l+1)*NC], c.pooled); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cuda: decoder pooling %q (want %s, %s, %s or %s)", mode, decoder.PoolLast, decoder.PoolMean, decoder.PoolLatent, decoder.PoolMultiLayer)
}

// Backward adds to the trained weights' gradients that of the loss given
// dPooled = ∂loss/∂(pooled), N×C on the host — for a trainable head's mode,
// ∂loss/∂ the head's input, laid out as Pool returned it.
func (c *Decoder) Backward(mode string, dPooled []float32) error {
	cfg := &c.cfg
	if c.N == 0 {
		return errors.New("cuda: Backward before Forward")
	}
	N, T, C := c.N, c.T, cfg.HiddenSize
	D, H, KV, F := cfg.HeadDim(), cfg.NumAttentionHeads, cfg.KVHeads(), cfg.IntermediateSize
	rows, NC, L := N*T, N*C, len(c.layers)
	want := NC
	switch mode {
	case decoder.PoolLatent:
		want = rows * C
	case decoder.PoolMultiLayer:
		want = L * NC
	}
	if len(dPooled) != want {
		return fmt.Errorf("cuda: backward (%s) needs %d gradients, got %d", mode, want, len(dPooled))
	}
	d := c.d
	zero := func(b *Buffer) func() error { return b.Zero }
	run := func(fs ...func() error) error {
		for _, f := range fs {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
	// dhid = ∂loss/∂hidden; eos, for a multilayer head, the inner layers'
	// outputs' share at the last tokens, added as the loop reaches them.
	var eos []float32
	start := []func() error{func() error { return Upload(c.dhid, dPooled) }}
	if mode != decoder.PoolLatent {
		last, pool := dPooled, mode
		if mode == decoder.PoolMultiLayer {
			eos, last, pool = dPooled[:(L-1)*NC], dPooled[(L-1)*NC:], decoder.PoolLast
		}
		start = []func() error{
			func() error { return Upload(c.dpl, last) },
			zero(c.dhid),
			func() error { return d.PoolBackward(c.dhid, c.dpl, c.mask, c.lens, N, T, C, pool) },
		}
	}
	if err := run(append(start,
		zero(c.dx),
		func() error {
			return d.RMSNormBackward(c.dx, c.dnorm, c.dhid, c.xs[L], c.norm, c.rstdF, rows, C)
		})...); err != nil {
		return err
	}
	for l := len(c.layers) - 1; l >= 0; l-- {
		ly, a, x := &c.layers[l], c.layerActs(l), c.xs[l]
		p := &ly.proj
		if c.recompute && l < L-1 { // the last layer's are still there from the forward
			if err := c.layerForward(l, a, x, c.recOut); err != nil {
				return fmt.Errorf("cuda: recomputing: %w", err)
			}
		}
		if eos != nil && l < L-1 { // the head read this layer's output
			if err := run(
				func() error { return Upload(c.dpl, eos[l*NC:(l+1)*NC]) },
				func() error { return d.PoolBackward(c.dx, c.dpl, c.mask, c.lens, N, T, C, decoder.PoolLast) }); err != nil {
				return err
			}
		}
		steps := []func() error{
			// out = h + down(silu(gate(xn2))·up(xn2)), xn2 = norm2(h)
			func() error { return c.dh.CopyFrom(c.dx) },
			zero(c.dact),
			func() error { return d.linearBackward(&p[6], c.dact, c.dx, a.act, a.xa[6], c.dxa, rows) },
			zero(c.dg), zero(c.du),
			func() error { return d.SwiGLUBackward(c.dg, c.du, c.dact, a.g, a.u, rows*F) },
			zero(c.dn),
			func() error { return d.linearBackward(&p[4], c.dn, c.dg, a.xn2, a.xa[4], c.dxa, rows) },
			func() error { return d.linearBackward(&p[5], c.dn, c.du, a.xn2, a.xa[5], c.dxa, rows) },
			func() error { return d.RMSNormBackward(c.dh, ly.dln2, c.dn, a.h, ly.ln2, a.rstd2, rows, C) },
			// h = x + o(attn(rope(q), rope(k), v)), q, k, v from xn1 = norm1(x)
			func() error { return c.dx.CopyFrom(c.dh) },
			zero(c.dctx),
			func() error { return d.linearBackward(&p[3], c.dctx, c.dh, a.ctx, a.xa[3], c.dxa, rows) },
			zero(c.dq), zero(c.dk), zero(c.dv),
			func() error {
				return d.AttentionGQABackward(c.dq, c.dk, c.dv, c.dctx, a.att, a.q, a.k, a.v, c.attn())
			},
			func() error { return d.Rope(c.dq, c.cosT, c.sinT, rows, T, H, D, -1) },
			func() error { return d.Rope(c.dk, c.cosT, c.sinT, rows, T, KV, D, -1) },
			zero(c.dn),
		}
		if cfg.QKNorm() {
			steps = append(steps, zero(c.dqraw), zero(c.dkraw),
				func() error { return d.RMSNormBackward(c.dqraw, ly.dqn, c.dq, a.qraw, ly.qn, a.qrstd, rows*H, D) },
				func() error { return d.RMSNormBackward(c.dkraw, ly.dkn, c.dk, a.kraw, ly.kn, a.krstd, rows*KV, D) },
				func() error { return d.linearBackward(&p[0], c.dn, c.dqraw, a.xn1, a.xa[0], c.dxa, rows) },
				func() error { return d.linearBackward(&p[1], c.dn, c.dkraw, a.xn1, a.xa[1], c.dxa, rows) })
		} else {
			steps = append(steps,
				func() error { return d.linearBackward(&p[0], c.dn, c.dq, a.xn1, a.xa[0], c.dxa, rows) },
				func() error { return d.linearBackward(&p[1], c.dn, c.dk, a.xn1, a.xa[1], c.dxa, rows) })
		}
		steps = append(steps,
			func() error { return d.linearBackward(&p[2], c.dn, c.dv, a.xn1, a.xa[2], c.dxa, rows) },
			func() error { return d.RMSNormBackward(c.dx, ly.dln1, c.dn, x, ly.ln1, a.rstd1, rows, C) })
		if err := run(steps...); err != nil {
			return fmt.Errorf("cuda: decoder layer %d backward: %w", l, err)
		}
	}
	// c.dx holds ∂loss/∂ the first layer's input (DInputs); a trained
	// embedding takes the token rows' share (padded rows skipped, as
	// decoder.Model.Backward does).
	if c.dembed == nil || !c.byIDs {
		return nil
	}
	return d.ScatterAddRows(c.dembed, c.dx, c.ids, c.mask, rows, C, cfg.VocabSize)
}
