package train

import (
	"fmt"
	"math"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train/ops"
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
	ids   []int32
	types []int32
	mask  []float32
	lens  []int

	emb, x0          []float32 // embedding sum (pre-LN) and after LN
	embMean, embRstd []float32
	layers           []layerActs
	// Hidden is the last layer's output, N×T×C.
	Hidden []float32

	// cross-encoder head
	pooledCLS, pooledTanh []float32 // N×C

	// backward scratch
	dx, dres, dln1, dctx, dq, dk, dv []float32
	g, dg                            []float32 // N·T×FF
}

func grow(b []float32, n int) []float32 {
	if cap(b) >= n {
		b = b[:n]
		return b
	}
	return make([]float32, n)
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
	a.N, a.T = b.N, b.T
	a.ids, a.mask = b.IDs, b.Mask
	a.types = b.Types
	if a.types == nil {
		a.types = make([]int32, NT)
	}
	a.lens = b.lengths()
	a.emb, a.x0 = grow(a.emb, NT*C), grow(a.x0, NT*C)
	a.embMean, a.embRstd = grow(a.embMean, NT), grow(a.embRstd, NT)
	if len(a.layers) != len(m.layers) {
		a.layers = make([]layerActs, len(m.layers))
	}
	for l := range a.layers {
		la := &a.layers[l]
		la.q, la.k, la.v, la.ctx = grow(la.q, NT*C), grow(la.k, NT*C), grow(la.v, NT*C), grow(la.ctx, NT*C)
		la.att = grow(la.att, b.N*H*b.T*b.T)
		la.res1, la.ln1 = grow(la.res1, NT*C), grow(la.ln1, NT*C)
		la.ln1Mean, la.ln1Rstd = grow(la.ln1Mean, NT), grow(la.ln1Rstd, NT)
		la.ff1 = grow(la.ff1, NT*FF)
		la.res2, la.out = grow(la.res2, NT*C), grow(la.out, NT*C)
		la.ln2Mean, la.ln2Rstd = grow(la.ln2Mean, NT), grow(la.ln2Rstd, NT)
		if la.lora == nil {
			la.lora = map[*Param][]float32{}
		}
	}
	a.g = grow(a.g, NT*FF)
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

	embeddingForward(a.emb, a.ids, a.types, m.wte.W, m.wpe.W, m.wtt.W, b.N, T, C)
	layernormForward(a.x0, a.embMean, a.embRstd, a.emb, m.elnw.W, m.elnb.W, NT, C, eps, th)
	x := a.x0
	for l := range m.layers {
		ly, la := &m.layers[l], &a.layers[l]
		m.linearForward(ly.q, ly.qb, la.q, x, NT, C, C, la)
		m.linearForward(ly.k, ly.kb, la.k, x, NT, C, C, la)
		m.linearForward(ly.v, ly.vb, la.v, x, NT, C, C, la)
		m.attention(b.N, T, a.mask).Forward(la.ctx, la.att, la.q, la.k, la.v, a.lens, th)
		m.linearForward(ly.ao, ly.aob, la.res1, la.ctx, NT, C, C, la)
		ops.AddInPlace(la.res1, x, th)
		layernormForward(la.ln1, la.ln1Mean, la.ln1Rstd, la.res1, ly.ln1w.W, ly.ln1b.W, NT, C, eps, th)
		m.linearForward(ly.fi, ly.fib, la.ff1, la.ln1, NT, C, m.Cfg.IntermediateSize, la)
		activationForward(m.Cfg.HiddenAct, a.g, la.ff1, th)
		m.linearForward(ly.fo, ly.fob, la.res2, a.g, NT, m.Cfg.IntermediateSize, C, la)
		ops.AddInPlace(la.res2, la.ln1, th)
		layernormForward(la.out, la.ln2Mean, la.ln2Rstd, la.res2, ly.ln2w.W, ly.ln2b.W, NT, C, eps, th)
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
// Forward of this model.
func (m *Model) Backward(a *Acts, dHidden []float32) {
	C, FF, T := m.Cfg.HiddenSize, m.Cfg.IntermediateSize, a.T
	NT := a.N * T
	th := m.threads()
	a.dx, a.dres, a.dln1 = grow(a.dx, NT*C), grow(a.dres, NT*C), grow(a.dln1, NT*C)
	a.dctx, a.dq, a.dk, a.dv = grow(a.dctx, NT*C), grow(a.dq, NT*C), grow(a.dk, NT*C), grow(a.dv, NT*C)
	a.dg = grow(a.dg, NT*FF)
	copy(a.dx, dHidden)
	for l := len(m.layers) - 1; l >= 0; l-- {
		ly, la := &m.layers[l], &a.layers[l]
		in := a.x0
		if l > 0 {
			in = a.layers[l-1].out
		}
		// out = LN(res2); res2 = fo(act(ff1)) + ln1
		clear(a.dres)
		layernormBackward(a.dres, ly.ln2w.Grad(), ly.ln2b.Grad(), a.dx, la.res2, ly.ln2w.W, la.ln2Mean, la.ln2Rstd, NT, C, th)
		activationForward(m.Cfg.HiddenAct, a.g, la.ff1, th) // recomputed rather than stored
		clear(a.dg)
		m.linearBackward(ly.fo, ly.fob, a.dg, a.dres, a.g, NT, FF, C, la)
		activationBackward(m.Cfg.HiddenAct, a.dg, la.ff1, th)
		copy(a.dln1, a.dres)
		m.linearBackward(ly.fi, ly.fib, a.dln1, a.dg, la.ln1, NT, C, FF, la)
		// ln1 = LN(res1); res1 = ao(ctx) + in
		clear(a.dres)
		layernormBackward(a.dres, ly.ln1w.Grad(), ly.ln1b.Grad(), a.dln1, la.res1, ly.ln1w.W, la.ln1Mean, la.ln1Rstd, NT, C, th)
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
	layernormBackward(a.dres, m.elnw.Grad(), m.elnb.Grad(), a.dx, a.emb, m.elnw.W, a.embMean, a.embRstd, NT, C, th)
	embeddingBackward(m.wte.Grad(), m.wpe.Grad(), m.wtt.Grad(), a.dres, a.ids, a.types, a.N, T, C)
}

// --- embeddings ---

func embeddingForward(out []float32, ids, types []int32, wte, wpe, wtt []float32, N, T, C int) {
	for n := 0; n < N; n++ {
		for t := 0; t < T; t++ {
			r := n*T + t
			o := out[r*C : r*C+C]
			w := wte[int(ids[r])*C:]
			p := wpe[t*C:]
			ty := wtt[int(types[r])*C:]
			for c := range o {
				o[c] = w[c] + p[c] + ty[c]
			}
		}
	}
}

// embeddingBackward scatters dout into the three tables. It runs on one
// goroutine: rows share table rows, and a fixed order keeps it reproducible.
func embeddingBackward(dwte, dwpe, dwtt, dout []float32, ids, types []int32, N, T, C int) {
	for n := 0; n < N; n++ {
		for t := 0; t < T; t++ {
			r := n*T + t
			d := dout[r*C : r*C+C]
			if dwte != nil {
				w := dwte[int(ids[r])*C : int(ids[r])*C+C]
				for c, v := range d {
					w[c] += v
				}
			}
			if dwpe != nil {
				p := dwpe[t*C : t*C+C]
				for c, v := range d {
					p[c] += v
				}
			}
			if dwtt != nil {
				ty := dwtt[int(types[r])*C : int(types[r])*C+C]
				for c, v := range d {
					ty[c] += v
				}
			}
		}
	}
}

// --- layer norm ---

func layernormForward(out, mean, rstd, inp, w, b []float32, rows, C int, eps float32, th int) {
	ops.ParallelFor(rows, th, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := inp[r*C : r*C+C]
			var s float64
			for _, v := range x {
				s += float64(v)
			}
			mu := float32(s / float64(C))
			var v2 float64
			for _, v := range x {
				d := v - mu
				v2 += float64(d * d)
			}
			rs := float32(1 / math.Sqrt(v2/float64(C)+float64(eps)))
			o := out[r*C : r*C+C]
			for c, v := range x {
				o[c] = (v-mu)*rs*w[c] + b[c]
			}
			mean[r], rstd[r] = mu, rs
		}
	})
}

// layernormBackward adds to dinp (and to dw, db when not nil) the gradient
// given dout. The input rows go in parallel; the gain and bias sums go in
// parallel over columns so each column is summed in row order.
func layernormBackward(dinp, dw, db, dout, inp, w, mean, rstd []float32, rows, C int, th int) {
	ops.ParallelFor(rows, th, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x, d := inp[r*C:r*C+C], dout[r*C:r*C+C]
			mu, rs := mean[r], rstd[r]
			var dnMean, dnNorm float32
			for c := range x {
				xh := (x[c] - mu) * rs
				dn := w[c] * d[c]
				dnMean += dn
				dnNorm += dn * xh
			}
			dnMean /= float32(C)
			dnNorm /= float32(C)
			di := dinp[r*C : r*C+C]
			for c := range x {
				xh := (x[c] - mu) * rs
				dn := w[c] * d[c]
				di[c] += (dn - dnMean - xh*dnNorm) * rs
			}
		}
	})
	if dw == nil && db == nil {
		return
	}
	ops.ParallelFor(C, th, func(lo, hi int) {
		for r := 0; r < rows; r++ {
			x, d := inp[r*C:r*C+C], dout[r*C:r*C+C]
			mu, rs := mean[r], rstd[r]
			for c := lo; c < hi; c++ {
				if dw != nil {
					dw[c] += (x[c] - mu) * rs * d[c]
				}
				if db != nil {
					db[c] += d[c]
				}
			}
		}
	})
}

