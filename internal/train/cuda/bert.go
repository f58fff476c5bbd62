package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/model"
)

// EncoderConfig is the part of a BERT config.json the encoder needs.
type EncoderConfig struct {
	Vocab, Hidden, Layers, Heads, FF, MaxPos, TypeVocab int
	Act                                                 string  // hidden_act
	Eps                                                 float32 // layer_norm_eps
}

// Param is one weight tensor on the device: float32 master weights, their
// gradient and AdamW moments (allocated at the first step).
type Param struct {
	Name    string // Hugging Face name
	N       int    // elements
	W, G    *Buffer
	m, v    *Buffer
	NoDecay bool // biases and LayerNorm, as train.Param
}

// Encoder is a BERT encoder resident on a Device, the GPU twin of
// bert.Model (forward, backward, pooling; every weight trained, or LoRA
// factors over a frozen encoder: EnableLoRA): the same ops in the same
// order, with cuBLAS products in place of tensor.Gemm. The losses on the
// pooled N×C embeddings (and a cross-encoder's head) stay on the host: they
// are a few thousand numbers. Not safe for concurrent use.
type Encoder struct {
	d                         *Device
	Cfg                       EncoderConfig
	paramSet                  // in train.NewModel's order, without the unused pooler
	layers                    []encLayer
	wte, wpe, wtt, elnw, elnb *Param
	// lora adapts weights with trained factors (EnableLoRA); frozen: the
	// encoder's own weights get no gradient products.
	lora   map[*Param]*encLoRA
	frozen bool
	dxa    *Buffer  // NT×the largest rank: the LoRA backward's scratch
	owned  []*Param // every parameter uploaded (trained or frozen), for Close

	// the batch and its activations, sized for capN·capT rows
	N, T                        int
	ids, types, mask, lens      *Buffer
	emb, x0, embMean, embRstd   *Buffer
	acts                        []encActs
	g                           *Buffer // N·T×FF activation output (recomputed in backward)
	dx, dres, dln1, dctx        *Buffer
	dq, dk, dv, dg, pooled, dpl *Buffer
	bufs                        []*Buffer // the activations above, for reshapes and Close
}

// encLoRA is a LoRA pair on one weight (train's ops.LoRA): out +=
// scale·(x·Aᵀ)·Bᵀ, with xa = x·Aᵀ kept for the backward.
type encLoRA struct {
	a, b  *Param
	rank  int
	scale float32
	xa    *Buffer // NT×rank
}

// linear is weight w and bias b (in → out features) as a linearLayer:
// trained, or frozen under LoRA with w's factors, if any, and their xa.
func (e *Encoder) linear(w, b *Param, in, out int) (linearLayer, *Buffer) {
	l := linearLayer{w: w.W, bias: b.W, in: in, out: out}
	if !e.frozen {
		l.gw, l.gb = w.G, b.G
	}
	lp := e.lora[w]
	if lp == nil {
		return l, nil
	}
	l.a, l.b, l.rank, l.scale = lp.a, lp.b, lp.rank, lp.scale
	return l, lp.xa
}

type encLayer struct {
	q, qb, k, kb, v, vb, ao, aob, ln1w, ln1b, fi, fib, fo, fob, ln2w, ln2b *Param
}

type encActs struct {
	q, k, v, ctx, att, res1, ln1, ln1Mean, ln1Rstd, ff1, res2, out, ln2Mean, ln2Rstd *Buffer
}

