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
// row, not len(row)). It works in base 2: t = row·(scale·log2e) +
// bias·log2e (one FMA where vectors run), then 2^(t − max t) by exp2Poly's
// steps, which take five fewer operations than e^x's range reduction
// (Exp32) for the same accuracy (1.3 ulps from 2^r against Exp32's 1.4
// from e^x); values below 2^−126 are 0.
func ExpScaled(row, bias []float32, scale float32) float32 {
	s2 := scale * log2e32
	if sum, ok := expScaledVec(row, bias, s2); ok {
		return sum
	}
	bias = bias[:len(row)]
	done, mx := scaleBiasMaxVec(row, bias, s2)
	for j := done; j < len(row); j++ {
		row[j] = float32(row[j]*s2) + float32(bias[j]*log2e32)
		mx = max(mx, row[j])
	}
	return exp2SubSum(row, mx)
}

// exp2SubSum is ExpScaled's second step without AVX-512: row = 2^(row −
// mx) and their sum, eight at a time where there is AVX2, the rest in Go.
func exp2SubSum(row []float32, mx float32) float32 {
	done, sum := expSubSumVec(row, mx)
	for j := done; j < len(row); j++ {
		row[j] = exp2Poly(row[j] - mx)
		sum += row[j]
	}
	return sum
}

// log2e32 is log2(e) in float32, as the vector kernels hold it.
const log2e32 = float32(1.44269504088896341)

// The coefficients of exp2Poly's polynomial for 2^r on [−½, ½] (a
// minimax fit of the relative error, rounded to float32; c0 = 1): 1.3
// ulps at most with FMA, 1.7 without.
const (
	exp2C1 = 6.931471825e-01
	exp2C2 = 2.402264625e-01
	exp2C3 = 5.550328642e-02
	exp2C4 = 9.618489072e-03
	exp2C5 = 1.339992625e-03
	exp2C6 = 1.534579787e-04
)

// exp2Poly is 2^y for y ≤ 0, 0 below −126 (and for NaN): k = round(y),
// r = y − k (exact), p(r) by Horner, p·2^k. The vector kernels do the
// same steps with FMA; this scalar form (the rows' last len%8 values on
// the AVX2 path, every value without AVX2) rounds each product.
func exp2Poly(y float32) float32 {
	if !(y >= -126) {
		return 0
	}
	k := float32(math.RoundToEven(float64(y)))
	r := y - k
	p := float32(exp2C6)
	p = float32(p*r) + exp2C5
	p = float32(p*r) + exp2C4
	p = float32(p*r) + exp2C3
	p = float32(p*r) + exp2C2
	p = float32(p*r) + exp2C1
	p = float32(p*r) + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
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
