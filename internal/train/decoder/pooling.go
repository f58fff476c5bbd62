package decoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Trainable pooling modes (the manifest's names: the graph applies them).
const (
	// PoolLatent is the last-layer trainable pooling of NV-Embed as paper
	// 002 describes it: cross-attention from trainable latent queries to
	// keys and values projected from the last hidden state's real tokens,
	// then an MLP, averaged over the latents.
	PoolLatent = model.PoolingLatent
	// PoolMultiLayer is paper 002's Multi-Layers Trainable Pooling: the
	// same head over one row per layer — each layer's hidden state at the
	// last token (EOS; the last layer's after the final norm, as
	// transformers' hidden_states[1:]) plus a trainable layer-weight row.
	PoolMultiLayer = model.PoolingMultiLayer
)

// HeadConfig shapes a trainable pooling head.
type HeadConfig struct {
	Mode    string // PoolLatent or PoolMultiLayer
	Latents int    // trainable queries (default 16)
	Heads   int    // attention heads (default 8); they split the hidden size
}

// head is a trainable pooling head: for each sequence, rows X (n×C), keys
// K = X·Wkᵀ and values V = X·Wvᵀ; per attention head, P = softmax(Q·Kᵀ/√d)
// with Q the trainable latents (r×C); Z = (P·V)·Woᵀ; Y = Z + fc2(GELU(fc1(Z)));
// the embedding is the mean of Y's r rows. The ONNX graph's twin is
// model/onnx's poolingHead (same tensor names), checked against this one
// by TestPoolingHeadServedByEncoder.
type head struct {
	mode         string
	r, h         int
	latents      *ops.Param // r×C
	layerW       *ops.Param // L×C (multilayer)
	k, v, o      *ops.Linear
	fc1, fc2     *ops.Linear
	params       []*ops.Param
	x, kx, vx    []float32 // the head's input rows, keys, values
	gather       []float32 // multilayer: the input rows' storage
	att          []float32 // N×h×r×n probabilities
	ctx, z, u, g []float32 // N·r×C
	rows         []int     // per sequence: first input row
	n            []int     // per sequence: number of input rows
}

// EnableHead adds a trainable pooling head, initialised as transformers
// initialises linear layers (normal(0, 0.02), zero biases) with zero layer
// weights. Its parameters (named "pooling.…") train whether or not LoRA
// freezes the decoder, and Pool and PoolBackward accept its mode.
func (m *Model) EnableHead(cfg HeadConfig, seed uint64) error {
	if cfg.Latents == 0 {
		cfg.Latents = 16
	}
	if cfg.Heads == 0 {
		cfg.Heads = 8
	}
	rng := rand.New(rand.NewPCG(seed, 0x9001))
	return m.addHead(cfg, func(name string, std float64, n int) ([]float32, error) {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(std * rng.NormFloat64())
		}
		return w, nil
	})
}

// loadHead adds the trained head that config.json's anna_pooling_head
// describes, its weights the checkpoint's "pooling.…" tensors (the
// llama.Model's Aux, kept, not copied); it records each tensor it reads
// in used.
func (m *Model) loadHead(hc model.PoolingHead, used map[string]bool) error {
	return m.addHead(HeadConfig(hc), func(name string, _ float64, n int) ([]float32, error) {
		t := m.Aux(name)
		if t == nil {
			return nil, fmt.Errorf("decoder: config.json has anna_pooling_head but the checkpoint lacks %s", name)
		}
		if len(t.Data) != n {
			return nil, fmt.Errorf("decoder: %s has shape %v, %d values, want %d (anna_pooling_head %s, %d latents, %d heads)", name, t.Shape, len(t.Data), n, hc.Mode, hc.Latents, hc.Heads)
		}
		used[name] = true
		return t.Data, nil
	})
}

// HeadConfig returns the trainable pooling head's shape, or nil when the
// model has none; the export writes it into config.json as
// anna_pooling_head.
func (m *Model) HeadConfig() *model.PoolingHead {
	if m.head == nil {
		return nil
	}
	return &model.PoolingHead{Mode: m.head.mode, Latents: m.head.r, Heads: m.head.h}
}

