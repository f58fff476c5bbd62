package llama

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Embedder is a decoder embedder (or decoder reranker) ready for
// inference: the weights of its model.onnx (ReadGraph) packed once for
// internal/tensor's inference GEMM, and a forward that computes what the
// graph outputs (Output): the last hidden state after the final RMSNorm
// (pooled by the caller: last token, mean), or the pooled embedding of a
// trainable pooling head (latent, multi-layer), of AutoRegEmbed's memory
// tokens or of Causal2Vec ([h_C; h_EOS], after the contextual token made
// from the batch's context vectors), or a reranker's label logits at each
// row's last real token — as model/onnx's BuildLlama, poolingHead and the
// techniques compute them, up to float32 rounding.
//
// Attention is causal unless config.json says anna_attention
// "bidirectional"; padding keys are never attended to. Only a batch's
// real rows (each sequence's tokens up to its last real one) are
// computed, back to back, so padding costs nothing; positions are
// 0..T−1 from each sequence's start (right padding), as in the graph.
// An Embedder is read-only after NewEmbedder and safe for concurrent use.
type Embedder struct {
	cfg    model.Config
	causal bool
	output string
	// embed is the token table (vocab×H), memory AutoRegEmbed's k×H rows
	// (ids vocab…vocab+k−1), norm the final RMSNorm's gain.
	embed, memory, norm []float32
	cos, sin            []float32 // positions × head_dim/2, the graph's tables
	layers              []embLayer
	head                *embHead
	c2v                 *embC2V
	label               *tensor.Weight // a reranker's label head (labels×H), or nil
	work                sync.Pool      // *embWork
}

// embLayer is one decoder layer packed for inference: the query, key and
// value projections stacked (qkv: nh·hd + 2·nkv·hd outputs, Qwen2's biases
// likewise), the output projection, the gate and up projections stacked
// (2·intermediate outputs) and the down projection.
type embLayer struct {
	ln1, ln2, qn, kn []float32
	qkv              *tensor.Weight
	qkvBias          []float32
	o, gateUp, down  *tensor.Weight
	q8               *q8Layer // an int8 graph's products in their stead (embed_quant.go), or nil
}

// embHead is a trainable pooling head (train/decoder's, "pooling.…").
type embHead struct {
	mode              string
	r, h              int
	latents, layerW   []float32
	k, v, o, fc1, fc2 *tensor.Weight
	b1, b2            []float32
}

// embC2V is Causal2Vec's MLP from the context vector to the contextual
// token: C = GELU(v·W0ᵀ [+ b0])·W2ᵀ [+ b2].
type embC2V struct {
	dim    int
	w0, w2 *tensor.Weight
	b0, b2 []float32
}