// --- linear layers (with optional LoRA) ---

// linearForward: out = inp·Wᵀ + b (+ alpha/r · (inp·Aᵀ)·Bᵀ with LoRA),
// ops.Linear's forward; inp is rows×in, W is outC×in. x·Aᵀ is kept in la.
func (m *Model) linearForward(w, b *Param, out, inp []float32, rows, in, outC int, la *layerActs) {
	l := &ops.Linear{W: w, Bias: b, LoRA: m.lora[w], In: in, Out: outC}
	var xa []float32
	if l.LoRA != nil {
		xa = grow(la.lora[w], rows*l.LoRA.Rank)
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

// --- activations ---

const (
	invSqrt2   = 0.70710678118654752440
	invSqrt2Pi = 0.39894228040143267794
	sqrt2OverP = 0.79788456080286535588 // √(2/π)
)

func activationForward(act string, out, inp []float32, th int) {
	n := len(inp)
	ops.ParallelFor(n/4096+1, th, func(lo, hi int) {
		x := inp[min(lo*4096, n):min(hi*4096, n)]
		o := out[min(lo*4096, n):min(hi*4096, n)]
		switch act {
		case "gelu":
			for i, v := range x {
				o[i] = 0.5 * v * (1 + ops.Erf32(v*invSqrt2))
			}
		case "gelu_new", "gelu_pytorch_tanh":
			for i, v := range x {
				u := float64(sqrt2OverP * (v + 0.044715*v*v*v))
				o[i] = 0.5 * v * (1 + float32(math.Tanh(u)))
			}
		case "relu":
			for i, v := range x {
				o[i] = max(v, 0)
			}
		}
	})
}

// activationBackward turns d (∂loss/∂act(x)) into ∂loss/∂x in place.
func activationBackward(act string, d, inp []float32, th int) {
	n := len(inp)
	ops.ParallelFor(n/4096+1, th, func(lo, hi int) {
		x := inp[min(lo*4096, n):min(hi*4096, n)]
		g := d[min(lo*4096, n):min(hi*4096, n)]
		switch act {
		case "gelu":
			for i, v := range x {
				cdf := 0.5 * (1 + ops.Erf32(v*invSqrt2))
				pdf := invSqrt2Pi * ops.Exp32(-0.5*v*v)
				g[i] *= cdf + v*pdf
			}
		case "gelu_new", "gelu_pytorch_tanh":
			for i, v := range x {
				t := float32(math.Tanh(float64(sqrt2OverP * (v + 0.044715*v*v*v))))
				g[i] *= 0.5*(1+t) + 0.5*v*(1-t*t)*sqrt2OverP*(1+3*0.044715*v*v)
			}
		case "relu":
			for i, v := range x {
				if v <= 0 {
					g[i] = 0
				}
			}
		}
	})
}

// --- pooling and the cross-encoder head ---

// Pooling modes (the manifest's names).
const (
	PoolMean = model.PoolingMean
	PoolCLS  = model.PoolingCLS
	PoolLast = model.PoolingLastToken
)

// Pool turns the hidden states into one vector per sequence (N×C).
func (m *Model) Pool(a *Acts, mode string) ([]float32, error) {
	C, T := m.Cfg.HiddenSize, a.T
	out := make([]float32, a.N*C)
	for n := 0; n < a.N; n++ {
		o := out[n*C : n*C+C]
		switch mode {
		case PoolMean:
			var cnt float32
			for t := 0; t < a.lens[n]; t++ {
				mk := a.mask[n*T+t]
				if mk == 0 {
					continue
				}
				cnt += mk
				h := a.Hidden[(n*T+t)*C:]
				for c := range o {
					o[c] += h[c] * mk
				}
			}
			cnt = max(cnt, 1e-9)
			for c := range o {
				o[c] /= cnt
			}
		case PoolCLS:
			copy(o, a.Hidden[n*T*C:n*T*C+C])
		case PoolLast:
			t := a.lens[n] - 1
			copy(o, a.Hidden[(n*T+t)*C:(n*T+t)*C+C])
		default:
			return nil, fmt.Errorf("train: pooling %q not supported (want mean, cls or lasttoken)", mode)
		}
	}
	return out, nil
}

// PoolBackward adds to dHidden (N×T×C) the gradient given dPooled (N×C).
func (m *Model) PoolBackward(a *Acts, mode string, dPooled, dHidden []float32) {
	C, T := m.Cfg.HiddenSize, a.T
	for n := 0; n < a.N; n++ {
		d := dPooled[n*C : n*C+C]
		switch mode {
		case PoolMean:
			var cnt float32
			for t := 0; t < a.lens[n]; t++ {
				cnt += a.mask[n*T+t]
			}
			cnt = max(cnt, 1e-9)
			for t := 0; t < a.lens[n]; t++ {
				mk := a.mask[n*T+t]
				if mk == 0 {
					continue
				}
				dh := dHidden[(n*T+t)*C:]
				for c, v := range d {
					dh[c] += v * mk / cnt
				}
			}
		case PoolCLS:
			dh := dHidden[n*T*C:]
			for c, v := range d {
				dh[c] += v
			}
		case PoolLast:
			dh := dHidden[(n*T+a.lens[n]-1)*C:]
			for c, v := range d {
				dh[c] += v
			}
		}
	}
}

// Classify runs the cross-encoder head on [CLS]: logits = classifier(tanh(
// pooler(h_CLS))), N×numLabels.
func (m *Model) Classify(a *Acts) ([]float32, error) {
	if m.clsW == nil {
		return nil, fmt.Errorf("train: model has no classifier head (load it as a cross-encoder)")
	}
	C, T, NL := m.Cfg.HiddenSize, a.T, m.clsW.Shape[0]
	a.pooledCLS = grow(a.pooledCLS, a.N*C)
	for n := 0; n < a.N; n++ {
		copy(a.pooledCLS[n*C:n*C+C], a.Hidden[n*T*C:n*T*C+C])
	}
	a.pooledTanh = grow(a.pooledTanh, a.N*C)
	la := &layerActs{lora: map[*Param][]float32{}}
	m.linearForward(m.poolW, m.poolB, a.pooledTanh, a.pooledCLS, a.N, C, C, la)
	for i, v := range a.pooledTanh {
		a.pooledTanh[i] = float32(math.Tanh(float64(v)))
	}
	logits := make([]float32, a.N*NL)
	m.linearForward(m.clsW, m.clsB, logits, a.pooledTanh, a.N, C, NL, la)
	return logits, nil
}

// ClassifyBackward adds to dHidden the gradient given dLogits, and the head's
// parameter gradients.
func (m *Model) ClassifyBackward(a *Acts, dLogits, dHidden []float32) {
	C, T, NL := m.Cfg.HiddenSize, a.T, m.clsW.Shape[0]
	la := &layerActs{lora: map[*Param][]float32{}}
	dt := make([]float32, a.N*C)
	m.linearBackward(m.clsW, m.clsB, dt, dLogits, a.pooledTanh, a.N, C, NL, la)
	for i, y := range a.pooledTanh {
		dt[i] *= 1 - y*y
	}
	dcls := make([]float32, a.N*C)
	m.linearBackward(m.poolW, m.poolB, dcls, dt, a.pooledCLS, a.N, C, C, la)
	for n := 0; n < a.N; n++ {
		dh := dHidden[n*T*C : n*T*C+C]
		for c, v := range dcls[n*C : n*C+C] {
			dh[c] += v
		}
	}
}
