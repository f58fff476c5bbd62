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
	// embed is the token table (vocab×H), norm the final RMSNorm's gain.
	embed, norm []float32
	cos, sin    []float32 // positions × head_dim/2, the graph's tables
	layers      []embLayer
	head        head      // what the graph outputs (head.go)
	work        sync.Pool // *embWork
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
	if e.head, err = newHead(cfg, g); err != nil {
		return nil, err
	}
	return e, nil
}

// Output is the graph output Forward computes: model.OutputHidden
// (N×T×hidden), model.OutputEmbedding (N×Dim()) or model.OutputLogits
// (N×Dim()).
func (e *Embedder) Output() string { return e.head.output() }

// Dim is the width of Forward's rows: the hidden size, twice it for
// Causal2Vec, the number of labels for a reranker.
func (e *Embedder) Dim() int { return e.head.dim() }

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
	V, k := int64(cfg.VocabSize), int64(cfg.MemoryTokens)
	lens, last = make([]int, b.N), make([]int, b.N)
	for n := 0; n < b.N; n++ {
		if b.Mask[n*b.T] == 0 {
			return nil, nil, fmt.Errorf("llama: sequence %d has no tokens (its mask starts with 0)", n)
		}
		sum := 0
		for t := 0; t < b.T; t++ {
			if b.Mask[n*b.T+t] != 0 {
				lens[n] = t + 1
				sum++
			}
		}
		last[n] = sum - 1
		for t := 0; t < b.T; t++ {
			if id := b.IDs[n*b.T+t]; (id < 0 || id >= V) && !e.head.owns(id) {
				return nil, nil, fmt.Errorf("llama: token id %d at position %d of sequence %d outside the vocabulary of %d", id, t, n, V+k)
			}
		}
	}
	if err := e.head.check(b, lens); err != nil {
		return nil, nil, err
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

	own := e.head.inputs(b, th) // the rows of the head's own ids
	pos := make([]int, R)       // each real row's position
	for n := range lens {
		for t := 0; t < lens[n]; t++ {
			r := offs[n] + t
			pos[r] = t
			keyBias[r] = 0
			if b.Mask[n*T+t] == 0 {
				keyBias[r] = float32(math.Inf(-1))
			}
			id := b.IDs[n*T+t]
			if id >= 0 && id < V {
				copy(x[r*H:r*H+H], e.embed[id*int64(H):(id+1)*int64(H)])
			} else {
				copy(x[r*H:r*H+H], own(n, id))
			}
		}
	}
	// A head that taps (multi-layer pooling) reads every layer's output
	// at each sequence's last token.
	pass := &embPass{b: b, H: H, L: len(e.layers), lens: lens, offs: offs, last: last, keyBias: keyBias}
	if e.head.taps() {
		pass.layerRows = make([]float32, len(e.layers)*N*H)
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
		if pass.layerRows != nil && l+1 < len(e.layers) {
			for n := range lens {
				r := pass.lastRow(n)
				copy(pass.layerRows[(l*N+n)*H:(l*N+n+1)*H], x[r*H:r*H+H])
			}
		}
	}
	// xn is now the last hidden state (after the final norm).
	pass.xn = xn
	return e.head.apply(pass, th), nil
}