// NewEmbedder builds an Embedder from cfg and the weights of its graph
// (ReadGraph's). The tensors' names and shapes are checked as New checks
// them; the weights are packed (copied), so the caller's maps may go.
func NewEmbedder(cfg *model.Config, g *GraphWeights) (*Embedder, error) {
	m, err := newModel(cfg, g.Tensors, nil, true)
	if err != nil {
		return nil, err
	}
	H, I, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	nh, nkv := cfg.NumAttentionHeads, cfg.KVHeads()
	e := &Embedder{cfg: *cfg, causal: !cfg.Bidirectional(), embed: m.embed.W, norm: m.norm.W}
	e.work.New = func() any { return new(embWork) }
	P := cfg.MaxPositionEmbeddings
	if len(g.RopeCos) != P*hd || len(g.RopeSin) != P*hd {
		return nil, fmt.Errorf("llama: the graph's rotary tables have %d and %d values, want %d positions × head_dim %d", len(g.RopeCos), len(g.RopeSin), P, hd)
	}
	half := hd / 2
	e.cos, e.sin = make([]float32, P*half), make([]float32, P*half)
	for p := 0; p < P; p++ {
		copy(e.cos[p*half:(p+1)*half], g.RopeCos[p*hd:p*hd+half])
		copy(e.sin[p*half:(p+1)*half], g.RopeSin[p*hd:p*hd+half])
	}
	for _, ly := range m.Layers {
		el := embLayer{ln1: ly.LN1.W, ln2: ly.LN2.W}
		if ly.QN != nil {
			el.qn, el.kn = ly.QN.W, ly.KN.W
		}
		q, k, v := ly.Q(), ly.K(), ly.V()
		if q.Bias != nil {
			el.qkvBias = slices.Concat(q.Bias.W, k.Bias.W, v.Bias.W)
		}
		if g.Int8 != nil { // an int8 graph (embed_quant.go)
			if el.q8, err = newQ8Layer(g.Int8, ly.Names); err != nil {
				return nil, err
			}
			e.layers = append(e.layers, el)
			continue
		}
		el.qkv = tensor.PackWeight(slices.Concat(q.W.W, k.W.W, v.W.W), (nh+2*nkv)*hd, H, false)
		el.o = tensor.PackWeight(ly.O().W.W, H, nh*hd, false)
		el.gateUp = tensor.PackWeight(slices.Concat(ly.Gate().W.W, ly.Up().W.W), 2*I, H, false)
		el.down = tensor.PackWeight(ly.Down().W.W, H, I, false)
		e.layers = append(e.layers, el)
	}
	// get returns a technique's tensor, checking its length.
	var bad []string
	get := func(name string, n int) []float32 {
		t := g.Tensors[name]
		switch {
		case t == nil:
			bad = append(bad, name+" (missing)")
		case len(t.Data) != n:
			bad = append(bad, fmt.Sprintf("%s (%d values, want %d)", name, len(t.Data), n))
		default:
			return t.Data
		}
		return make([]float32, n)
	}
	if k := cfg.MemoryTokens; k > 0 {
		e.memory = get(MemoryTensor, k*H)
	}
	if cv := cfg.Causal2Vec; cv != nil {
		c := &embC2V{dim: cv.ContextDim,
			w0: tensor.PackWeight(get("causal2vec.mlp.0.weight", H*cv.ContextDim), H, cv.ContextDim, false),
			w2: tensor.PackWeight(get("causal2vec.mlp.2.weight", H*H), H, H, false)}
		if cv.Bias {
			c.b0, c.b2 = get("causal2vec.mlp.0.bias", H), get("causal2vec.mlp.2.bias", H)
		}
		e.c2v = c
	}
	if hc := cfg.PoolingHead; hc != nil {
		h := &embHead{mode: hc.Mode, r: hc.Latents, h: hc.Heads, latents: get("pooling.latents", hc.Latents*H)}
		if hc.Mode == model.PoolingMultiLayer {
			h.layerW = get("pooling.layer_weights", cfg.NumHiddenLayers*H)
		}
		lin := func(name string) *tensor.Weight {
			return tensor.PackWeight(get("pooling."+name+".weight", H*H), H, H, false)
		}
		h.k, h.v, h.o, h.fc1, h.fc2 = lin("k_proj"), lin("v_proj"), lin("o_proj"), lin("mlp.fc1"), lin("mlp.fc2")
		h.b1, h.b2 = get("pooling.mlp.fc1.bias", H), get("pooling.mlp.fc2.bias", H)
		e.head = h
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("llama: the checkpoint lacks what config.json's technique needs: %v", bad)
	}
	if g.LabelHead != nil {
		if g.Labels <= 0 || len(g.LabelHead) != H*g.Labels {
			return nil, fmt.Errorf("llama: label head of %d values is not hidden %d × %d labels", len(g.LabelHead), H, g.Labels)
		}
		e.label = tensor.PackWeight(g.LabelHead, g.Labels, H, true)
	}
	switch { // the graph's order (BuildLlama's outputs)
	case cfg.MemoryTokens > 0, cfg.Causal2Vec != nil:
		e.output = model.OutputEmbedding
	case e.label != nil:
		e.output = model.OutputLogits
	case cfg.PoolingHead != nil:
		e.output = model.OutputEmbedding
	default:
		e.output = model.OutputHidden
	}
	return e, nil
}

// Output is the graph output Forward computes: model.OutputHidden
// (N×T×hidden), model.OutputEmbedding (N×Dim()) or model.OutputLogits
// (N×Dim()).
func (e *Embedder) Output() string { return e.output }

// Dim is the width of Forward's rows: the hidden size, twice it for
// Causal2Vec, the number of labels for a reranker.
func (e *Embedder) Dim() int {
	switch {
	case e.cfg.MemoryTokens > 0:
		return e.cfg.HiddenSize
	case e.c2v != nil:
		return 2 * e.cfg.HiddenSize
	case e.label != nil:
		return e.label.N
	}
	return e.cfg.HiddenSize
}

