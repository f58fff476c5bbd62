package ops

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// int8Paths runs f with the int8 helpers' vector kernels (AVX-512 and
// AVX2, where this CPU has them) and without, and returns what f returned
// on each; int8AllPaths also runs it with AVX2 alone (AVX-512 off), the
// paths in that order: all, AVX2, Go.
func int8Paths[T any](f func() T) (vec, scalar T) {
	all := int8AllPaths(f)
	return all[0], all[2]
}

func int8AllPaths[T any](f func() T) []T {
	v2, v5 := useInt8AVX2, useInt8AVX512
	defer func() { useInt8AVX2, useInt8AVX512 = v2, v5 }()
	out := []T{f()}
	useInt8AVX512 = false
	out = append(out, f())
	useInt8AVX2 = false
	return append(out, f())
}

// refLayerNormRow is LayerNormRow as first written (one row, its sums in
// order): the reference the fused helpers' bits are checked against.
func refLayerNormRow(out, v, w, b []float32, eps float32) {
	var sum, sq float32
	for _, x := range v {
		sum += x
		sq += float32(x * x)
	}
	n := float32(len(v))
	mean := sum / n
	sd := float32(math.Sqrt(float64(float32(float32(sq/n)-float32(mean*mean)) + eps)))
	for c, x := range v {
		out[c] = float32(float32((x-mean)/sd)*w[c]) + b[c]
	}
}

// refQuantizeRow is QuantizeRows of one row in Go, from naiveQuant.
func refQuantizeRow(q []uint8, x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	s := max(m, 1e-12) * float32(1.0/127)
	for i, v := range x {
		q[i] = naiveQuantMul(v, 1/s)
	}
	return s
}

// TestSkipLayerNormQuantize: on every path (AVX-512, AVX2, Go), for row
// counts around the 16 and 4 rows summed together and widths of every
// length mod 16, SkipLayerNormQuantize (and SkipLayerNorm, LayerNormRows)
// give the bits of the sum written back, then refLayerNormRow and
// refQuantizeRow row by row; padding bytes past a row are left alone.
func TestSkipLayerNormQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	type result struct {
		out, y, scales []float32
		q              []uint8
	}
	for _, C := range []int{3, 8, 16, 19, 384} {
		for _, rows := range []int{1, 5, 16, 17, 35} {
			ldq := C + 5
			x, y, bias, w, b := randn(r, rows*C, 1), randn(r, rows*C, 3), randn(r, C, 1), randn(r, C, 1), randn(r, C, 1)
			y[0] = 40
			want := result{out: make([]float32, rows*C), y: slices.Clone(y), scales: make([]float32, rows), q: slices.Repeat([]uint8{7}, rows*ldq)}
			for i := 0; i < rows; i++ {
				for c := 0; c < C; c++ {
					want.y[i*C+c] = (want.y[i*C+c] + x[i*C+c]) + bias[c]
				}
				refLayerNormRow(want.out[i*C:i*C+C], want.y[i*C:i*C+C], w, b, 1e-12)
				want.scales[i] = refQuantizeRow(want.q[i*ldq:i*ldq+C], want.out[i*C:i*C+C])
			}
			for _, quant := range []bool{true, false} {
				got := int8AllPaths(func() result {
					res := result{out: make([]float32, rows*C), y: slices.Clone(y), scales: make([]float32, rows), q: slices.Repeat([]uint8{7}, rows*ldq)}
					if quant {
						SkipLayerNormQuantize(res.out, x, res.y, bias, w, b, rows, C, 1e-12, res.q, ldq, res.scales)
					} else {
						SkipLayerNorm(res.out, x, res.y, bias, w, b, rows, C, 1e-12)
					}
					return res
				})
				for p, g := range got {
					for i := range g.out {
						if math.Float32bits(g.out[i]) != math.Float32bits(want.out[i]) || math.Float32bits(g.y[i]) != math.Float32bits(want.y[i]) {
							t.Fatalf("C=%d rows %d path %d: value %d: %v (sum %v), want %v (%v)", C, rows, p, i, g.out[i], g.y[i], want.out[i], want.y[i])
						}
					}
					if quant && (!slices.Equal(g.q, want.q) || !slices.Equal(g.scales, want.scales)) {
						t.Fatalf("C=%d rows %d path %d: quantized rows or scales differ", C, rows, p)
					}
				}
			}
			// LayerNormRows in place, without the skip.
			got := int8AllPaths(func() []float32 {
				o := slices.Clone(y)
				LayerNormRows(o, o, w, b, rows, C, 1e-12, nil, 0, nil)
				return o
			})
			ref := make([]float32, C)
			for i := 0; i < rows; i++ {
				refLayerNormRow(ref, y[i*C:i*C+C], w, b, 1e-12)
				for p, g := range got {
					if !slices.Equal(g[i*C:i*C+C], ref) {
						t.Fatalf("C=%d rows %d path %d: LayerNormRows row %d differs", C, rows, p, i)
					}
				}
			}
		}
	}
}

