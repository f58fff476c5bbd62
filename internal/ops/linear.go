package ops

import "github.com/anna-search/anna/internal/tensor"

// LoRA is a low-rank update of a weight W (out×in): W + Scale·B·A with A
// (Rank×in) and B (out×Rank).
type LoRA struct {
	A, B  *Param
	Rank  int
	Scale float32 // alpha / rank
}

// MergeInto adds Scale·B·A to w (out×in).
func (l *LoRA) MergeInto(w []float32, out, in int) {
	tensor.Gemm(false, false, out, in, l.Rank, l.Scale, l.B.W, l.Rank, l.A.W, in, 1, w, in, 1)
}

// Linear is y = x·Wᵀ (+ b) (+ Scale·(x·Aᵀ)·Bᵀ with LoRA), W out×in as in
// PyTorch's nn.Linear. Bias and LoRA may be nil. A Linear keeps a scratch
// buffer for its backward, so one Linear must not run two backwards at once.
type Linear struct {
	W, Bias *Param
	LoRA    *LoRA
	In, Out int
	dxa     []float32 // LoRA backward scratch, rows×Rank
}

// Forward writes out (rows×Out) from x (rows×In). With LoRA, xa (rows×Rank)
// receives x·Aᵀ, which Backward needs; it may be nil otherwise.
func (l *Linear) Forward(out, x, xa []float32, rows, th int) {
	if l.W.W == nil {
		tensor.GemmRows(true, rows, l.Out, l.In, 1, x, l.In, l.W.Base, 0, out, l.Out, th)
	} else {
		tensor.Gemm(false, true, rows, l.Out, l.In, 1, x, l.In, l.W.W, l.In, 0, out, l.Out, th)
	}
	l.adapt(out, x, xa, rows, th)
}

// PackW packs W for ForwardPacked (valid while W does not change: a frozen
// weight during generation).
func (l *Linear) PackW() *tensor.PackedB {
	if l.W.W == nil {
		return tensor.PackBTRows(l.W.Base, l.Out, l.In)
	}
	return tensor.PackBT(l.W.W, l.Out, l.In, l.In)
}

// ForwardPacked is Forward with W packed beforehand by PackW, bit for bit:
// for a few rows at a time (a decoding step), where packing W at every
// call would cost more than the product.
func (l *Linear) ForwardPacked(w *tensor.PackedB, out, x, xa []float32, rows, th int) {
	tensor.GemmPacked(rows, 1, x, l.In, w, 0, out, l.Out, th)
	l.adapt(out, x, xa, rows, th)
}

// adapt adds the LoRA term and the bias to x·Wᵀ in out.
func (l *Linear) adapt(out, x, xa []float32, rows, th int) {
	if lp := l.LoRA; lp != nil {
		tensor.Gemm(false, true, rows, lp.Rank, l.In, 1, x, l.In, lp.A.W, l.In, 0, xa, lp.Rank, th)
		tensor.Gemm(false, true, rows, l.Out, lp.Rank, lp.Scale, xa, lp.Rank, lp.B.W, lp.Rank, 1, out, l.Out, th)
	}
	if l.Bias != nil {
		b := l.Bias.W
		ParallelFor(rows, th, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				o := out[i*l.Out : i*l.Out+l.Out]
				for j, v := range b {
					o[j] += v
				}
			}
		})
	}
}

// Backward adds ∂/∂x to dx (when not nil) and the gradients of the
// unfrozen W, bias and LoRA factors, given dout (rows×Out) and Forward's x
// and xa.
func (l *Linear) Backward(dx, dout, x, xa []float32, rows, th int) {
	in, out := l.In, l.Out
	switch {
	case dx == nil:
	case l.W.W == nil:
		tensor.GemmRows(false, rows, in, out, 1, dout, out, l.W.Base, 1, dx, in, th)
	default:
		tensor.Gemm(false, false, rows, in, out, 1, dout, out, l.W.W, in, 1, dx, in, th)
	}
	if g := l.W.Grad(); g != nil {
		tensor.Gemm(true, false, out, in, rows, 1, dout, out, x, in, 1, g, in, th)
	}
	if lp := l.LoRA; lp != nil {
		r := lp.Rank
		// y += s·xa·Bᵀ, xa = x·Aᵀ: dB += s·doutᵀ·xa; dxa = s·dout·B;
		// dA += dxaᵀ·x; dx += dxa·A.
		if cap(l.dxa) < rows*r {
			l.dxa = make([]float32, rows*r)
		}
		dxa := l.dxa[:rows*r]
		tensor.Gemm(false, false, rows, r, out, lp.Scale, dout, out, lp.B.W, r, 0, dxa, r, th)
		if g := lp.B.Grad(); g != nil {
			tensor.Gemm(true, false, out, r, rows, lp.Scale, dout, out, xa, r, 1, g, r, th)
		}
		if g := lp.A.Grad(); g != nil {
			tensor.Gemm(true, false, r, in, rows, 1, dxa, r, x, in, 1, g, in, th)
		}
		if dx != nil {
			tensor.Gemm(false, false, rows, in, r, 1, dxa, r, lp.A.W, in, 1, dx, in, th)
		}
	}
	if g := l.Bias.Grad(); g != nil {
		ColSum(g, dout, rows, out, th)
	}
}

// ColSum adds the column sums of x (rows×cols) to dst, each column summed
// in row order by one goroutine.
func ColSum(dst, x []float32, rows, cols, th int) {
	ParallelFor(cols, th, func(lo, hi int) {
		d := dst[lo:hi]
		for r := 0; r < rows; r++ {
			for j, v := range x[r*cols+lo : r*cols+hi] {
				d[j] += v
			}
		}
	})
}