// Config is the model's config (do not modify it).
func (e *Embedder) Config() *model.Config { return &e.cfg }

// EmbedBatch is N right-padded token sequences of length T, row-major
// N×T (tokenizer.Pad's output): Mask is 1 for a real token, 0 for
// padding, and each sequence starts with a real token. AutoRegEmbed's
// memory tokens are ids vocab_size…vocab_size+k−1; Causal2Vec's
// contextual token goes where an id is model.ContextPlaceholder, made
// from the sequence's row of Context (N×context_dim).
type EmbedBatch struct {
	N, T      int
	IDs, Mask []int64
	Context   []float32
}

// validate checks b and returns each sequence's computed length (up to its
// last real token) and the index of its last token as the graph finds it
// (sum(mask) − 1).
func (e *Embedder) validate(b *EmbedBatch) (lens, last []int, err error) {
	cfg := &e.cfg
	NT := b.N * b.T
	if b.N <= 0 || b.T <= 0 || len(b.IDs) != NT || len(b.Mask) != NT {
		return nil, nil, fmt.Errorf("llama: batch shape N=%d T=%d does not match its %d ids and %d mask values", b.N, b.T, len(b.IDs), len(b.Mask))
	}
	if b.T > cfg.MaxPositionEmbeddings {
		return nil, nil, fmt.Errorf("llama: sequence length %d exceeds max_position_embeddings %d", b.T, cfg.MaxPositionEmbeddings)
	}
	if e.c2v != nil && len(b.Context) != b.N*e.c2v.dim {
		return nil, nil, fmt.Errorf("llama: a Causal2Vec batch of %d sequences needs %d×%d context values, got %d", b.N, b.N, e.c2v.dim, len(b.Context))
	}
	V, k := int64(cfg.VocabSize), int64(cfg.MemoryTokens)
	lens, last = make([]int, b.N), make([]int, b.N)
	for n := 0; n < b.N; n++ {
		if b.Mask[n*b.T] == 0 {
			return nil, nil, fmt.Errorf("llama: sequence %d has no tokens (its mask starts with 0)", n)
		}
		sum, placeholder := 0, false
		for t := 0; t < b.T; t++ {
			if b.Mask[n*b.T+t] != 0 {
				lens[n] = t + 1
				sum++
			}
		}
		last[n] = sum - 1
		for t := 0; t < b.T; t++ {
			id := b.IDs[n*b.T+t]
			switch {
			case id >= 0 && id < V:
			case k > 0 && id >= V && id < V+k:
				if t >= lens[n] {
					return nil, nil, fmt.Errorf("llama: sequence %d: memory token %d at position %d is in the padding", n, id, t)
				}
			case e.c2v != nil && id == model.ContextPlaceholder:
				if t < lens[n] {
					placeholder = true
				}
			default:
				return nil, nil, fmt.Errorf("llama: token id %d at position %d of sequence %d outside the vocabulary of %d", id, t, n, V+k)
			}
		}
		if e.c2v != nil && !placeholder {
			return nil, nil, fmt.Errorf("llama: sequence %d of a Causal2Vec batch has no contextual token's placeholder (id %d)", n, model.ContextPlaceholder)
		}
	}
	return lens, last, nil
}

// embWork is one Forward's activations, reused between calls.
type embWork struct {
	x, xn, qkv, ctx, tmp, gu, act, keyBias []float32
	att                                    []ops.AttScratch
	q8                                     q8Work // an int8 graph's quantized inputs
}

func growF(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}