// TestFastGELUBiasQuantize: on every path, FastGELUBiasQuantize gives
// FastGELUBias's bits (Go) and refQuantizeRow's bytes and scales.
func TestFastGELUBiasQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, C := range []int{1, 8, 16, 21, 1536} {
		rows, ldq := 3, C+1
		x, bias := randn(r, rows*C, 4), randn(r, C, 1)
		want := slices.Clone(x)
		v2, v5 := useInt8AVX2, useInt8AVX512
		useInt8AVX2, useInt8AVX512 = false, false
		FastGELUBias(want, bias)
		useInt8AVX2, useInt8AVX512 = v2, v5
		wq, ws := slices.Repeat([]uint8{7}, rows*ldq), make([]float32, rows)
		for i := 0; i < rows; i++ {
			ws[i] = refQuantizeRow(wq[i*ldq:i*ldq+C], want[i*C:i*C+C])
		}
		type result struct {
			x, s []float32
			q    []uint8
		}
		for p, g := range int8AllPaths(func() result {
			res := result{slices.Clone(x), make([]float32, rows), slices.Repeat([]uint8{7}, rows*ldq)}
			FastGELUBiasQuantize(res.x, bias, res.q, ldq, res.s)
			return res
		}) {
			for i := range want {
				if math.Float32bits(g.x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("C=%d path %d value %d: %v, want %v", C, p, i, g.x[i], want[i])
				}
			}
			if !slices.Equal(g.q, wq) || !slices.Equal(g.s, ws) {
				t.Fatalf("C=%d path %d: quantized rows or scales differ", C, p)
			}
		}
	}
}

// TestFastGELUBias: the AVX2 kernel and the Go loop give the same bits on
// rows of every length mod 8; both are within 2e-6 (relative) of
// v·½(1 + tanh(v·(a + b·v²))) in float64, and fastTanh within 1e-6 of tanh.
func TestFastGELUBias(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, C := range []int{1, 7, 8, 13, 64, 1536} {
		x, bias := randn(r, 3*C, 4), randn(r, C, 1)
		x[0] = 30 // tanh's clamp
		vec, scalar := int8Paths(func() []float32 {
			y := slices.Clone(x)
			FastGELUBias(y, bias)
			return y
		})
		for i := range x {
			if math.Float32bits(vec[i]) != math.Float32bits(scalar[i]) {
				t.Fatalf("C=%d value %d: AVX2 %v, Go %v", C, i, vec[i], scalar[i])
			}
			v := float64(x[i] + bias[i%C])
			want := 0.5 * v * (1 + math.Tanh(v*(fastGeluA+fastGeluB*v*v)))
			if d := math.Abs(float64(vec[i]) - want); d > 2e-6*(1+math.Abs(want)) {
				t.Fatalf("C=%d value %d: FastGelu(%v) = %v, want %v", C, i, v, vec[i], want)
			}
		}
	}
	for u := float32(-10); u <= 10; u += 0.001 {
		if d := math.Abs(float64(fastTanh(u)) - math.Tanh(float64(u))); d > 1e-6 {
			t.Fatalf("fastTanh(%v) = %v, tanh %v", u, fastTanh(u), math.Tanh(float64(u)))
		}
	}
}