// addHead builds the head, its parameters' weights from init (the name, the
// std of a fresh normal initialisation, 0 for biases and layer weights, and
// the length).
func (m *Model) addHead(cfg HeadConfig, init func(name string, std float64, n int) ([]float32, error)) error {
	if m.head != nil {
		return fmt.Errorf("decoder: a pooling head is already enabled")
	}
	if cfg.Mode != PoolLatent && cfg.Mode != PoolMultiLayer {
		return fmt.Errorf("decoder: pooling head mode %q unknown (want %s or %s)", cfg.Mode, PoolLatent, PoolMultiLayer)
	}
	C := m.Cfg.HiddenSize
	if cfg.Latents <= 0 || cfg.Heads <= 0 || C%cfg.Heads != 0 {
		return fmt.Errorf("decoder: pooling head with %d latents and %d heads over hidden size %d (want heads dividing it)", cfg.Latents, cfg.Heads, C)
	}
	hd := &head{mode: cfg.Mode, r: cfg.Latents, h: cfg.Heads}
	var err error
	param := func(name string, std float64, noDecay bool, shape ...int) *ops.Param {
		n := 1
		for _, d := range shape {
			n *= d
		}
		p := &ops.Param{Name: "pooling." + name, Shape: shape, G: make([]float32, n), NoDecay: noDecay}
		if err == nil {
			p.W, err = init(p.Name, std, n)
		}
		hd.params = append(hd.params, p)
		return p
	}
	lin := func(name string, bias bool) *ops.Linear {
		l := &ops.Linear{In: C, Out: C, W: param(name+".weight", 0.02, false, C, C)}
		if bias {
			l.Bias = param(name+".bias", 0, true, C)
		}
		return l
	}
	hd.latents = param("latents", 0.02, false, cfg.Latents, C)
	if cfg.Mode == PoolMultiLayer {
		hd.layerW = param("layer_weights", 0, true, m.Cfg.NumHiddenLayers, C)
	}
	hd.k, hd.v, hd.o = lin("k_proj", false), lin("v_proj", false), lin("o_proj", false)
	hd.fc1, hd.fc2 = lin("mlp.fc1", true), lin("mlp.fc2", true)
	if err != nil {
		return err
	}
	for _, p := range hd.params {
		m.AddParam(p)
	}
	m.head = hd
	m.Cfg.PoolingHead = m.HeadConfig()
	return nil
}

func isHeadName(n string) bool { return strings.HasPrefix(n, "pooling.") }

// headForward computes the head's embeddings (N×C) from a's activations.
func (m *Model) headForward(a *Acts) []float32 {
	hd, C, T, L := m.head, m.Cfg.HiddenSize, a.T, len(m.Layers)
	th := m.threads()
	N, r, H := a.N, hd.r, hd.h
	D := C / H
	hd.rows, hd.n = make([]int, N), make([]int, N)
	var X []float32
	switch hd.mode {
	case PoolLatent: // every position; padded rows are never attended to
		X = a.Hidden
		for n := 0; n < N; n++ {
			hd.rows[n], hd.n[n] = n*T, a.lens[n]
		}
	case PoolMultiLayer:
		hd.gather = ops.Grow(hd.gather, N*L*C)
		X = hd.gather
		for n := 0; n < N; n++ {
			hd.rows[n], hd.n[n] = n*L, L
			eos := n*T + a.lens[n] - 1
			for l := 0; l < L; l++ {
				src := a.Hidden
				if l < L-1 {
					src = a.xs[l+1]
				}
				row := X[(n*L+l)*C : (n*L+l+1)*C]
				for c, v := range src[eos*C : eos*C+C] {
					row[c] = v + hd.layerW.W[l*C+c]
				}
			}
		}
	}
	hd.x = X
	rowsX := len(X) / C
	hd.kx, hd.vx = ops.Grow(hd.kx, rowsX*C), ops.Grow(hd.vx, rowsX*C)
	hd.k.Forward(hd.kx, X, nil, rowsX, th)
	hd.v.Forward(hd.vx, X, nil, rowsX, th)
	maxN := 0
	for _, n := range hd.n {
		maxN = max(maxN, n)
	}
	hd.att = ops.Grow(hd.att, N*H*r*maxN)
	hd.ctx = ops.Grow(hd.ctx, N*r*C)
	scale := float32(1 / math.Sqrt(float64(D)))
	ops.ParallelFor(N, th, func(lo, hi int) {
		var sc tensor.Scratch
		for n := lo; n < hi; n++ {
			rows, cnt := hd.rows[n], hd.n[n]
			for h := 0; h < H; h++ {
				p := hd.att[(n*H+h)*r*maxN : (n*H+h)*r*maxN+r*cnt]
				tensor.GemmSerial(&sc, false, true, r, cnt, D, scale, hd.latents.W[h*D:], C, hd.kx[rows*C+h*D:], C, 0, p, cnt)
				for i := 0; i < r; i++ {
					ops.SoftmaxPrefix(p[i*cnt:i*cnt+cnt], cnt)
				}
				tensor.GemmSerial(&sc, false, false, r, D, cnt, 1, p, cnt, hd.vx[rows*C+h*D:], C, 0, hd.ctx[n*r*C+h*D:], C)
			}
		}
	})
	R := N * r
	hd.z, hd.u, hd.g = ops.Grow(hd.z, R*C), ops.Grow(hd.u, R*C), ops.Grow(hd.g, R*C)
	hd.o.Forward(hd.z, hd.ctx, nil, R, th)
	hd.fc1.Forward(hd.u, hd.z, nil, R, th)
	ops.GELUForward(hd.g, hd.u, th)
	y := make([]float32, R*C)
	hd.fc2.Forward(y, hd.g, nil, R, th)
	out := make([]float32, N*C)
	inv := 1 / float32(r)
	for n := 0; n < N; n++ {
		o := out[n*C : n*C+C]
		for i := 0; i < r; i++ {
			yr, zr := y[(n*r+i)*C:(n*r+i+1)*C], hd.z[(n*r+i)*C:(n*r+i+1)*C]
			for c := range o {
				o[c] += (zr[c] + yr[c]) * inv
			}
		}
	}
	return out
}