// Forward runs the model over b with up to threads goroutines per op
// (≤ 0: GOMAXPROCS) and returns the graph's output (Output): for
// model.OutputHidden the last hidden state N×T×hidden, whose rows past a
// sequence's last real token are zero (pool with the mask); otherwise
// N×Dim().
//
// Per layer, on the real rows only: RMSNorm, the query, key and value
// projections as one product (Qwen3's per-head RMSNorm of queries and
// keys), the rotary positions, attention per (sequence, head) on
// goroutines taking tasks in turn (grouped-query heads read their key and
// value head), the output projection and the residual, RMSNorm, the gate
// and up projections as one product with SwiGLU on each block of rows,
// the down projection and the residual.
func (e *Embedder) Forward(b *EmbedBatch, threads int) ([]float32, error) {
	lens, last, err := e.validate(b)
	if err != nil {
		return nil, err
	}
	th := threads
	if th <= 0 {
		th = runtime.GOMAXPROCS(0)
	}
	cfg := &e.cfg
	N, T := b.N, b.T
	H, I, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	nh, nkv := cfg.NumAttentionHeads, cfg.KVHeads()
	QW := (nh + 2*nkv) * hd // a qkv row
	V := int64(cfg.VocabSize)
	eps := float32(cfg.RMSNormEps)
	offs := make([]int, N+1)
	for n := range lens {
		offs[n+1] = offs[n] + lens[n]
	}
	R := offs[N]
	w := e.work.Get().(*embWork)
	defer e.work.Put(w)
	x, xn, tmp := growF(&w.x, R*H), growF(&w.xn, R*H), growF(&w.tmp, R*H)
	qkv, ctx := growF(&w.qkv, R*QW), growF(&w.ctx, R*nh*hd)
	gu, act := growF(&w.gu, R*2*I), growF(&w.act, R*I)
	keyBias := growF(&w.keyBias, R)

	var contextual []float32 // Causal2Vec's C, N×H
	if c := e.c2v; c != nil {
		h1 := make([]float32, N*H)
		c.w0.MatMul(h1, H, b.Context, c.dim, N, c.b0, th)
		ops.GELUInPlace(h1)
		contextual = make([]float32, N*H)
		c.w2.MatMul(contextual, H, h1, H, N, c.b2, th)
	}
	pos := make([]int, R) // each real row's position
	for n := range lens {
		for t := 0; t < lens[n]; t++ {
			r := offs[n] + t
			pos[r] = t
			keyBias[r] = 0
			if b.Mask[n*T+t] == 0 {
				keyBias[r] = float32(math.Inf(-1))
			}
			id := b.IDs[n*T+t]
			var src []float32
			switch {
			case id == model.ContextPlaceholder:
				src = contextual[n*H : n*H+H]
			case id >= V:
				src = e.memory[(id-V)*int64(H) : (id-V+1)*int64(H)]
			default:
				src = e.embed[id*int64(H) : (id+1)*int64(H)]
			}
			copy(x[r*H:r*H+H], src)
		}
	}
	// A multi-layer head reads every layer's output at each sequence's
	// last token.
	var layerRows []float32 // L×N×H
	multi := e.head != nil && e.head.mode == model.PoolingMultiLayer
	if multi {
		layerRows = make([]float32, len(e.layers)*N*H)
	}
	if len(w.att) < th {
		w.att = make([]ops.AttScratch, th)
	}
	att := ops.PackedAttention{H: nh, KV: nkv, D: hd, Causal: e.causal, Lens: lens, Offs: offs, KeyBias: keyBias}
	half := hd / 2
	rope := func(v []float32, t int) { // one head's rotary positions, in place
		cs, sn := e.cos[t*half:t*half+half], e.sin[t*half:t*half+half]
		x1, x2 := v[:half], v[half:hd]
		for i := range x1 {
			a, c := x1[i], x2[i]
			x1[i] = a*cs[i] - c*sn[i]
			x2[i] = c*cs[i] + a*sn[i]
		}
	}
	ops.ParallelFor(R, th, func(lo, hi int) {
		ops.RMSNormRows(xn[lo*H:hi*H], x[lo*H:hi*H], e.layers[0].ln1, hi-lo, H, eps)
	})
	for l := range e.layers {
		ly := &e.layers[l]
		err := w.product(ly.qkv, ly.q8.at(0), qkv, QW, xn, H, R, ly.qkvBias, th, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row := qkv[r*QW : r*QW+QW]
				if ly.qn != nil { // Qwen3: RMSNorm of each query and key head
					ops.RMSNormRows(row[:nh*hd], row[:nh*hd], ly.qn, nh, hd, eps)
					ops.RMSNormRows(row[nh*hd:(nh+nkv)*hd], row[nh*hd:(nh+nkv)*hd], ly.kn, nkv, hd, eps)
				}
				for h := 0; h < nh+nkv; h++ {
					rope(row[h*hd:h*hd+hd], pos[r])
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("llama: layer %d Q/K/V: %w", l, err)
		}
		if err := att.Forward(ctx, qkv, w.att[:th]); err != nil {
			return nil, fmt.Errorf("llama: layer %d attention: %w", l, err)
		}
		// x += ctx·Woᵀ; xn = RMSNorm(x).
		err = w.product(ly.o, ly.q8.at(1), tmp, H, ctx, nh*hd, R, nil, th, func(lo, hi int) {
			xs, ts := x[lo*H:hi*H], tmp[lo*H:hi*H]
			for i, v := range ts {
				xs[i] += v
			}
			ops.RMSNormRows(xn[lo*H:hi*H], xs, ly.ln2, hi-lo, H, eps)
		})
		if err != nil {
			return nil, fmt.Errorf("llama: layer %d output projection: %w", l, err)
		}
		err = w.product(ly.gateUp, ly.q8.at(2), gu, 2*I, xn, H, R, nil, th, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				ops.SwiGLURow(act[r*I:r*I+I], gu[r*2*I:r*2*I+I], gu[r*2*I+I:r*2*I+2*I]) // SwiGLUForward's bits
			}
		})
		if err != nil {
			return nil, fmt.Errorf("llama: layer %d gate and up projections: %w", l, err)
		}
		// x += act·Wdownᵀ; xn = the next layer's input norm, or the final one.
		gain := e.norm
		if l+1 < len(e.layers) {
			gain = e.layers[l+1].ln1
		}
		err = w.product(ly.down, ly.q8.at(3), tmp, H, act, I, R, nil, th, func(lo, hi int) {
			xs, ts := x[lo*H:hi*H], tmp[lo*H:hi*H]
			for i, v := range ts {
				xs[i] += v
			}
			ops.RMSNormRows(xn[lo*H:hi*H], xs, gain, hi-lo, H, eps)
		})
		if err != nil {
			return nil, fmt.Errorf("llama: layer %d down projection: %w", l, err)
		}
		if multi && l+1 < len(e.layers) {
			for n := range lens {
				r := offs[n] + last[n]
				copy(layerRows[(l*N+n)*H:(l*N+n+1)*H], x[r*H:r*H+H])
			}
		}
	}
	// xn is now the last hidden state (after the final norm).
	switch {
	case e.cfg.MemoryTokens > 0: // the mean of the memory tokens' states
		out := make([]float32, N*H)
		inv := 1 / float32(e.cfg.MemoryTokens)
		for n := range lens {
			o := out[n*H : n*H+H]
			for t := 0; t < lens[n]; t++ {
				if b.IDs[n*T+t] >= V {
					r := offs[n] + t
					for c, v := range xn[r*H : r*H+H] {
						o[c] += v * inv
					}
				}
			}
		}
		return out, nil
	case e.c2v != nil: // [h_C; h_EOS]
		out := make([]float32, N*2*H)
		for n := range lens {
			for t := 0; t < lens[n]; t++ {
				if b.IDs[n*T+t] == model.ContextPlaceholder {
					copy(out[n*2*H:n*2*H+H], xn[(offs[n]+t)*H:(offs[n]+t+1)*H])
					break
				}
			}
			r := offs[n] + last[n]
			copy(out[n*2*H+H:n*2*H+2*H], xn[r*H:r*H+H])
		}
		return out, nil
	case e.label != nil: // the label tokens' logits at the last token
		rows := make([]float32, N*H)
		for n := range lens {
			r := offs[n] + last[n]
			copy(rows[n*H:n*H+H], xn[r*H:r*H+H])
		}
		out := make([]float32, N*e.label.N)
		e.label.MatMul(out, e.label.N, rows, H, N, nil, th)
		return out, nil
	case e.head != nil:
		if multi {
			for n := range lens {
				r := offs[n] + last[n]
				L := len(e.layers) - 1
				copy(layerRows[(L*N+n)*H:(L*N+n+1)*H], xn[r*H:r*H+H])
			}
			return e.headPool(layerRows, N, th), nil
		}
		return e.latentPool(xn, lens, offs, keyBias, th), nil
	}
	out := make([]float32, N*T*H)
	for n := range lens {
		copy(out[n*T*H:], xn[offs[n]*H:offs[n+1]*H])
	}
	return out, nil
}

