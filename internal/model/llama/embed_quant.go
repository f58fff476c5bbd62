package llama

import (
	"fmt"
	"slices"

	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
)

// The products of an int8 decoder graph (model/onnx's BuildWith with
// Quantize int8: every layer product is rowQuantizedMatMul), with that
// graph's arithmetic:
//
//	y = ((Σ_k (q_k − 128)·W[k, j]) · Scale[j]) · s (+ bias[j])
//
// where the input row x is quantized on its own, s = max(max|x|, 1e-12)·
// (1/127) and q = clamp(round(x/s) + 128, 0, 255), half to even
// (internal/ops' QuantizeRows, as ONNX Runtime's QuantizeLinear), and the
// sum is exact in int32 (internal/tensor's Int8Weight: VNNI, AVX2 or Go,
// the same bits), each float32 operation rounded as MLAS's
// MatMulIntegerToFloat then the graph's Mul (and Qwen2's Add) do. The
// query, key and value products share their input and so its
// quantization: they run as one product of stacked columns, as do the
// gate and up products; every output column is the graph's. Everything
// between the products (RMSNorm, rotary positions, attention, SwiGLU, the
// residuals) is the float32 forward's, which agrees with ONNX Runtime's up
// to float32 rounding: an input near a rounding boundary of the
// quantization may land one step away from ONNX Runtime's.

// q8Weight is one int8 product packed for the int8 GEMM, with its
// per-column scales.
type q8Weight struct {
	w     *tensor.Int8Weight
	scale []float32
}

// q8Layer is a layer's int8 products: Q/K/V stacked, the output
// projection, gate/up stacked, and the down projection.
type q8Layer struct {
	p [4]q8Weight
}

// at is product i of the layer (0 Q/K/V, 1 output, 2 gate/up, 3 down), or
// nil when l is (a float32 graph's layer).
func (l *q8Layer) at(i int) *q8Weight {
	if l == nil {
		return nil
	}
	return &l.p[i]
}

// newQ8Layer packs the int8 products of the layer whose projections'
// module names are names (Layer.Names: q, k, v, o, gate, up, down).
func newQ8Layer(lin map[string]*onnxfile.Int8Columns, names [7]string) (*q8Layer, error) {
	get := func(i int) (*onnxfile.Int8Columns, error) {
		ql := lin[names[i]]
		if ql == nil || len(ql.W) != ql.In*ql.Out || len(ql.Scale) != ql.Out {
			return nil, fmt.Errorf("llama: int8 product %s missing or misshapen", names[i])
		}
		return ql, nil
	}
	// stack packs products sharing an input as one, their columns side by
	// side (W is in×out, so the rows are concatenated column blocks).
	stack := func(idx ...int) (q8Weight, error) {
		var ls []*onnxfile.Int8Columns
		out := 0
		for _, i := range idx {
			ql, err := get(i)
			if err != nil {
				return q8Weight{}, err
			}
			if len(ls) > 0 && ql.In != ls[0].In {
				return q8Weight{}, fmt.Errorf("llama: int8 products %s and %s read inputs of %d and %d values", names[idx[0]], names[i], ls[0].In, ql.In)
			}
			ls = append(ls, ql)
			out += ql.Out
		}
		in := ls[0].In
		w := make([]int8, 0, in*out)
		var sc []float32
		for k := 0; k < in; k++ {
			for _, ql := range ls {
				w = append(w, ql.W[k*ql.Out:(k+1)*ql.Out]...)
			}
		}
		for _, ql := range ls {
			sc = append(sc, ql.Scale...)
		}
		pw, err := tensor.PackInt8Weight(w, out, in, true)
		if err != nil {
			return q8Weight{}, fmt.Errorf("llama: %s: %w", names[idx[0]], err)
		}
		return q8Weight{w: pw, scale: slices.Clip(sc)}, nil
	}
	var l q8Layer
	var err error
	for i, idx := range [4][]int{{0, 1, 2}, {3}, {4, 5}, {6}} {
		if l.p[i], err = stack(idx...); err != nil {
			return nil, err
		}
	}
	return &l, nil
}

// q8Work is a Forward's quantized product inputs and their row scales.
type q8Work struct {
	a []uint8
	s []float32
}

// product sets c (m rows of stride ldc) to a·Wᵀ + bias for the m rows of
// a (stride lda, k = lda values each): through q when it is not nil (the
// int8 product, a quantized per row first), else through f; then runs on
// each finished block of rows as in Weight.MatMulThen.
func (w *embWork) product(f *tensor.Weight, q *q8Weight, c []float32, ldc int, a []float32, lda, m int, bias []float32, th int, then func(lo, hi int)) error {
	if q == nil {
		f.MatMulThen(c, ldc, a, lda, m, bias, th, then)
		return nil
	}
	k := q.w.K
	if lda != k {
		return fmt.Errorf("llama: int8 product over %d values reads rows of stride %d", k, lda)
	}
	ldq := tensor.Int8Stride(k)
	if cap(w.q8.a) < m*ldq {
		w.q8.a = make([]uint8, m*ldq)
	}
	qa, rs := w.q8.a[:m*ldq], growF(&w.q8.s, m)
	ops.ParallelFor(m, th, func(r0, r1 int) {
		ops.QuantizeRows(qa[r0*ldq:], ldq, a[r0*lda:], r1-r0, k, rs[r0:r1])
	})
	return q.w.MatMulThen(c, ldc, qa, ldq, m, 128, q.scale, rs, bias, th, then)
}
