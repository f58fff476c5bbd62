package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bothPaths runs f with every vector kernel this CPU has (AVX-512 where
// there is, AVX2) and with none.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	v2, v5 := useInferAVX2, useSoftmaxAVX512
	defer func() { useInferAVX2, useSoftmaxAVX512 = v2, v5 }()
	for _, p := range [][2]bool{{v2, v5}, {v2, false}, {false, false}} {
		useInferAVX2, useSoftmaxAVX512 = p[0], p[1]
		f(t)
	}
}

// SoftmaxScaled matches softmax in float64 for rows of every length mod
// 8, gives hidden keys exactly 0, and survives scores far apart.
func TestSoftmaxScaled(t *testing.T) { bothPaths(t, testSoftmaxScaled) }

func testSoftmaxScaled(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 5, 8, 13, 16, 17, 32, 67, 256} {
		for _, spread := range []float64{1, 30} {
			row := randn(r, n, spread)
			bias := make([]float32, n)
			for j := 1; j < n; j += 3 {
				bias[j] = float32(math.Inf(-1))
			}
			want := make([]float64, n)
			mx := math.Inf(-1)
			for j, v := range row {
				want[j] = float64(v)*0.125 + float64(bias[j])
				mx = math.Max(mx, want[j])
			}
			var sum float64
			for j := range want {
				want[j] = math.Exp(want[j] - mx)
				sum += want[j]
			}
			got := append([]float32(nil), row...)
			SoftmaxScaled(got, bias, 0.125)
			for j := range got {
				if math.IsInf(float64(bias[j]), -1) {
					if got[j] != 0 {
						t.Fatalf("n=%d: hidden key %d has probability %g", n, j, got[j])
					}
					continue
				}
				if d := math.Abs(float64(got[j]) - want[j]/sum); d > 1e-6 {
					t.Fatalf("n=%d spread=%g: p[%d]=%g want %g", n, spread, j, got[j], want[j]/sum)
				}
			}
		}
	}
}

// ExpScaled's AVX-512 kernel gives the AVX2 kernels' values bit for bit
// (the elements those do; the last len%8 are exp2Poly's, without FMA) and
// their sum to float32 rounding, for rows across both vector widths,
// hidden keys among them, scores of both signs and all negative.
func TestExpScaledAVX512MatchesAVX2(t *testing.T) {
	if !useSoftmaxAVX512 {
		t.Skip("no AVX-512 here (or GODEBUG turned it off)")
	}
	defer func() { useSoftmaxAVX512 = true }()
	r := rand.New(rand.NewPCG(27, 28))
	for n := 1; n <= 70; n++ {
		for _, spread := range []float64{1, 40, -1} {
			row := randn(r, n, math.Abs(spread))
			if spread < 0 {
				for j := range row {
					row[j] = -100 - float32(math.Abs(float64(row[j])))
				}
			}
			bias := make([]float32, n)
			for j := 2; j < n; j += 5 {
				bias[j] = float32(math.Inf(-1))
			}
			got, want := append([]float32(nil), row...), append([]float32(nil), row...)
			useSoftmaxAVX512 = true
			gs := ExpScaled(got, bias, 0.17)
			useSoftmaxAVX512 = false
			ws := ExpScaled(want, bias, 0.17)
			for j := range n &^ 7 {
				if got[j] != want[j] {
					t.Fatalf("n=%d spread=%g: e[%d] = %g (AVX-512), %g (AVX2)", n, spread, j, got[j], want[j])
				}
			}
			for j := n &^ 7; j < n; j++ {
				if d := math.Abs(float64(got[j] - want[j])); d > 3e-7*float64(want[j]) {
					t.Fatalf("n=%d spread=%g: e[%d] = %g (AVX-512), %g (exp2Poly)", n, spread, j, got[j], want[j])
				}
			}
			if d := math.Abs(float64(gs - ws)); d > 1e-6*float64(ws) {
				t.Fatalf("n=%d spread=%g: sum %g (AVX-512), %g (AVX2)", n, spread, gs, ws)
			}
		}
	}
}

// unitScale is a scale whose product with log2e32 is exactly 1, so that
// ExpScaled's t is its input: 2^x.
func unitScale(t *testing.T) float32 {
	s := float32(1 / float64(log2e32))
	for range 4 {
		switch p := s * log2e32; {
		case p == 1:
			return s
		case p < 1:
			s = math.Nextafter32(s, 2)
		default:
			s = math.Nextafter32(s, 0)
		}
	}
	t.Fatal("no float32 s with s·log2e = 1")
	return 0
}

// sweep2 is the exponents the sweeps below take: a dense sweep of 0 down
// to −130 (past the −126 cut and through the subnormal results), and
// every tie between two integers, each with its neighbours; len%16 = 0.
func sweep2() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1))}
	for x := float32(0); x > -130; x -= 0.001 {
		xs = append(xs, x)
	}
	for k := -130; k <= 0; k++ {
		c := float32(k) + 0.5
		for d := -3; d <= 3; d++ {
			xs = append(xs, math.Float32frombits(uint32(int32(math.Float32bits(c))+int32(d))))
		}
	}
	return xs[:len(xs)&^15]
}