// NewEncoder uploads weights (Hugging Face names, prefix "" or "bert.")
// to the device.
func NewEncoder(d *Device, cfg EncoderConfig, prefix string, weights map[string][]float32) (e *Encoder, err error) {
	if cfg.Hidden <= 0 || cfg.Heads <= 0 || cfg.Hidden%cfg.Heads != 0 || cfg.Layers <= 0 || cfg.FF <= 0 {
		return nil, fmt.Errorf("cuda: encoder config %+v: need positive sizes and heads dividing hidden", cfg)
	}
	if _, err := actCode(cfg.Act); err != nil {
		return nil, err
	}
	e = &Encoder{d: d, Cfg: cfg, paramSet: paramSet{dev: d, byName: map[string]*Param{}}}
	defer func() {
		if err != nil {
			e.Close()
			e = nil
		}
	}()
	C, FF := cfg.Hidden, cfg.FF
	add := func(name string, n int) *Param {
		if err != nil {
			return nil
		}
		w, ok := weights[prefix+name]
		if !ok {
			err = fmt.Errorf("cuda: encoder weights lack %s%s", prefix, name)
			return nil
		}
		if len(w) != n {
			err = fmt.Errorf("cuda: %s%s has %d values, want %d", prefix, name, len(w), n)
			return nil
		}
		p, err2 := newParam(d, prefix+name, w, strings.HasSuffix(name, ".bias") || strings.Contains(name, "LayerNorm"))
		if err = err2; err != nil {
			return nil
		}
		e.owned = append(e.owned, p)
		e.add(p)
		return p
	}
	e.wte = add(arch.WordEmbeddings, cfg.Vocab*C)
	e.wpe = add(arch.PositionEmbeddings, cfg.MaxPos*C)
	e.wtt = add(arch.TokenTypeEmbeddings, cfg.TypeVocab*C)
	e.elnw = add(arch.EmbeddingsNorm+".weight", C)
	e.elnb = add(arch.EmbeddingsNorm+".bias", C)
	layout := arch.EncoderOf(&model.Config{HiddenSize: C, IntermediateSize: FF, NumAttentionHeads: cfg.Heads})
	for l := 0; l < cfg.Layers; l++ {
		var ly encLayer
		slot := map[arch.Role][2]**Param{ // weight (or gain), bias; filled in the checkpoint's order
			arch.EncQuery: {&ly.q, &ly.qb}, arch.EncKey: {&ly.k, &ly.kb}, arch.EncValue: {&ly.v, &ly.vb},
			arch.EncAttnOut: {&ly.ao, &ly.aob}, arch.EncAttnNorm: {&ly.ln1w, &ly.ln1b},
			arch.EncInter: {&ly.fi, &ly.fib}, arch.EncOut: {&ly.fo, &ly.fob}, arch.EncOutNorm: {&ly.ln2w, &ly.ln2b}}
		arch.Bind(layout, slot, func(w arch.Weight) *Param {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			return add(arch.EncoderLayer(l)+w.Name, n)
		})
		e.layers = append(e.layers, ly)
	}
	return e, err
}

// LoRAFactors is a LoRA pair for the encoder weight Weight (its name with
// the encoder's prefix, out×in): A (Rank×in) and B (out×Rank), named AName
// and BName, the product scaled by Scale (α/r).
type LoRAFactors struct {
	Weight, AName, BName string
	A, B                 []float32
	Rank                 int
	Scale                float32
}

// EnableLoRA freezes every weight of the encoder and trains the given
// LoRA factors instead (bert.Model.EnableLoRA's): Params and Param then
// hold the factors only, in the order given. It must come before the
// first Forward. The frozen weights' gradient buffers are freed: a
// frozen LayerNorm's backward writes the input's gradient only.
func (e *Encoder) EnableLoRA(fs []LoRAFactors) error {
	if e.lora != nil || len(e.bufs) != 0 {
		return errors.New("cuda: EnableLoRA once, before the first Forward")
	}
	base := e.byName
	for _, p := range base {
		if err := p.G.Free(); err != nil {
			return err
		}
		p.G = nil
	}
	e.Params, e.byName, e.frozen, e.lora = nil, map[string]*Param{}, true, map[*Param]*encLoRA{}
	up := func(name string, w []float32) (*Param, error) {
		p, err := newParam(e.d, name, w, false)
		if err == nil {
			e.owned = append(e.owned, p)
			e.add(p)
		}
		return p, err
	}
	for _, f := range fs {
		w := base[f.Weight]
		switch {
		case w == nil:
			return fmt.Errorf("cuda: LoRA on %s: the encoder has no such weight", f.Weight)
		case e.lora[w] != nil:
			return fmt.Errorf("cuda: LoRA on %s twice", f.Weight)
		case f.Rank <= 0 || len(f.A)%f.Rank != 0 || len(f.B)%f.Rank != 0 || (len(f.A)/f.Rank)*(len(f.B)/f.Rank) != w.N:
			return fmt.Errorf("cuda: LoRA on %s: factors of %d and %d values at rank %d do not fit its %d", f.Weight, len(f.A), len(f.B), f.Rank, w.N)
		}
		a, err := up(f.AName, f.A)
		if err != nil {
			return err
		}
		b, err := up(f.BName, f.B)
		if err != nil {
			return err
		}
		e.lora[w] = &encLoRA{a: a, b: b, rank: f.Rank, scale: f.Scale}
	}
	return nil
}

