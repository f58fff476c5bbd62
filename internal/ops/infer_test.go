package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bothPaths runs f with the vector code (where this CPU has it) and
// without.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	vec := useInferAVX2
	defer func() { useInferAVX2 = vec }()
	for _, v := range []bool{vec, false} {
		useInferAVX2 = v
		f(t)
	}
}

// SoftmaxScaled matches softmax in float64 for rows of every length mod
// 8, gives hidden keys exactly 0, and survives scores far apart.
func TestSoftmaxScaled(t *testing.T) { bothPaths(t, testSoftmaxScaled) }

func testSoftmaxScaled(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 5, 8, 13, 32, 67, 256} {
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