// TestExpScaledAVX512Sweep: the AVX-512 kernel (k rounded by adding and
// taking away 1.5·2^23, 2^k applied by VSCALEFPS, no clamp) gives the
// AVX2 kernel's values (VROUNDPS, y clamped at −126, 2^k built in the
// exponent) bit for bit over the whole range the exponent takes
// (sweep2), and both give 0 for −Inf and NaN.
func TestExpScaledAVX512Sweep(t *testing.T) {
	if !useSoftmaxAVX512 {
		t.Skip("no AVX-512 here (or GODEBUG turned it off)")
	}
	defer func() { useSoftmaxAVX512 = true }()
	xs := sweep2()
	xs[len(xs)-1] = float32(math.Inf(-1))
	xs[len(xs)-2] = float32(math.NaN())
	bias := make([]float32, len(xs))
	got, want := append([]float32(nil), xs...), append([]float32(nil), xs...)
	s := unitScale(t)
	useSoftmaxAVX512 = true
	ExpScaled(got, bias, s)
	useSoftmaxAVX512 = false
	ExpScaled(want, bias, s)
	for j, x := range xs {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			t.Fatalf("2^%g (bits %#x): %g (AVX-512), %g (AVX2)", x, math.Float32bits(x), got[j], want[j])
		}
	}
	if got[len(xs)-1] != 0 || got[len(xs)-2] != 0 {
		t.Fatalf("2^-Inf = %g, 2^NaN = %g, want 0", got[len(xs)-1], got[len(xs)-2])
	}
}

// TestExp2Accuracy: ExpScaled's 2^y, vector (with FMA) and scalar
// (exp2Poly, each product rounded), within 1.5 and 2 float32 ulps of
// math.Exp2 wherever the value is normal (y ≥ −125), 0 below −126.
func TestExp2Accuracy(t *testing.T) {
	xs := sweep2()
	check := func(name string, got []float32, ulps float64) {
		for j, y := range xs {
			want := math.Exp2(float64(y))
			switch {
			case y < -126:
				if got[j] != 0 {
					t.Fatalf("%s: 2^%g = %g, want 0", name, y, got[j])
				}
			case y >= -125:
				if d := math.Abs(float64(got[j])-want) / want; d > ulps*0x1p-24 {
					t.Fatalf("%s: 2^%g = %g, want %g (%.2f ulps)", name, y, got[j], want, d/0x1p-24)
				}
			}
		}
	}
	if useInferAVX2 {
		got := append([]float32(nil), xs...)
		expSubSumVec(got, 0)
		check("vector", got, 1.5)
	}
	got := make([]float32, len(xs))
	for j, y := range xs {
		got[j] = exp2Poly(y)
	}
	check("exp2Poly", got, 2)
}

// GELUInPlace matches the exact GELU for lengths across the vector width
// and values across erf's range.
func TestGELUInPlace(t *testing.T) { bothPaths(t, testGELUInPlace) }

func testGELUInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{1, 7, 8, 100} {
		x := randn(r, n, 3)
		x[0] = 9 // past erf's clamp
		got := append([]float32(nil), x...)
		GELUInPlace(got)
		for i, v := range x {
			want := 0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2))
			if d := math.Abs(float64(got[i]) - want); d > 2e-6*(1+math.Abs(want)) {
				t.Fatalf("n=%d: gelu(%g)=%g want %g", n, v, got[i], want)
			}
		}
	}
}

// AddLayerNorm is LayerNormForward of x + res, which it leaves in res,
// for widths across the vector width.
func TestAddLayerNorm(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(25, 26))
		for _, C := range []int{3, 8, 19, 384} {
			testAddLayerNorm(t, r, 5, C)
		}
	})
}

func testAddLayerNorm(t *testing.T, r *rand.Rand, rows, C int) {
	x, res := randn(r, rows*C, 1), randn(r, rows*C, 1)
	w, b := randn(r, C, 1), randn(r, C, 1)
	sum := make([]float32, rows*C)
	for i := range sum {
		sum[i] = x[i] + res[i]
	}
	want := make([]float32, rows*C)
	LayerNormForward(want, make([]float32, rows), make([]float32, rows), sum, w, b, rows, C, 1e-12, 1)
	got := make([]float32, rows*C)
	AddLayerNorm(got, x, res, w, b, rows, C, 1e-12)
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-6*(1+math.Abs(float64(want[i]))) || res[i] != sum[i] {
			t.Fatalf("C=%d element %d: %g (res %g), want %g (res %g)", C, i, got[i], res[i], want[i], sum[i])
		}
	}
}

// TestTransposeRows: Kᵀ for attention's Q·Kᵀ, every value in its place,
// for lengths around AVX-512's blocks of 16 and head widths that are and
// are not multiples of 16, from rows with a wider stride; with rows padded
// to attPad, the padding zero.
func TestTransposeRows(t *testing.T) {
	for _, D := range []int{8, 24, 32, 64} {
		for _, L := range []int{1, 15, 16, 17, 31, 32, 33, 47, 100, 256, 259} {
			ld := 3*D + 5
			k := make([]float32, L*ld)
			for i := range k {
				k[i] = float32(i)
			}
			for _, ldt := range []int{L, (L + attPad - 1) &^ (attPad - 1)} {
				kt := make([]float32, D*ldt)
				for i := range kt {
					kt[i] = -1
				}
				transposeRows(kt, ldt, k, L, D, ld)
				for d := range D {
					for j := range ldt {
						want := float32(0) // the padding
						if j < L {
							want = k[j*ld+d]
						}
						if got := kt[d*ldt+j]; got != want {
							t.Fatalf("D=%d L=%d ldt=%d: kt[%d][%d] = %g, want %g", D, L, ldt, d, j, got, want)
						}
					}
				}
			}
		}
	}
}