// Close frees the encoder's device memory.
func (e *Encoder) Close() error {
	var errs []error
	for _, b := range e.bufs {
		errs = append(errs, b.Free())
	}
	for _, p := range e.owned {
		errs = append(errs, p.free())
	}
	e.bufs, e.owned = nil, nil
	return errors.Join(errs...)
}

// alloc allocates n float32s owned by the encoder.
func (e *Encoder) alloc(n int) (*Buffer, error) {
	b, err := e.d.AllocF32(max(n, 1))
	if err == nil {
		e.bufs = append(e.bufs, b)
	}
	return b, err
}

// shape (re)allocates the activations when the batch shape changes.
func (e *Encoder) shape(N, T int) error {
	if N == e.N && T == e.T {
		return nil
	}
	// Free the old activations.
	for _, b := range e.bufs {
		if err := b.Free(); err != nil {
			return err
		}
	}
	e.bufs = nil
	e.N, e.T = 0, 0
	C, FF, H := e.Cfg.Hidden, e.Cfg.FF, e.Cfg.Heads
	NT := N * T
	var err error
	get := func(n int) *Buffer {
		if err != nil {
			return nil
		}
		var b *Buffer
		b, err = e.alloc(n)
		return b
	}
	e.ids, e.types, e.mask, e.lens = get(NT), get(NT), get(NT), get(N)
	e.emb, e.x0, e.embMean, e.embRstd = get(NT*C), get(NT*C), get(NT), get(NT)
	e.acts = make([]encActs, e.Cfg.Layers)
	for l := range e.acts {
		a := &e.acts[l]
		a.q, a.k, a.v, a.ctx = get(NT*C), get(NT*C), get(NT*C), get(NT*C)
		a.att = get(N * H * T * T)
		a.res1, a.ln1, a.ln1Mean, a.ln1Rstd = get(NT*C), get(NT*C), get(NT), get(NT)
		a.ff1 = get(NT * FF)
		a.res2, a.out, a.ln2Mean, a.ln2Rstd = get(NT*C), get(NT*C), get(NT), get(NT)
	}
	e.g, e.dg = get(NT*FF), get(NT*FF)
	e.dx, e.dres, e.dln1, e.dctx = get(NT*C), get(NT*C), get(NT*C), get(NT*C)
	e.dq, e.dk, e.dv = get(NT*C), get(NT*C), get(NT*C)
	e.pooled, e.dpl = get(N*C), get(N*C)
	maxRank := 0
	for _, lp := range e.lora {
		lp.xa = get(NT * lp.rank)
		maxRank = max(maxRank, lp.rank)
	}
	e.dxa = get(NT * maxRank)
	if err != nil {
		return err
	}
	e.N, e.T = N, T
	return nil
}