// latentPool is the latent pooling head over each sequence's last hidden
// states xn (real rows back to back; keyBias hides holes in the mask).
func (e *Embedder) latentPool(xn []float32, lens, offs []int, keyBias []float32, th int) []float32 {
	H, R := e.cfg.HiddenSize, offs[len(lens)]
	kp, vp := make([]float32, R*H), make([]float32, R*H)
	e.head.k.MatMul(kp, H, xn[:R*H], H, R, nil, th)
	e.head.v.MatMul(vp, H, xn[:R*H], H, R, nil, th)
	return e.headRest(kp, vp, lens, offs, keyBias, th)
}

// headPool is the multi-layer pooling head over rows (L×N×H: layer l's
// state at sequence n's last token), plus the trainable layer weights.
func (e *Embedder) headPool(rows []float32, N, th int) []float32 {
	H, L := e.cfg.HiddenSize, len(e.layers)
	xs := make([]float32, N*L*H) // sequence-major: N×L×H
	for n := 0; n < N; n++ {
		for l := 0; l < L; l++ {
			dst, src, lw := xs[(n*L+l)*H:(n*L+l+1)*H], rows[(l*N+n)*H:(l*N+n+1)*H], e.head.layerW[l*H:(l+1)*H]
			for c := range dst {
				dst[c] = src[c] + lw[c]
			}
		}
	}
	kp, vp := make([]float32, N*L*H), make([]float32, N*L*H)
	e.head.k.MatMul(kp, H, xs, H, N*L, nil, th)
	e.head.v.MatMul(vp, H, xs, H, N*L, nil, th)
	lens, offs := make([]int, N), make([]int, N+1)
	for n := range lens {
		lens[n], offs[n+1] = L, (n+1)*L
	}
	return e.headRest(kp, vp, lens, offs, make([]float32, N*L), th)
}

