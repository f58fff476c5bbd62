package ops

import "math"

// The element-wise ops of a quantized BERT graph's forward (model/bert on
// an int8 graph of model/onnx): quantizing a product's input to uint8, per
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
		s := RowQuantScale(xr)
		scales[r] = s
		quantizeRow(q[r*ldq:r*ldq+C], xr, s, 128)
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

// fastTanh is tanh(u) as the rational function above, each operation
// rounded to float32 on its own (the AVX2 kernel's bits).
func fastTanh(u float32) float32 {
	u = min(max(u, -9), 9)
	u2 := float32(u * u)
	p := float32(float32(u2*tanhA13) + tanhA11)
	p = float32(float32(p*u2) + tanhA9)
	p = float32(float32(p*u2) + tanhA7)
	p = float32(float32(p*u2) + tanhA5)
	p = float32(float32(p*u2) + tanhA3)
	p = float32(float32(p*u2) + tanhA1)
	p = float32(p * u)
	q := float32(float32(u2*tanhB6) + tanhB4)
	q = float32(float32(q*u2) + tanhB2)
	q = float32(float32(q*u2) + tanhB0)
	return p / q
}

// FastGELUBias sets x to FastGelu(x + bias), row by row (rows of
// len(bias) values): v = x + b, u = v·((b·v)·v + a), (½v)·(tanh(u) + 1),
// the tanh form of GELU that quantized graphs use (ONNX Runtime's order of
// operations, tanh as fastTanh).
func FastGELUBias(x, bias []float32) {
	C := len(bias)
	for r := 0; r+C <= len(x); r += C {
		row := x[r : r+C]
		for i := fastGeluVec(row, bias); i < C; i++ {
			v := row[i] + bias[i]
			u := float32(v * float32(float32(float32(float32(fastGeluB)*v)*v)+fastGeluA))
			row[i] = float32(0.5*v) * (fastTanh(u) + 1)
		}
	}
}

// SkipLayerNorm sets out to LayerNorm((y + x) + bias) row by row (rows of
// width C) with ONNX Runtime's SkipLayerNormalization arithmetic: the sum
// in that order, written back to y, then LayerNormRow. out may be x.
func SkipLayerNorm(out, x, y, bias, w, b []float32, rows, C int, eps float32) {
	bias = bias[:C]
	for r := 0; r < rows; r++ {
		xr, yr := x[r*C:r*C+C], y[r*C:r*C+C]
		for c := range yr {
			yr[c] = (yr[c] + xr[c]) + bias[c]
		}
		LayerNormRow(out[r*C:r*C+C], yr, w, b, eps)
	}
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
	n := float32(C)
	mean := sum / n
	sd := float32(math.Sqrt(float64(float32(float32(sq/n)-float32(mean*mean)) + eps)))
	for c, x := range v {
		out[c] = float32(float32((x-mean)/sd)*w[c]) + b[c]
	}
}