// Forward runs the encoder over N sequences of T tokens (ids, token types
// (nil: all 0), mask 1 for real tokens; right padding, as train.Batch).
// The last hidden state stays on the device: Hidden.
func (e *Encoder) Forward(ids, types []int32, mask []float32, N, T int) error {
	cfg := e.Cfg
	if N <= 0 || T <= 0 || len(ids) != N*T || len(mask) != N*T || (types != nil && len(types) != N*T) {
		return fmt.Errorf("cuda: batch N=%d T=%d does not match its %d ids, %d mask values", N, T, len(ids), len(mask))
	}
	if T > cfg.MaxPos {
		return fmt.Errorf("cuda: sequence length %d exceeds max_position_embeddings %d", T, cfg.MaxPos)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= cfg.Vocab || types != nil && (types[i] < 0 || int(types[i]) >= cfg.TypeVocab) {
			return fmt.Errorf("cuda: token %d at position %d (type %d) outside the vocabulary", id, i, typeAt(types, i))
		}
	}
	if err := e.shape(N, T); err != nil {
		return err
	}
	lens := make([]int32, N)
	for n := 0; n < N; n++ {
		for t := T - 1; t >= 0; t-- {
			if mask[n*T+t] != 0 {
				lens[n] = int32(t + 1)
				break
			}
		}
	}
	if types == nil {
		types = make([]int32, N*T)
	}
	d, C, FF, H := e.d, cfg.Hidden, cfg.FF, cfg.Heads
	NT := N * T
	errs := []error{Upload(e.ids, ids), Upload(e.types, types), Upload(e.mask, mask), Upload(e.lens, lens)}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	run := func(fs ...func() error) error {
		for _, f := range fs {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
	lin := func(w, b *Param, out, inp *Buffer, in, outC int) func() error {
		return func() error {
			l, xa := e.linear(w, b, in, outC)
			return d.linearForward(&l, out, inp, xa, NT)
		}
	}
	if err := run(
		func() error {
			return d.EmbeddingForward(e.emb, e.ids, e.types, e.wte.W, e.wpe.W, e.wtt.W, N, T, C, cfg.Vocab, cfg.TypeVocab)
		},
		func() error {
			return d.LayerNormForward(e.x0, e.embMean, e.embRstd, e.emb, e.elnw.W, e.elnb.W, NT, C, cfg.Eps)
		},
	); err != nil {
		return err
	}
	x := e.x0
	for l := range e.layers {
		ly, a := &e.layers[l], &e.acts[l]
		if err := run(
			lin(ly.q, ly.qb, a.q, x, C, C), lin(ly.k, ly.kb, a.k, x, C, C), lin(ly.v, ly.vb, a.v, x, C, C),
			func() error { return d.AttentionForward(a.ctx, a.att, a.q, a.k, a.v, e.mask, e.lens, N, T, C, H) },
			lin(ly.ao, ly.aob, a.res1, a.ctx, C, C),
			func() error { return d.AddInPlace(a.res1, x, NT*C) },
			func() error {
				return d.LayerNormForward(a.ln1, a.ln1Mean, a.ln1Rstd, a.res1, ly.ln1w.W, ly.ln1b.W, NT, C, cfg.Eps)
			},
			lin(ly.fi, ly.fib, a.ff1, a.ln1, C, FF),
			func() error { return d.Activation(cfg.Act, e.g, a.ff1, NT*FF) },
			lin(ly.fo, ly.fob, a.res2, e.g, FF, C),
			func() error { return d.AddInPlace(a.res2, a.ln1, NT*C) },
			func() error {
				return d.LayerNormForward(a.out, a.ln2Mean, a.ln2Rstd, a.res2, ly.ln2w.W, ly.ln2b.W, NT, C, cfg.Eps)
			},
		); err != nil {
			return fmt.Errorf("cuda: encoder layer %d: %w", l, err)
		}
		x = a.out
	}
	return nil
}

func typeAt(types []int32, i int) int32 {
	if types == nil {
		return 0
	}
	return types[i]
}

// Hidden is the last Forward's last hidden state, N×T×C on the device.
func (e *Encoder) Hidden() *Buffer {
	if len(e.acts) == 0 || e.N == 0 {
		return nil
	}
	return e.acts[len(e.acts)-1].out
}

// Pool pools the last Forward's hidden state ("mean", "cls", "lasttoken")
// and returns the N×C embeddings on the host.
func (e *Encoder) Pool(mode string) ([]float32, error) {
	if e.N == 0 {
		return nil, errors.New("cuda: Pool before Forward")
	}
	C := e.Cfg.Hidden
	if err := e.d.Pool(e.pooled, e.Hidden(), e.mask, e.lens, e.N, e.T, C, mode); err != nil {
		return nil, err
	}
	out := make([]float32, e.N*C)
	return out, Download(out, e.pooled)
}

// Backward adds to every parameter's G the gradient of the loss given
// dPooled = ∂loss/∂(pooled embeddings), N×C on the host, through the
// pooling and the encoder of the last Forward.
func (e *Encoder) Backward(mode string, dPooled []float32) error {
	cfg := e.Cfg
	d, C, FF, H := e.d, cfg.Hidden, cfg.FF, cfg.Heads
	N, T := e.N, e.T
	NT := N * T
	if N == 0 {
		return errors.New("cuda: Backward before Forward")
	}
	if len(dPooled) != N*C {
		return fmt.Errorf("cuda: backward needs %d pooled gradients, got %d", N*C, len(dPooled))
	}
	if err := Upload(e.dpl, dPooled); err != nil {
		return err
	}
	run := func(fs ...func() error) error {
		for _, f := range fs {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
	linB := func(w, b *Param, dinp, dout, inp *Buffer, in, outC int) func() error {
		return func() error {
			l, xa := e.linear(w, b, in, outC)
			return d.linearBackward(&l, dinp, dout, inp, xa, e.dxa, NT)
		}
	}
	zero := func(b *Buffer) func() error { return b.Zero }
	if err := run(zero(e.dx),
		func() error { return d.PoolBackward(e.dx, e.dpl, e.mask, e.lens, N, T, C, mode) }); err != nil {
		return err
	}
	for l := len(e.layers) - 1; l >= 0; l-- {
		ly, a := &e.layers[l], &e.acts[l]
		in := e.x0
		if l > 0 {
			in = e.acts[l-1].out
		}
		if err := run(
			// out = LN(res2); res2 = fo(act(ff1)) + ln1
			zero(e.dres),
			func() error {
				return d.LayerNormBackward(e.dres, ly.ln2w.G, ly.ln2b.G, e.dx, a.res2, ly.ln2w.W, a.ln2Mean, a.ln2Rstd, NT, C)
			},
			func() error { return d.Activation(cfg.Act, e.g, a.ff1, NT*FF) }, // recomputed, as on the CPU
			zero(e.dg),
			linB(ly.fo, ly.fob, e.dg, e.dres, e.g, FF, C),
			func() error { return d.ActivationBackward(cfg.Act, e.dg, a.ff1, NT*FF) },
			func() error { return e.dln1.CopyFrom(e.dres) },
			linB(ly.fi, ly.fib, e.dln1, e.dg, a.ln1, C, FF),
			// ln1 = LN(res1); res1 = ao(ctx) + in
			zero(e.dres),
			func() error {
				return d.LayerNormBackward(e.dres, ly.ln1w.G, ly.ln1b.G, e.dln1, a.res1, ly.ln1w.W, a.ln1Mean, a.ln1Rstd, NT, C)
			},
			zero(e.dctx),
			linB(ly.ao, ly.aob, e.dctx, e.dres, a.ctx, C, C),
			zero(e.dq), zero(e.dk), zero(e.dv),
			func() error { return d.AttentionBackward(e.dq, e.dk, e.dv, e.dctx, a.att, a.q, a.k, a.v, N, T, C, H) },
			func() error { return e.dx.CopyFrom(e.dres) }, // the residual path
			linB(ly.q, ly.qb, e.dx, e.dq, in, C, C),
			linB(ly.k, ly.kb, e.dx, e.dk, in, C, C),
			linB(ly.v, ly.vb, e.dx, e.dv, in, C, C),
		); err != nil {
			return fmt.Errorf("cuda: encoder layer %d backward: %w", l, err)
		}
	}
	if e.frozen { // nothing below the first layer trains
		return nil
	}
	return run(zero(e.dres),
		func() error {
			return d.LayerNormBackward(e.dres, e.elnw.G, e.elnb.G, e.dx, e.emb, e.elnw.W, e.embMean, e.embRstd, NT, C)
		},
		func() error {
			return d.EmbeddingBackward(e.wte.G, e.wpe.G, e.wtt.G, e.dres, e.ids, e.types, N, T, C, cfg.Vocab, cfg.TypeVocab)
		})
}

// Download copies a parameter's weights (or gradient) to the host.
func (p *Param) Download(grad bool) ([]float32, error) {
	out := make([]float32, p.N)
	b := p.W
	if grad {
		b = p.G
	}
	return out, Download(out, b)
}

// Upload replaces a parameter's weights (resuming from a checkpoint).
func (p *Param) Upload(w []float32) error {
	if len(w) != p.N {
		return fmt.Errorf("cuda: %s: %d values, want %d", p.Name, len(w), p.N)
	}
	return Upload(p.W, w)
}

// Moments returns the AdamW moments (nil before the first step), for
// checkpoints that resume exactly.
func (p *Param) Moments() (m, v []float32, err error) {
	if p.m == nil {
		return nil, nil, nil
	}
	m, v = make([]float32, p.N), make([]float32, p.N)
	return m, v, errors.Join(Download(m, p.m), Download(v, p.v))
}

// SetMoments restores AdamW moments saved by Moments.
func (p *Param) SetMoments(d *Device, m, v []float32) error {
	if len(m) != p.N || len(v) != p.N {
		return fmt.Errorf("cuda: %s: moments of %d and %d values, want %d", p.Name, len(m), len(v), p.N)
	}
	if p.m == nil {
		var err error
		if p.m, err = d.AllocF32(p.N); err != nil {
			return err
		}
		if p.v, err = d.AllocF32(p.N); err != nil {
			return err
		}
	}
	return errors.Join(Upload(p.m, m), Upload(p.v, v))
}
