package ops

import (
	"math"
	"testing"
)

func TestFastMath(t *testing.T) {
	var maxErf, maxExp float64
	for x := -10.0; x <= 10; x += 1e-4 {
		maxErf = math.Max(maxErf, math.Abs(float64(Erf32(float32(x)))-math.Erf(float64(float32(x)))))
	}
	for x := -87.0; x <= 88; x += 1e-3 {
		want := math.Exp(float64(float32(x)))
		maxExp = math.Max(maxExp, math.Abs(float64(Exp32(float32(x)))-want)/want)
	}
	if maxErf > 1e-6 || maxExp > 5e-7 {
		t.Fatalf("erf32 max abs error %.3g (want ≤ 1e-6), exp32 max relative error %.3g (want ≤ 5e-7)", maxErf, maxExp)
	}
	t.Logf("erf32 max abs error %.3g, exp32 max relative error %.3g", maxErf, maxExp)
	if Exp32(-100) != 0 {
		t.Fatal("Exp32(-100) != 0")
	}
}
