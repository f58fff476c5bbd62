package llama

import (
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
)

// LayerActs is one decoder layer's activations over a block of rows, as
// LayerForward writes them: the trainer (internal/train/decoder) keeps
// them for its backward, generation (Extend) reuses one set for every
// layer. Each slice is rows × its width; the Qwen3 ones (QRaw, KRaw,
// QRstd, KRstd) are used only with Config.QKNorm, XA[i] only when
// projection i has LoRA factors.
type LayerActs struct {
	X, XN1, Rstd1            []float32 // layer input (the residual stream), its RMSNorm, 1/rms
	QRaw, KRaw, QRstd, KRstd []float32 // the query and key projections before their per-head RMSNorm
	Q, K, V                  []float32 // after the q/k norm and rotation: rows×H·D, rows×KV·D
	Ctx                      []float32 // attention's output, rows×H·D
	H, XN2, Rstd2            []float32 // x + attention, its RMSNorm, 1/rms
	G, U, Act                []float32 // gate, up, silu(gate)·up: rows×intermediate
	XA                       [7][]float32
}

// LayerPass is what differs between LayerForward's callers.
type LayerPass struct {
	Rows int
	// Packed, when not nil, holds the layer's projections packed
	// beforehand (Linear.PackW, in Projections() order): a decoding step's
	// few rows, where packing at every call would cost more than the
	// product. The results are the same bits.
	Packed *[7]*tensor.PackedB
	// Rope rotates x's rows of heads heads each to their positions.
	Rope func(x []float32, heads int)
	// Attend writes into a.Ctx the attention of a.Q over a.K and a.V (and
	// whatever keys and values the caller holds: a cache).
	Attend func(a *LayerActs)
}

// LayerForward runs layer l of the decoder over a.X (p.Rows rows) in
// transformers' order and writes its output to out (which may be a.X):
// RMSNorm; the query, key and value projections (with their biases and
// LoRA terms; Qwen3's per-head RMSNorm of queries and keys); the rotary
// positions; attention; the output projection and the residual; RMSNorm;
// the gate and up projections, SwiGLU, the down projection and the
// residual. It is the one layer forward of the trainer's decoder and of
// generation; serving's Embedder (embed.go) computes the exported graph's
// arithmetic instead (stacked products, an int8 graph's quantized ones).
func (m *Model) LayerForward(l int, a *LayerActs, out []float32, p LayerPass) {
	cfg := &m.Cfg
	rows, C, D := p.Rows, cfg.HiddenSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	eps := float32(cfg.RMSNormEps)
	th := m.threads()
	ly := &m.Layers[l]
	proj := func(i int, y, x []float32) {
		if p.Packed != nil {
			ly.Proj[i].ForwardPacked(p.Packed[i], y, x, a.XA[i], rows, th)
		} else {
			ly.Proj[i].Forward(y, x, a.XA[i], rows, th)
		}
	}
	ops.RMSNormForward(a.XN1, a.Rstd1, a.X, ly.LN1.W, rows, C, eps, th)
	if cfg.QKNorm() {
		proj(0, a.QRaw, a.XN1)
		proj(1, a.KRaw, a.XN1)
		ops.RMSNormForward(a.Q, a.QRstd, a.QRaw, ly.QN.W, rows*H, D, eps, th)
		ops.RMSNormForward(a.K, a.KRstd, a.KRaw, ly.KN.W, rows*KV, D, eps, th)
	} else {
		proj(0, a.Q, a.XN1)
		proj(1, a.K, a.XN1)
	}
	proj(2, a.V, a.XN1)
	p.Rope(a.Q, H)
	p.Rope(a.K, KV)
	p.Attend(a)
	proj(3, a.H, a.Ctx)
	ops.AddInPlace(a.H, a.X, th)
	ops.RMSNormForward(a.XN2, a.Rstd2, a.H, ly.LN2.W, rows, C, eps, th)
	proj(4, a.G, a.XN2)
	proj(5, a.U, a.XN2)
	ops.SwiGLUForward(a.Act, a.G, a.U, th)
	proj(6, out, a.Act)
	ops.AddInPlace(out, a.H, th)
}

// Grow sizes a's buffers (X aside: the caller's) for rows rows of layer l
// of m, reusing their memory where it suffices.
func (a *LayerActs) Grow(m *Model, l, rows int) {
	cfg := &m.Cfg
	C, F, D := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	a.XN1, a.Rstd1 = ops.Grow(a.XN1, rows*C), ops.Grow(a.Rstd1, rows)
	if cfg.QKNorm() {
		a.QRaw, a.KRaw = ops.Grow(a.QRaw, rows*H*D), ops.Grow(a.KRaw, rows*KV*D)
		a.QRstd, a.KRstd = ops.Grow(a.QRstd, rows*H), ops.Grow(a.KRstd, rows*KV)
	}
	a.Q, a.K, a.V = ops.Grow(a.Q, rows*H*D), ops.Grow(a.K, rows*KV*D), ops.Grow(a.V, rows*KV*D)
	a.Ctx = ops.Grow(a.Ctx, rows*H*D)
	a.H, a.XN2, a.Rstd2 = ops.Grow(a.H, rows*C), ops.Grow(a.XN2, rows*C), ops.Grow(a.Rstd2, rows)
	a.G, a.U, a.Act = ops.Grow(a.G, rows*F), ops.Grow(a.U, rows*F), ops.Grow(a.Act, rows*F)
	for i, lin := range m.Layers[l].Proj {
		if lin.LoRA != nil {
			a.XA[i] = ops.Grow(a.XA[i], rows*lin.LoRA.Rank)
		}
	}
}
