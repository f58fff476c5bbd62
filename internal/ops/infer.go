package ops

import "math"

// Inference-only forms of softmax and GELU (model/bert's forward): eight
// elements at a time in AVX2 with FMA where there is AVX2 (infer_amd64.s;
// ExpScaled sixteen at a time where there is AVX-512 too, the same values,
// softmax_avx512_amd64.s),
// the same formulas in Go elsewhere and for the last len%8 elements. They
// are not bit for bit the trainer's ops (which keep their rounding for
// reproducible checkpoints) but agree with them, and with the exact
// functions, to a few float32 ulps.

// SoftmaxScaled turns row into softmax(row·scale + bias), in place; bias
// (len(row) values) is 0 for a visible key and −Inf for a hidden one,
// which gets probability exactly 0. At least one key must be visible.
func SoftmaxScaled(row, bias []float32, scale float32) {
	inv := 1 / ExpScaled(row, bias, scale)
	for j := scaleVec(row, inv); j < len(row); j++ {
		row[j] *= inv
	}
}

// ExpScaled is SoftmaxScaled without the division: it sets row to
// e^(row·scale + bias − max) and returns the sum, for a caller that
// divides a product of the row instead (attention's P·V, D values a
// row, not len(row)).
func ExpScaled(row, bias []float32, scale float32) float32 {
	if sum, ok := expScaledVec(row, bias, scale); ok {
		return sum
	}
	bias = bias[:len(row)]
	done, mx := scaleBiasMaxVec(row, bias, scale)
	for j := done; j < len(row); j++ {
		row[j] = row[j]*scale + bias[j]
		mx = max(mx, row[j])
	}
	done, sum := expSubSumVec(row, mx)
	for j := done; j < len(row); j++ {
		row[j] = Exp32(row[j] - mx)
		sum += row[j]
	}
	return sum
}

// GELUInPlace sets x to x·Φ(x) = ½x(1 + erf(x/√2)) (PyTorch's exact GELU,
// erf as Erf32's rational function), in place.
func GELUInPlace(x []float32) {
	for i := geluVec(x); i < len(x); i++ {
		v := x[i]
		x[i] = 0.5 * v * (1 + Erf32(v*invSqrt2))
	}
}

// AddLayerNorm sets out to LayerNorm(x + res) row by row (rows of width C:
// mean and variance summed in float64, as LayerNormForward, though in
// another order), for inference: x + res is written back to res. out may
// be x.
func AddLayerNorm(out, x, res, w, b []float32, rows, C int, eps float32) {
	w, b = w[:C], b[:C]
	for r := 0; r < rows; r++ {
		xr, rr := x[r*C:r*C+C], res[r*C:r*C+C]
		done, s := addSumVec(xr, rr)
		for c := done; c < C; c++ {
			rr[c] += xr[c]
			s += float64(rr[c])
		}
		mu := float32(s / float64(C))
		done, v2 := sqDevSumVec(rr, mu)
		for _, v := range rr[done:] {
			d := v - mu
			v2 += float64(d * d)
		}
		rs := float32(1 / math.Sqrt(v2/float64(C)+float64(eps)))
		o := out[r*C : r*C+C]
		for c := normVec(o, rr, w, b, mu, rs); c < C; c++ {
			o[c] = (rr[c]-mu)*rs*w[c] + b[c]
		}
	}
}
