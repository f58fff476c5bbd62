package ops

import "math"

// The element-wise ops of a quantized BERT graph's forward (internal/model/bert on
// an int8 graph of internal/model/onnx): quantizing a product's input to uint8, per
// row (rowQuantizedMatMul's ReduceMax/ReduceMin/QuantizeLinear) or over a
// whole batch (DynamicQuantizeLinear), FastGelu with its bias, and
// SkipLayerNormalization's sum. They follow ONNX Runtime's CPU kernels'
// arithmetic (x/scale rounded half to even, clamped, plus the zero point;
// the sums in its order), so that the integer products see the same bytes
// as ONNX Runtime's up to the float32 rounding of what comes in.

// RowQuantScale is the scale of one row quantized per row: max(max|x|,
// 1e-12)·(1/127) in float32, so that x/scale lies in [−127, 127].
func RowQuantScale(x []float32) float32 {
	lo, hi := MinMax(x)
	return max(hi, -lo, 1e-12) * float32(1.0/127)
}

// QuantizeRows quantizes rows rows of C values of x (stride C) to uint8
// around zero point 128, each with its own scale (RowQuantScale, written
// to scales): q = clamp(round(x/s) + 128, 0, 255), rounding half to even,
// row r of q at q[r·ldq:]; bytes C to ldq of a row are left alone.
func QuantizeRows(q []uint8, ldq int, x []float32, rows, C int, scales []float32) {
	for r := 0; r < rows; r++ {
		xr := x[r*C : r*C+C]
		s := absMaxScale(absMax(xr))
		scales[r] = s
		quantizeRow128(q[r*ldq:r*ldq+C], xr, s)
	}
}

// absMax is the largest |x| (max(hi, −lo) of MinMax: RowQuantScale's).
func absMax(x []float32) float32 {
	done, m := absMax16(x)
	if done == 0 {
		lo, hi := MinMax(x)
		return max(hi, -lo)
	}
	for _, v := range x[done:] {
		m = max(m, abs32(v))
	}
	return m
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// absMaxScale is RowQuantScale's scale of a row whose largest |x| is m.
func absMaxScale(m float32) float32 { return max(m, 1e-12) * float32(1.0/127) }

// quantizeRow128 is the per-row quantization of anna's int8 forwards:
// quantizeRow with zero point 128, except that each value is multiplied
// by 1/s (rounded to float32 once a row) rather than divided by s. A
// vector division costs a dozen cycles where a product costs one half:
// it held QuantizeRows to 3.9 G values/s, 5.0 without it
// (BenchmarkInt8Elementwise, AVX-512). The code differs from x/s's by one
// step only where x/s lies within a float32 rounding of a half, far
// inside the quantization's own error. Every path (AVX-512, AVX2, Go)
// gives the same bytes.
func quantizeRow128(q []uint8, x []float32, s float32) {
	q = q[:len(x)]
	inv := 1 / s
	done := quantize16(q, x, inv)
	if done == 0 {
		done = quantizeMulVec(q, x, inv, 128)
	}
	for i := done; i < len(x); i++ {
		f := math.RoundToEven(float64(x[i]*inv)) + 128
		q[i] = uint8(max(0, min(255, f)))
	}
}

// DynamicQuantParams is DynamicQuantizeLinear's scale and zero point for
// values whose minimum is lo and maximum hi (ONNX Runtime's
// GetQuantizationParameter): the range widened to include 0, scale =
// (hi − lo)/255 (1 for an empty range), zero point round(−lo/scale)
// clamped to [0, 255], half to even.
func DynamicQuantParams(lo, hi float32) (scale float32, zp uint8) {
	lo, hi = min(lo, 0), max(hi, 0)
	scale = 1
	if hi != lo {
		scale = (hi - lo) / 255
	}
	z := 0 - lo/scale
	z = max(0, min(255, z))
	return scale, uint8(math.RoundToEven(float64(z)))
}

// MinMax returns the smallest and largest of x (+Inf, −Inf when empty).
func MinMax(x []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	done, l, h := minMaxVec(x)
	if done > 0 {
		lo, hi = l, h
	}
	for _, v := range x[done:] {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// QuantizeWith quantizes rows rows of C values of x (stride C) with one
// scale and zero point: q = clamp(round(x/scale) + zp, 0, 255), half to
// even, row r at q[r·ldq:].
func QuantizeWith(q []uint8, ldq int, x []float32, rows, C int, scale float32, zp uint8) {
	for r := 0; r < rows; r++ {
		quantizeRow(q[r*ldq:r*ldq+C], x[r*C:r*C+C], scale, zp)
	}
}

func quantizeRow(q []uint8, x []float32, s float32, zp uint8) {
	q = q[:len(x)]
	z := float64(zp)
	done := quantizeVec(q, x, s, zp)
	for i := done; i < len(x); i++ {
		v := x[i]
		f := math.RoundToEven(float64(v/s)) + z
		q[i] = uint8(max(0, min(255, f)))
	}
}

// FastGELU constants: ONNX Runtime's FastGelu, x·½(1 + tanh(x·(a + b·x²)))
// with a = √(2/π), b = 0.044715·√(2/π); and the rational function of its
// tanh (MLAS's, Eigen's fast tanh): on u clamped to [−9, 9], p(u)/q(u)
// with p odd of degree 13 and q even of degree 6, within a few float32
// ulps of tanh.
const (
	fastGeluA = 0.7978845608028654
	fastGeluB = 0.035677408136300125

	tanhA13 = -2.76076847742355e-16
	tanhA11 = 2.00018790482477e-13
	tanhA9  = -8.60467152213735e-11
	tanhA7  = 5.12229709037114e-08
	tanhA5  = 1.48572235717979e-05
	tanhA3  = 6.37261928875436e-04
	tanhA1  = 4.89352455891786e-03
	tanhB6  = 1.19825839466702e-06
	tanhB4  = 1.18534705686654e-04
	tanhB2  = 2.26843463243900e-03
	tanhB0  = 4.89352518554385e-03
)

// fastTanh is tanh(u) as the rational function above, its polynomials
// evaluated by fused multiply-adds (fma32: the vector kernels' bits).
func fastTanh(u float32) float32 {
	u = min(max(u, -9), 9)
	u2 := float32(u * u)
	p := fma32(tanhA13, u2, tanhA11)
	p = fma32(p, u2, tanhA9)
	p = fma32(p, u2, tanhA7)
	p = fma32(p, u2, tanhA5)
	p = fma32(p, u2, tanhA3)
	p = fma32(p, u2, tanhA1)
	p = float32(p * u)
	q := fma32(tanhB6, u2, tanhB4)
	q = fma32(q, u2, tanhB2)
	q = fma32(q, u2, tanhB0)
	return p / q
}

// fma32 is a·b + c rounded once to float32, as VFMADD does: the product
// is exact in float64 and the sum's error exact by TwoSum, so the one
// case where rounding the float64 sum to float32 differs from rounding
// the exact value (the sum on a float32 tie, the error off it) is put
// right.
func fma32(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	r := float32(s)
	if math.IsInf(s, 0) || math.IsNaN(s) || float64(r) == s {
		return r
	}
	bb := s - p
	e := (p - (s - bb)) + (cc - bb) // a·b + c = s + e exactly
	if e == 0 {
		return r
	}
	// s lies between r and its neighbour on s's side; a tie only if s is
	// their midpoint, and then the exact value's side is e's.
	o := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-float64(r))))
	if float64(r)+float64(o) != 2*s {
		return r
	}
	if (e > 0) == (float64(o) > float64(r)) {
		return o
	}
	return r
}

