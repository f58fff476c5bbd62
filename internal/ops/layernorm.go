package ops

import "math"

// LayerNormForward normalises each of rows rows of width C of inp to zero
// mean and unit variance (the variance summed in float64), then scales by w
// and shifts by b, into out; mean and rstd receive each row's mean and
// 1/sqrt(var+eps) for the backward.
func LayerNormForward(out, mean, rstd, inp, w, b []float32, rows, C int, eps float32, th int) {
	ParallelFor(rows, th, func(lo, hi int) {
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

// LayerNormBackward adds to dinp (and to dw, db when not nil) the gradient
// given dout. The input rows go in parallel; the gain and bias sums go in
// parallel over columns so each column is summed in row order.
func LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd []float32, rows, C int, th int) {
	ParallelFor(rows, th, func(lo, hi int) {
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
	ParallelFor(C, th, func(lo, hi int) {
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
