package pyref

import (
	"math"
	"testing"

	"github.com/anna-search/anna/model/safetensors"
)

// GradLimit is the relative error the gradient comparisons allow.
const GradLimit = 1e-4

// CompareGrads checks the gradients got[name] of every name against the
// reference's tensors (a PyTorch script's grads.safetensors), failing tb
// for each whose relative error exceeds GradLimit, and returns the worst.
// The error of a tensor is in the L2 norm, its denominator floored at 1e-3
// of the largest reference gradient: gradients that are zero in exact
// arithmetic (a key bias, which softmax ignores) are rounding noise in both.
func CompareGrads(tb testing.TB, ref map[string]*safetensors.Tensor, got map[string][]float32, names []string) (worst float64, worstName string) {
	tb.Helper()
	norm := func(x []float64) float64 {
		var s float64
		for _, v := range x {
			s += v * v
		}
		return math.Sqrt(s)
	}
	refNorm := map[string]float64{}
	var largest float64
	for _, name := range names {
		rg, ok := ref[name]
		if !ok {
			tb.Fatalf("the reference has no gradient for %s", name)
		}
		if len(rg.Data) != len(got[name]) {
			tb.Fatalf("%s: %d gradient values, the reference %d", name, len(got[name]), len(rg.Data))
		}
		v := make([]float64, len(rg.Data))
		for i, x := range rg.Data {
			v[i] = float64(x)
		}
		refNorm[name] = norm(v)
		largest = math.Max(largest, refNorm[name])
	}
	if largest == 0 {
		tb.Fatal("every reference gradient is zero")
	}
	for _, name := range names {
		rg, g := ref[name].Data, got[name]
		diff := make([]float64, len(g))
		for i := range g {
			diff[i] = float64(g[i]) - float64(rg[i])
		}
		rel := norm(diff) / math.Max(refNorm[name], 1e-3*largest)
		if rel > worst {
			worst, worstName = rel, name
		}
		if rel > GradLimit {
			tb.Errorf("%s: gradient relative error %.3g (|diff| %.3g, |ref| %.3g)", name, rel, norm(diff), refNorm[name])
		}
	}
	return worst, worstName
}

// CompareLoss checks a loss against the reference's, failing tb when the
// relative error exceeds GradLimit, and returns the error.
func CompareLoss(tb testing.TB, name string, got, want float64) float64 {
	tb.Helper()
	rel := math.Abs(got-want) / math.Max(math.Abs(want), 1e-6)
	if rel > GradLimit {
		tb.Errorf("%s %.7g, the reference %.7g (relative error %.2g)", name, got, want, rel)
	}
	return rel
}