// FastGELUBiasQuantize is FastGELUBias then QuantizeRows of x (rows of
// len(bias) values) into q (stride ldq) and scales, each row in one pass
// where there is AVX-512.
func FastGELUBiasQuantize(x, bias []float32, q []uint8, ldq int, scales []float32) {
	C := len(bias)
	for r := 0; r+C <= len(x); r += C {
		row := x[r : r+C]
		done, m := fastGelu16(row, bias)
		if done == 0 {
			FastGELUBias(row, bias)
			m = absMax(row)
		} else if done < C {
			FastGELUBias(row[done:], bias[done:])
			for _, v := range row[done:] {
				m = max(m, abs32(v))
			}
		}
		s := absMaxScale(m)
		scales[r/C] = s
		quantizeRow128(q[(r/C)*ldq:(r/C)*ldq+C], row, s)
	}
}

// FastGELUBias sets x to FastGelu(x + bias), row by row (rows of
// len(bias) values): v = x + b, u = v·((b·v)·v + a), ½v·tanh(u) + ½v,
// the tanh form of GELU that quantized graphs use (tanh as fastTanh; each
// multiply-add fused, rounded once, as the vector kernels run them and as
// ONNX Runtime's FMA kernels round: with it the Go forward's int8 vectors
// equal ONNX Runtime's within 1e-6 for 21 of TestGoBackendInt8MatchesORT's
// 22 texts, 16 with each step rounded).
func FastGELUBias(x, bias []float32) {
	C := len(bias)
	for r := 0; r+C <= len(x); r += C {
		row := x[r : r+C]
		for i := fastGeluVec(row, bias); i < C; i++ {
			v := row[i] + bias[i]
			u := float32(v * fma32(float32(float32(fastGeluB)*v), v, fastGeluA))
			h := float32(0.5 * v)
			row[i] = fma32(h, fastTanh(u), h)
		}
	}
}

// SkipLayerNorm sets out to LayerNorm((y + x) + bias) row by row (rows of
// width C) with ONNX Runtime's SkipLayerNormalization arithmetic: the sum
// in that order, written back to y, then LayerNormRow. out may be x.
func SkipLayerNorm(out, x, y, bias, w, b []float32, rows, C int, eps float32) {
	SkipLayerNormQuantize(out, x, y, bias, w, b, rows, C, eps, nil, 0, nil)
}