// headBackward adds the head's parameter gradients given dPooled (N×C),
// and the gradients of its inputs to dHidden (N×T×C) and, multilayer, to
// a.dEOS (per layer l < L−1, N×C: the gradient of layer l's output at each
// sequence's last token, which Backward adds in).
func (m *Model) headBackward(a *Acts, dPooled, dHidden []float32) {
	hd, C, T, L := m.head, m.Cfg.HiddenSize, a.T, len(m.Layers)
	th := m.threads()
	N, r, H := a.N, hd.r, hd.h
	D, R := C/H, N*hd.r
	// e = mean_i (z_i + fc2(gelu(fc1(z_i))))
	dy := make([]float32, R*C)
	inv := 1 / float32(r)
	for n := 0; n < N; n++ {
		for i := 0; i < r; i++ {
			d := dy[(n*r+i)*C : (n*r+i+1)*C]
			for c, v := range dPooled[n*C : n*C+C] {
				d[c] = v * inv
			}
		}
	}
	dz := append([]float32(nil), dy...) // the residual
	dg := make([]float32, R*C)
	hd.fc2.Backward(dg, dy, hd.g, nil, R, th)
	du := make([]float32, R*C)
	ops.GELUBackward(du, dg, hd.u, th)
	hd.fc1.Backward(dz, du, hd.z, nil, R, th)
	dctx := make([]float32, R*C)
	hd.o.Backward(dctx, dz, hd.ctx, nil, R, th)
	rowsX := len(hd.x) / C
	dk, dv := make([]float32, rowsX*C), make([]float32, rowsX*C)
	maxN := 0
	for _, n := range hd.n {
		maxN = max(maxN, n)
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	dlat := hd.latents.Grad()
	// Sequences share the latents: one goroutine, a fixed order.
	var sc tensor.Scratch
	dp := make([]float32, r*maxN)
	for n := 0; n < N; n++ {
		rows, cnt := hd.rows[n], hd.n[n]
		for h := 0; h < H; h++ {
			p := hd.att[(n*H+h)*r*maxN : (n*H+h)*r*maxN+r*cnt]
			d := dp[:r*cnt]
			tensor.GemmSerial(&sc, false, true, r, cnt, D, 1, dctx[n*r*C+h*D:], C, hd.vx[rows*C+h*D:], C, 0, d, cnt)
			tensor.GemmSerial(&sc, true, false, cnt, D, r, 1, p, cnt, dctx[n*r*C+h*D:], C, 1, dv[rows*C+h*D:], C)
			for i := 0; i < r; i++ {
				ops.SoftmaxBackward(p[i*cnt:i*cnt+cnt], d[i*cnt:i*cnt+cnt])
			}
			if dlat != nil {
				tensor.GemmSerial(&sc, false, false, r, D, cnt, scale, d, cnt, hd.kx[rows*C+h*D:], C, 1, dlat[h*D:], C)
			}
			tensor.GemmSerial(&sc, true, false, cnt, D, r, scale, d, cnt, hd.latents.W[h*D:], C, 1, dk[rows*C+h*D:], C)
		}
	}
	dx := make([]float32, rowsX*C)
	hd.k.Backward(dx, dk, hd.x, nil, rowsX, th)
	hd.v.Backward(dx, dv, hd.x, nil, rowsX, th)
	switch hd.mode {
	case PoolLatent:
		for i, v := range dx {
			dHidden[i] += v
		}
	case PoolMultiLayer:
		if len(a.dEOS) != L-1 {
			a.dEOS = make([][]float32, L-1)
		}
		for l := range a.dEOS {
			a.dEOS[l] = ops.Grow(a.dEOS[l], N*C)
			clear(a.dEOS[l])
		}
		dlw := hd.layerW.Grad()
		for n := 0; n < N; n++ {
			eos := n*T + a.lens[n] - 1
			for l := 0; l < L; l++ {
				d := dx[(n*L+l)*C : (n*L+l+1)*C]
				dst := dHidden[eos*C : eos*C+C]
				if l < L-1 {
					dst = a.dEOS[l][n*C : n*C+C]
				}
				for c, v := range d {
					dst[c] += v
					if dlw != nil {
						dlw[l*C+c] += v
					}
				}
			}
		}
	}
}

// HeadParams are the trainable pooling head's parameters (nil without
// one): a device trainer runs the head on the host with them, beside the
// decoder it holds (HeadForward, HeadBackward).
func (m *Model) HeadParams() []*ops.Param {
	if m.head == nil {
		return nil
	}
	return m.head.params
}

// HeadForward runs the trainable head (of mode) over the rows a device
// trainer computed for b, instead of over a Forward of this model:
// PoolLatent reads the final hidden state, N×T×C; PoolMultiLayer each
// layer's output at each sequence's last token, layer-major L×N×C — layers
// 0…L−2, then the final hidden state's row (after the final norm), as
// Pool reads them. It returns the N×C embeddings and the activations
// HeadBackward takes (overwritten by the next Forward or HeadForward).
func (m *Model) HeadForward(mode string, rows []float32, b *Batch) (*Acts, []float32, error) {
	if m.head == nil || m.head.mode != mode {
		return nil, nil, fmt.Errorf("decoder: pooling %q needs that trainable head (EnableHead)", mode)
	}
	lens, err := b.lengths(&m.Cfg)
	if err != nil {
		return nil, nil, err
	}
	want := b.N * b.T * m.Cfg.HiddenSize
	if mode == PoolMultiLayer {
		want = len(m.Layers) * b.N * m.Cfg.HiddenSize
	}
	if len(rows) != want {
		return nil, nil, fmt.Errorf("decoder: the %s head's input has %d values, want %d (N=%d T=%d)", mode, len(rows), want, b.N, b.T)
	}
	a := &Acts{N: b.N, T: b.T, lens: lens, Hidden: rows}
	if mode == PoolMultiLayer { // one row per sequence and layer: T = 1
		NC, L := b.N*m.Cfg.HiddenSize, len(m.Layers)
		a.T, a.lens, a.xs = 1, make([]int, b.N), make([][]float32, L)
		for n := range a.lens {
			a.lens[n] = 1
		}
		for l := 0; l < L-1; l++ {
			a.xs[l+1] = rows[l*NC : (l+1)*NC]
		}
		a.Hidden = rows[(L-1)*NC:]
	}
	return a, m.headForward(a), nil
}

// HeadBackward adds the head's parameter gradients given dPooled (N×C)
// and returns ∂loss/∂rows, laid out as HeadForward's rows. a is the latest
// HeadForward's.
func (m *Model) HeadBackward(a *Acts, dPooled []float32) []float32 {
	C := m.Cfg.HiddenSize
	d := make([]float32, a.N*a.T*C)
	m.headBackward(a, dPooled, d)
	if m.head.mode != PoolMultiLayer {
		return d
	}
	out := make([]float32, 0, len(m.Layers)*a.N*C)
	for _, dl := range a.dEOS {
		out = append(out, dl...)
	}
	a.dEOS = a.dEOS[:0]
	return append(out, d...)
}
