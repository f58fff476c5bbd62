package bert

import (
	"fmt"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// The forward of an int8 graph (model/onnx's BuildWith with Quantize int8,
// fuse.go), with that graph's arithmetic: per layer
//
//	qkv = rowq(x)·Wqkv + bqkv                 (bqkv added by the attention)
//	ctx = attention(qkv)                      float32, as the float graph
//	x   = SkipLayerNorm(rowq(ctx)·Wo, x, bo)
//	f   = FastGelu(rowq(x)·W1, b1)            the tanh GELU (BiasGelu, Relu: as the graph says)
//	x   = SkipLayerNorm(rowq(f)·W2, x, b2)
//
// where rowq quantizes each row (token) to uint8 around 128 with scale
// max|row|/127 and the product is ((Σ(q−128)·w)·wscale)·rowscale. Every
// row's products depend on that row alone, so a text's vector does not
// depend on its batch. The integer sums are internal/tensor's Int8Weight
// (VNNI, AVX2 or Go: the same bits); quantizing, FastGelu and
// SkipLayerNorm are internal/ops's int8 helpers, in ONNX Runtime's order
// of operations.
//
// Graphs converted before issue 64 (Int8Graph.QKVPerBatch) quantize the
// Q/K/V product's input over the whole batch instead (DynamicQuantizeLinear:
// one scale and zero point); here that sees only the batch's real tokens
// (padding is not computed), where ONNX Runtime's sees the padding rows
// too, so in a padded batch that scale may differ from ONNX Runtime's.

// qmodel is an int8 graph's layers and the activation its graph runs.
type qmodel struct {
	layers      []qlayer
	act         string // gelu_pytorch_tanh (FastGelu), gelu (BiasGelu) or relu
	qkvPerBatch bool   // Int8Graph.QKVPerBatch
}

// qlayer is one int8 layer: its products' weights packed for the int8
// GEMM with their per-column scales, the biases and the LayerNorms.
type qlayer struct {
	qkv, ao, fi, fo                     *tensor.Int8Weight
	qkvScale, aoScale, fiScale, foScale []float32
	qkvBias, aoBias, fiBias, foBias     []float32
	ln1w, ln1b, ln2w, ln2b              []float32
}

// NewInt8 builds a Model from cfg and an int8 graph's weights
// (ReadGraphInt8). The weights are not copied: the caller must not change
// them afterwards.
func NewInt8(cfg *model.Config, g *Int8Graph) (*Model, error) {
	if g == nil {
		return nil, fmt.Errorf("bert: no int8 graph")
	}
	switch g.Act {
	case ops.ActGELUTanh, ops.ActGELU, ops.ActReLU:
	default:
		return nil, fmt.Errorf("bert: int8 graph activation %q not supported (want %s, %s or %s)", g.Act, ops.ActGELUTanh, ops.ActGELU, ops.ActReLU)
	}
	return build(cfg, g.Tensors, g)
}

// newQLayer packs layer p's int8 products; what is missing or misshapen
// is appended to missing (as New lists its tensors).
func newQLayer(g *Int8Graph, p string, C, FF int, get func(string, ...int) []float32, missing *[]string) qlayer {
	pack := func(name string, in, out int) (*tensor.Int8Weight, []float32) {
		ql, ok := g.Linears[p+name]
		if !ok || ql.In != in || ql.Out != out || len(ql.Scale) != out {
			*missing = append(*missing, fmt.Sprintf("%s%s (int8 [%d %d] with %d scales)", p, name, in, out, out))
			return nil, make([]float32, out)
		}
		w, err := tensor.PackInt8Weight(ql.W, out, in, true)
		if err != nil {
			*missing = append(*missing, fmt.Sprintf("%s%s: %v", p, name, err))
			return nil, make([]float32, out)
		}
		return w, ql.Scale
	}
	var l qlayer
	mod := func(r arch.Role) string { return r.Module() }
	l.qkv, l.qkvScale = pack(arch.EncFusedQKV, C, 3*C)
	l.qkvBias = get(p+arch.EncFusedQKV+".bias", 3*C)
	l.ao, l.aoScale = pack(mod(arch.EncAttnOut), C, C)
	l.aoBias = get(p+mod(arch.EncAttnOut)+".bias", C)
	l.ln1w, l.ln1b = get(p+mod(arch.EncAttnNorm)+".weight", C), get(p+mod(arch.EncAttnNorm)+".bias", C)
	l.fi, l.fiScale = pack(mod(arch.EncInter), C, FF)
	l.fiBias = get(p+mod(arch.EncInter)+".bias", FF)
	l.fo, l.foScale = pack(mod(arch.EncOut), FF, C)
	l.foBias = get(p+mod(arch.EncOut)+".bias", C)
	l.ln2w, l.ln2b = get(p+mod(arch.EncOutNorm)+".weight", C), get(p+mod(arch.EncOutNorm)+".bias", C)
	return l
}

// qwork is an int8 Forward's buffers: the quantized inputs of the products
// (ctx and x, C bytes a row; the MLP's, FF) and their row scales, and the
// Q/K/V product's column scales.
type qwork struct {
	qa, qb, qc    []uint8
	sa, sb, sc, s []float32
}

func growU8(b *[]uint8, n int) []uint8 {
	if cap(*b) < n {
		*b = make([]uint8, n)
	}
	return (*b)[:n]
}

// forwardInt8 runs the int8 layers over the R real rows of x (R×C, the
// embeddings' output), leaving the last layer's output in x; res, qkv, ctx
// and ff are Forward's buffers.
func (m *Model) forwardInt8(w *work, x, res, qkv, ctx, ff []float32, att ops.PackedAttention, R, th int, p *Profile, attOps float64) error {
	C, FF := m.cfg.HiddenSize, m.cfg.IntermediateSize
	eps := float32(m.cfg.LayerNormEps)
	ldc, ldf := tensor.Int8Stride(C), tensor.Int8Stride(FF)
	q := &w.q
	qa, qb, qc := growU8(&q.qa, R*ldc), growU8(&q.qb, R*ldc), growU8(&q.qc, R*ldf)
	sa, sb, sc := grow(&q.sa, R), grow(&q.sb, R), grow(&q.sc, R)
	cs := grow(&q.s, 3*C)
	act := func(f []float32, b []float32) {
		switch m.q.act {
		case ops.ActGELUTanh:
			ops.FastGELUBias(f, b)
		case ops.ActGELU:
			addBias(f, b)
			ops.GELUInPlace(f)
		default:
			addBias(f, b)
			ops.ActivationForward(ops.ActReLU, f, f, 1)
		}
	}
	// The embeddings' LayerNorm, in ONNX Runtime's float32 arithmetic
	// (res holds their sum): its output is quantized next.
	gemmOps := func(k, n int) float64 { return 2 * float64(R) * float64(k) * float64(n) }
	t := p.now()
	ops.ParallelFor(R, th, func(r0, r1 int) {
		ops.LayerNormRows(x[r0*C:r1*C], res[r0*C:r1*C], m.elnw, m.elnb, r1-r0, C, eps, nil, 0, nil)
	})
	p.add(Elementwise, t, float64(R*C))
	for l := range m.q.layers {
		ly := &m.q.layers[l]
		t = p.now()
		// Q, K and V: x quantized per row (the embeddings' output here,
		// later the previous layer's, quantized by its last product's
		// epilogue below), or in older graphs over the whole batch.
		if l == 0 || m.q.qkvPerBatch {
			ops.ParallelFor(R, th, func(r0, r1 int) {
				ops.QuantizeRows(qa[r0*ldc:], ldc, x[r0*C:r1*C], r1-r0, C, sa[r0:r1])
			})
		}
		p.add(Elementwise, t, float64(R*C))
		t = p.now()
		var err error
		if m.q.qkvPerBatch {
			lo, hi := ops.MinMax(x[:R*C])
			scale, zp := ops.DynamicQuantParams(lo, hi)
			ops.ParallelFor(R, th, func(r0, r1 int) {
				ops.QuantizeWith(qa[r0*ldc:], ldc, x[r0*C:r1*C], r1-r0, C, scale, zp)
			})
			for j, s := range ly.qkvScale {
				cs[j] = scale * s
			}
			err = ly.qkv.MatMulThen(qkv, 3*C, qa, ldc, R, zp, cs, nil, ly.qkvBias, th, nil)
		} else {
			err = ly.qkv.MatMulThen(qkv, 3*C, qa, ldc, R, 128, ly.qkvScale, sa, ly.qkvBias, th, nil)
		}
		if err != nil {
			return fmt.Errorf("bert: layer %d Q/K/V: %w", l, err)
		}
		p.gemm(t, gemmOps(C, 3*C), 0)
		t = p.now()
		if err := att.Forward(ctx, qkv, w.att[:th]); err != nil {
			return fmt.Errorf("bert: layer %d attention: %w", l, err)
		}
		p.add(Attention, t, attOps)
		// x ← SkipLayerNorm(rowq(ctx)·Wo, x, bo), then x quantized per
		// row for the MLP, per block of rows.
		t = p.now()
		ops.ParallelFor(R, th, func(r0, r1 int) {
			ops.QuantizeRows(qa[r0*ldc:], ldc, ctx[r0*C:r1*C], r1-r0, C, sa[r0:r1])
		})
		p.add(Elementwise, t, float64(R*C))
		t = p.now()
		err = ly.ao.MatMulThen(res, C, qa, ldc, R, 128, ly.aoScale, sa, nil, th, p.fused(func(r0, r1 int) {
			ops.SkipLayerNormQuantize(x[r0*C:r1*C], x[r0*C:r1*C], res[r0*C:r1*C], ly.aoBias, ly.ln1w, ly.ln1b, r1-r0, C, eps, qb[r0*ldc:], ldc, sb[r0:r1])
		}))
		if err != nil {
			return fmt.Errorf("bert: layer %d attention output: %w", l, err)
		}
		p.gemm(t, gemmOps(C, C), float64(2*R*C))
		t = p.now()
		err = ly.fi.MatMulThen(ff, FF, qb, ldc, R, 128, ly.fiScale, sb, nil, th, p.fused(func(r0, r1 int) {
			if m.q.act == ops.ActGELUTanh {
				ops.FastGELUBiasQuantize(ff[r0*FF:r1*FF], ly.fiBias, qc[r0*ldf:], ldf, sc[r0:r1])
				return
			}
			act(ff[r0*FF:r1*FF], ly.fiBias)
			ops.QuantizeRows(qc[r0*ldf:], ldf, ff[r0*FF:r1*FF], r1-r0, FF, sc[r0:r1])
		}))
		if err != nil {
			return fmt.Errorf("bert: layer %d intermediate: %w", l, err)
		}
		p.gemm(t, gemmOps(C, FF), float64(2*R*FF))
		t = p.now()
		err = ly.fo.MatMulThen(res, C, qc, ldf, R, 128, ly.foScale, sc, nil, th, p.fused(func(r0, r1 int) {
			if m.q.qkvPerBatch {
				ops.SkipLayerNorm(x[r0*C:r1*C], x[r0*C:r1*C], res[r0*C:r1*C], ly.foBias, ly.ln2w, ly.ln2b, r1-r0, C, eps)
				return
			}
			// x quantized per row too: the next layer's Q/K/V input.
			ops.SkipLayerNormQuantize(x[r0*C:r1*C], x[r0*C:r1*C], res[r0*C:r1*C], ly.foBias, ly.ln2w, ly.ln2b, r1-r0, C, eps, qa[r0*ldc:], ldc, sa[r0:r1])
		}))
		if err != nil {
			return fmt.Errorf("bert: layer %d output: %w", l, err)
		}
		p.gemm(t, gemmOps(FF, C), float64(2*R*C))
	}
	return nil
}

// addBias adds b to every row of x (rows of len(b) values).
func addBias(x, b []float32) {
	for r := 0; r+len(b) <= len(x); r += len(b) {
		row := x[r : r+len(b)]
		for i := range row {
			row[i] += b[i]
		}
	}
}