// TestFMA32: fma32 is a·b + c rounded once to float32 (big.Float's exact
// value rounded to nearest even) on random values, and on sums whose
// float64 rounding lands on a float32 tie while the exact value lies off
// it: c with an odd last bit, a·b half of c's ulp less 2⁻⁴⁰ of that (a =
// 1 + 2⁻²⁰, b = (1 − 2⁻²⁰)·h), so rounding the float64 sum alone gives
// c's even neighbour where the exact value rounds to c.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	check := func(a, b, c float32) {
		t.Helper()
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	for range 100000 {
		check(float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64()))
	}
	for range 1000 {
		c := math.Float32frombits(math.Float32bits(float32(r.NormFloat64())) | 1) // odd
		_, e := math.Frexp(math.Abs(float64(c)))
		h := float32(math.Ldexp(1, e-25)) // half of c's ulp
		a, b := float32(1+0x1p-20), float32(1-0x1p-20)*h
		if float64(c)+float64(a)*float64(b) != float64(c)+float64(h) || float64(c)-float64(a)*float64(b) != float64(c)-float64(h) {
			t.Fatalf("c = %g: the float64 sum is not on the tie", c)
		}
		check(a, b, c)
		check(-a, b, c)
	}
}

// TestQuantize16Clamp: the vector quantizer's bytes on values out of
// range, at ±127.5 and ±128.5, ±Inf, NaN and beyond ±2³¹ after scaling,
// in every position of a 64-value group: clamp(round(x·inv), −128, 127) +
// 128, NaN to 0, as the single-vector loop and the Go form give.
func TestQuantize16Clamp(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	special := []float32{127.5, 128.5, -127.5, -128.5, 126.5, -128.49, 300, -300, 3e9, -3e9,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, -0.5, 0.5}
	ref := func(v, inv float32) uint8 {
		y := v * inv
		if y != y {
			return 0
		}
		return uint8(math.Max(-128, math.Min(127, math.RoundToEven(float64(y)))) + 128)
	}
	for _, n := range []int{16, 48, 64, 80, 128, 384} {
		x := randn(r, n, 100)
		for i := range x {
			if r.IntN(3) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		for _, inv := range []float32{1, 0.37, 2} {
			q := make([]uint8, n)
			done := quantize16(q, x, inv)
			if done == 0 {
				t.Skip("no AVX-512 here")
			}
			for i := 0; i < done; i++ {
				if want := ref(x[i], inv); q[i] != want {
					t.Fatalf("n=%d inv %v: value %d (%v): %d, want %d", n, inv, i, x[i], q[i], want)
				}
			}
		}
	}
}

// naiveQuant is QuantizeLinear's definition: clamp(round-half-even(x/s)
// + zp, 0, 255), x/s in float32.
func naiveQuant(x, s float32, zp uint8) uint8 {
	v := math.RoundToEven(float64(x/s)) + float64(zp)
	return uint8(math.Max(0, math.Min(255, v)))
}

// naiveQuantMul is QuantizeRows' code for x, rows scaled by 1/s (inv):
// round(x·inv) + 128, clamped.
func naiveQuantMul(x, inv float32) uint8 {
	v := math.RoundToEven(float64(x*inv)) + 128
	return uint8(math.Max(0, math.Min(255, v)))
}

// splitQuantValues returns values x in (−127s, 127s) where round(x/s) and
// round(x·(1/s)) differ: near every half step, a few float32 ulps either
// side.
func splitQuantValues(s float32) []float32 {
	inv := 1 / s
	var out []float32
	for k := -127; k < 127; k++ {
		c := float32((float64(k) + 0.5) * float64(s))
		for d := int32(-4); d <= 4; d++ {
			x := math.Float32frombits(uint32(int32(math.Float32bits(c)) + d))
			if math.RoundToEven(float64(x/s)) != math.RoundToEven(float64(x*inv)) {
				out = append(out, x)
			}
		}
	}
	return out
}

// TestQuantize: QuantizeRows and QuantizeWith give naiveQuant's bytes on
// every path (rows of every length mod 8, values on the half steps, out of
// range and at the row's extremes; QuantizeRows with x·(1/s), checked on
// values where that and x/s round apart), RowQuantScale is max|x|/127,
// and padding bytes past a row are left alone.
func TestQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, C := range []int{1, 5, 8, 19, 384} {
		rows, ldq := 3, C+3
		x := randn(r, rows*C, 2)
		x[0] = -5
		if C > 2 {
			x[1] = 5
			x[2] = 2.5 * (5 / 127.0) // a half step for row 0's scale
		}
		if C > 100 { // values whose x·(1/s) and x/s round to different steps
			split := splitQuantValues(5 * float32(1.0/127))
			if len(split) < 8 {
				t.Fatalf("only %d values found where x/s and x·(1/s) round apart", len(split))
			}
			copy(x[3:C], split)
		}
		for _, zp := range []uint8{128, 0, 37} {
			all := int8AllPaths(func() []uint8 {
				q := slices.Repeat([]uint8{7}, rows*ldq)
				if zp == 128 {
					s := make([]float32, rows)
					QuantizeRows(q, ldq, x, rows, C, s)
				} else {
					QuantizeWith(q, ldq, x, rows, C, 0.01, zp)
				}
				return q
			})
			vec := all[0]
			if !slices.Equal(vec, all[1]) || !slices.Equal(vec, all[2]) {
				t.Fatalf("C=%d zp %d: the AVX-512, AVX2 and Go bytes differ", C, zp)
			}
			for i := 0; i < rows; i++ {
				row := x[i*C : i*C+C]
				s := float32(0.01)
				if zp == 128 {
					var m float32
					for _, v := range row {
						m = max(m, float32(math.Abs(float64(v))))
					}
					s = m * float32(1.0/127)
					if got := RowQuantScale(row); got != s {
						t.Fatalf("C=%d row %d: scale %v, want %v", C, i, got, s)
					}
				}
				for j, v := range row {
					want := naiveQuant(v, s, zp)
					if zp == 128 {
						want = naiveQuantMul(v, 1/s)
					}
					if got := vec[i*ldq+j]; got != want {
						t.Fatalf("C=%d zp %d row %d value %d (%v): %d, want %d", C, zp, i, j, v, got, want)
					}
				}
				for j := C; j < ldq; j++ {
					if vec[i*ldq+j] != 7 {
						t.Fatalf("C=%d: padding byte %d of row %d written", C, j, i)
					}
				}
			}
		}
	}
	lo, hi := MinMax([]float32{3, -2, 9, 1, 0, 4, 5, 6, 7, -8, 2})
	if lo != -8 || hi != 9 {
		t.Errorf("MinMax: %v %v, want -8 9", lo, hi)
	}
}

