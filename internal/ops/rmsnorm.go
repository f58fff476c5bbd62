package ops

import "math"

// RMSNormForward: out[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w over rows of
// width C (Hugging Face's LlamaRMSNorm; Qwen3's q_norm/k_norm are the same
// op over rows·heads rows of width head_dim). rstd receives each row's
// 1/sqrt(mean(x²)+eps) for the backward.
func RMSNormForward(out, rstd, x, w []float32, rows, C int, eps float32, th int) {
	ParallelFor(rows, th, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rstd[r] = rmsNormRow(out[r*C:r*C+C], x[r*C:r*C+C], w, eps)
		}
	})
}

// RMSNormRows is RMSNormForward without rstd, on the calling goroutine
// (inference: model/llama's forward); the same values bit for bit. out
// may be x.
func RMSNormRows(out, x, w []float32, rows, C int, eps float32) {
	for r := 0; r < rows; r++ {
		rmsNormRow(out[r*C:r*C+C], x[r*C:r*C+C], w, eps)
	}
}

// rmsNormRow sets o = xr / sqrt(mean(xr²) + eps) ⊙ w (o may be xr) and
// returns the row's 1/sqrt(mean(xr²)+eps).
func rmsNormRow(o, xr, w []float32, eps float32) float32 {
	var s float64
	for _, v := range xr {
		s += float64(v) * float64(v)
	}
	rs := float32(1 / math.Sqrt(s/float64(len(xr))+float64(eps)))
	for c, v := range xr {
		o[c] = v * rs * w[c]
	}
	return rs
}

// RMSNormBackward adds to dx, and to dw when not nil, the gradient given
// dout: with n = x·rstd, dx = rstd·(w⊙d − n·mean(w⊙d⊙n)), dw = Σ_rows d⊙n.
// The gain's sums run in parallel over columns, each in row order.
func RMSNormBackward(dx, dw, dout, x, w, rstd []float32, rows, C, th int) {
	ParallelFor(rows, th, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, d := x[r*C:r*C+C], dout[r*C:r*C+C]
			rs := rstd[r]
			var dot float64
			for c, v := range xr {
				dot += float64(w[c]*d[c]) * float64(v*rs)
			}
			m := float32(dot / float64(C))
			di := dx[r*C : r*C+C]
			for c, v := range xr {
				n := v * rs
				di[c] += rs * (w[c]*d[c] - n*m)
			}
		}
	})
	if dw == nil {
		return
	}
	ParallelFor(C, th, func(lo, hi int) {
		for r := 0; r < rows; r++ {
			xr, d := x[r*C:r*C+C], dout[r*C:r*C+C]
			rs := rstd[r]
			for c := lo; c < hi; c++ {
				dw[c] += xr[c] * rs * d[c]
			}
		}
	})
}