// SkipLayerNormQuantize is SkipLayerNorm, then, when q is not nil,
// QuantizeRows of its output into q (stride ldq) and scales. The rows'
// sums are taken 16 rows at a time where there is AVX-512, 8 where there
// is AVX2 (each row's still in order, in its own lane), else 4
// interleaved, and each row's output is quantized as it is normalised.
func SkipLayerNormQuantize(out, x, y, bias, w, b []float32, rows, C int, eps float32, q []uint8, ldq int, scales []float32) {
	bias = bias[:C]
	for r := 0; r < rows; r++ {
		xr, yr := x[r*C:r*C+C], y[r*C:r*C+C]
		c := skipAdd16(yr, xr, bias)
		if c == 0 {
			c = skipAddVec(yr, xr, bias)
		}
		for ; c < C; c++ {
			yr[c] = (yr[c] + xr[c]) + bias[c]
		}
	}
	LayerNormRows(out, y, w, b, rows, C, eps, q, ldq, scales)
}

// LayerNormRows sets out's rows (C values each) to LayerNormRow of y's
// and, when q is not nil, quantizes each as QuantizeRows does. out may be
// y.
func LayerNormRows(out, y, w, b []float32, rows, C int, eps float32, q []uint8, ldq int, scales []float32) {
	w, b = w[:C], b[:C]
	var sum, sq [16]float32
	for r0 := 0; r0 < rows; r0 += 16 {
		n := min(16, rows-r0)
		if !rowSums16(y[r0*C:], n, C, sum[:], sq[:]) && !rowSumsVec(y[r0*C:], n, C, sum[:], sq[:]) {
			rowSums(y[r0*C:], n, C, sum[:], sq[:])
		}
		for i := 0; i < n; i++ {
			r := r0 + i
			mean, sd := layerNormStats(sum[i], sq[i], C, eps)
			o, yr := out[r*C:r*C+C], y[r*C:r*C+C]
			done, m := norm16(o, yr, w, b, mean, sd)
			if done == 0 {
				done, m = normInt8Vec(o, yr, w, b, mean, sd)
			}
			for c := done; c < C; c++ {
				o[c] = float32(float32((yr[c]-mean)/sd)*w[c]) + b[c]
				m = max(m, abs32(o[c]))
			}
			if q != nil {
				s := absMaxScale(m)
				scales[r] = s
				quantizeRow128(q[r*ldq:r*ldq+C], o, s)
			}
		}
	}
}

// rowSums sets sum[i] and sq[i] to Σv and Σ float32(v·v) of row i of y
// (rows rows of C values), each summed in order in float32, four rows
// interleaved (their sums are independent, so the CPU overlaps them).
func rowSums(y []float32, rows, C int, sum, sq []float32) {
	r := 0
	for ; r+4 <= rows; r += 4 {
		y0, y1, y2, y3 := y[r*C:r*C+C], y[(r+1)*C:(r+1)*C+C], y[(r+2)*C:(r+2)*C+C], y[(r+3)*C:(r+3)*C+C]
		var s0, s1, s2, s3, q0, q1, q2, q3 float32
		for c := range y0 {
			v0, v1, v2, v3 := y0[c], y1[c], y2[c], y3[c]
			s0 += v0
			q0 += float32(v0 * v0)
			s1 += v1
			q1 += float32(v1 * v1)
			s2 += v2
			q2 += float32(v2 * v2)
			s3 += v3
			q3 += float32(v3 * v3)
		}
		sum[r], sum[r+1], sum[r+2], sum[r+3] = s0, s1, s2, s3
		sq[r], sq[r+1], sq[r+2], sq[r+3] = q0, q1, q2, q3
	}
	for ; r < rows; r++ {
		var s, q float32
		for _, v := range y[r*C : r*C+C] {
			s += v
			q += float32(v * v)
		}
		sum[r], sq[r] = s, q
	}
}

// layerNormStats is LayerNormRow's mean and σ from its sums.
func layerNormStats(sum, sq float32, C int, eps float32) (mean, sd float32) {
	n := float32(C)
	mean = sum / n
	sd = float32(math.Sqrt(float64(float32(float32(sq/n)-float32(mean*mean)) + eps)))
	return mean, sd
}

// LayerNormRow sets out to LayerNorm(v)·w + b as ONNX Runtime's CPU
// LayerNormalization and SkipLayerNormalization compute it in float32:
// Σv and Σv² summed in order in float32, mean = Σv/C, σ = √(Σv²/C − mean²
// + eps), out = (v − mean)/σ·w + b, each operation rounded on its own.
// out may be v.
func LayerNormRow(out, v, w, b []float32, eps float32) {
	C := len(v)
	out, w, b = out[:C], w[:C], b[:C]
	var sum, sq float32
	for _, x := range v {
		sum += x
		sq += float32(x * x)
	}
	mean, sd := layerNormStats(sum, sq, C, eps)
	for c, x := range v {
		out[c] = float32(float32((x-mean)/sd)*w[c]) + b[c]
	}
}