// TestDynamicQuantParams: DynamicQuantizeLinear's scale and zero point,
// the range widened to 0.
func TestDynamicQuantParams(t *testing.T) {
	for _, c := range []struct {
		lo, hi, scale float32
		zp            uint8
	}{
		{-1, 1, 2.0 / 255, 127}, // 1/(2/255) is 127.49999 in float32
		{1, 3, 3.0 / 255, 0},
		{-4, -1, 4.0 / 255, 255},
		{0, 0, 1, 0},
		{-0.5, 2, 2.5 / 255, 51},
	} {
		s, zp := DynamicQuantParams(c.lo, c.hi)
		if s != c.scale || zp != c.zp {
			t.Errorf("range [%v, %v]: scale %v zp %d, want %v %d", c.lo, c.hi, s, zp, c.scale, c.zp)
		}
	}
}

// TestSkipLayerNorm: LayerNorm((y + x) + bias) within float32 rounding of
// float64, the sum written back to y.
func TestSkipLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, C := range []int{3, 8, 384} {
		rows := 2
		x, y, bias, w, b := randn(r, rows*C, 1), randn(r, rows*C, 1), randn(r, C, 1), randn(r, C, 1), randn(r, C, 1)
		y0 := slices.Clone(y)
		out := make([]float32, rows*C)
		SkipLayerNorm(out, x, y, bias, w, b, rows, C, 1e-12)
		for i := 0; i < rows; i++ {
			var mu, v float64
			for c := 0; c < C; c++ {
				mu += float64(y0[i*C+c]) + float64(x[i*C+c]) + float64(bias[c])
			}
			mu /= float64(C)
			for c := 0; c < C; c++ {
				d := float64(y0[i*C+c]) + float64(x[i*C+c]) + float64(bias[c]) - mu
				v += d * d
			}
			v /= float64(C)
			for c := 0; c < C; c++ {
				s := (y0[i*C+c] + x[i*C+c]) + bias[c]
				if y[i*C+c] != s {
					t.Fatalf("C=%d: sum not written back", C)
				}
				want := (float64(s)-mu)/math.Sqrt(v+1e-12)*float64(w[c]) + float64(b[c])
				if d := math.Abs(float64(out[i*C+c]) - want); d > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("C=%d row %d value %d: %v, want %v", C, i, c, out[i*C+c], want)
				}
			}
		}
	}
}