// headRest is the head after its key and value projections kp, vp (rows
// of sequence n at offs[n]…, lens[n] of them): per head P =
// softmax(latents·Kᵀ/√d + keyBias), Z = (P·V)·Woᵀ, Y = Z + fc2(GELU(fc1(Z))),
// and the mean of Y's rows, N×H.
func (e *Embedder) headRest(kp, vp []float32, lens, offs []int, keyBias []float32, th int) []float32 {
	hc := e.head
	H, N, r := e.cfg.HiddenSize, len(lens), hc.r
	d := H / hc.h
	scale := float32(1 / math.Sqrt(float64(d)))
	c := make([]float32, N*r*H)
	ops.ParallelFor(N*hc.h, th, func(lo, hi int) {
		var s []float32
		for task := lo; task < hi; task++ {
			n, h := task/hc.h, task%hc.h
			L, o := lens[n], offs[n]
			s = growF(&s, L)
			for i := 0; i < r; i++ {
				q := hc.latents[i*H+h*d : i*H+h*d+d]
				for j := 0; j < L; j++ {
					kr := kp[(o+j)*H+h*d : (o+j)*H+h*d+d]
					var dot float32
					for t, qv := range q {
						dot += qv * kr[t]
					}
					s[j] = dot
				}
				inv := 1 / ops.ExpScaled(s, keyBias[o:o+L], scale)
				out := c[(n*r+i)*H+h*d : (n*r+i)*H+h*d+d]
				for j, p := range s {
					vr := vp[(o+j)*H+h*d : (o+j)*H+h*d+d]
					for t, vv := range vr {
						out[t] += p * vv
					}
				}
				for t := range out {
					out[t] *= inv
				}
			}
		}
	})
	z, u := make([]float32, N*r*H), make([]float32, N*r*H)
	hc.o.MatMul(z, H, c, H, N*r, nil, th)
	hc.fc1.MatMul(u, H, z, H, N*r, hc.b1, th)
	ops.GELUInPlace(u)
	y := c // reused: y = z + fc2(u)
	hc.fc2.MatMul(y, H, u, H, N*r, hc.b2, th)
	out := make([]float32, N*H)
	for n := 0; n < N; n++ {
		o := out[n*H : n*H+H]
		for i := 0; i < r; i++ {
			zr, yr := z[(n*r+i)*H:(n*r+i+1)*H], y[(n*r+i)*H:(n*r+i+1)*H]
			for t := range o {
				o[t] += zr[t] + yr[t]
			}
		}
		for t := range o {
			o[t] /= float32(r)
		}
	}
	return out
}
