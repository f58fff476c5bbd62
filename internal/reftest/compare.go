package reftest

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
)

// GradLimit is the relative error the gradient comparisons allow.
const GradLimit = 1e-4

// RelErr returns ‖got − want‖₂ / max(‖want‖₂, floor) in float64, and the
// index of the first element of got that is NaN or ±Inf (−1 when none).
// With a zero denominator it is 0 when got equals want and +Inf otherwise;
// slices of different lengths give +Inf.
func RelErr[W float32 | float64](got []float32, want []W, floor float64) (rel float64, bad int) {
	if len(got) != len(want) {
		return math.Inf(1), -1
	}
	bad = -1
	var num, den float64
	for i, g := range got {
		x := float64(g)
		if bad < 0 && (math.IsNaN(x) || math.IsInf(x, 0)) {
			bad = i
		}
		e := x - float64(want[i])
		num += e * e
		den += float64(want[i]) * float64(want[i])
	}
	d := math.Max(math.Sqrt(den), floor)
	if d == 0 {
		if num == 0 {
			return 0, bad
		}
		return math.Inf(1), bad
	}
	return math.Sqrt(num) / d, bad
}

// Close fails tb when got holds a NaN or Inf or its relative error
// against want (RelErr with floor) exceeds tol, and returns the error.
func Close[W float32 | float64](tb testing.TB, what string, got []float32, want []W, tol, floor float64) float64 {
	tb.Helper()
	if len(got) != len(want) {
		tb.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return math.Inf(1)
	}
	rel, bad := RelErr(got, want, floor)
	if bad >= 0 {
		tb.Errorf("%s: element %d is %v", what, bad, got[bad])
		return rel
	}
	if !(rel <= tol) { // NaN fails too
		tb.Errorf("%s: relative error %.3g > %.1g", what, rel, tol)
	}
	return rel
}

// Grads checks the gradients got[name] of every name against the
// reference's tensors (a PyTorch script's grads.safetensors), failing tb
// for each whose relative error exceeds GradLimit, and returns the worst.
// The error of a tensor is in the L2 norm, its denominator floored at 1e-3
// of the largest reference gradient: gradients that are zero in exact
// arithmetic (a key bias, which softmax ignores) are rounding noise in both.
func Grads(tb testing.TB, ref map[string]*safetensors.Tensor, got map[string][]float32, names []string) (worst float64, worstName string) {
	tb.Helper()
	var largest float64
	for _, name := range names {
		rg, ok := ref[name]
		if !ok {
			tb.Fatalf("the reference has no gradient for %s", name)
		}
		if len(rg.Data) != len(got[name]) {
			tb.Fatalf("%s: %d gradient values, the reference %d", name, len(got[name]), len(rg.Data))
		}
		largest = math.Max(largest, norm(rg.Data))
	}
	if largest == 0 {
		tb.Fatal("every reference gradient is zero")
	}
	for _, name := range names {
		rg, g := ref[name].Data, got[name]
		rel, bad := RelErr(g, rg, 1e-3*largest)
		if bad >= 0 {
			tb.Errorf("%s: gradient element %d is %v", name, bad, g[bad])
			continue
		}
		if rel > worst {
			worst, worstName = rel, name
		}
		if !(rel <= GradLimit) { // NaN fails too
			var diff float64
			for i := range g {
				e := float64(g[i]) - float64(rg[i])
				diff += e * e
			}
			tb.Errorf("%s: gradient relative error %.3g (|diff| %.3g, |ref| %.3g)", name, rel, math.Sqrt(diff), norm(rg))
		}
	}
	return worst, worstName
}

func norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// Loss checks a loss against the reference's, failing tb when the relative
// error exceeds GradLimit, and returns the error.
func Loss(tb testing.TB, name string, got, want float64) float64 {
	tb.Helper()
	rel := math.Abs(got-want) / math.Max(math.Abs(want), 1e-6)
	if !(rel <= GradLimit) { // NaN fails too
		tb.Errorf("%s %.7g, the reference %.7g (relative error %.2g)", name, got, want, rel)
	}
	return rel
}

// Step compares a training step with the reference's grads.safetensors in
// dir: the loss (the file's "loss") and the gradients got of names, in
// order; it logs the worst relative error and returns the reference's
// tensors.
func Step(t *testing.T, dir string, loss float64, got map[string][]float32, names []string) map[string]*safetensors.Tensor {
	t.Helper()
	ref, err := safetensors.ReadFile(filepath.Join(dir, "grads.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	rl, ok := ref["loss"]
	if !ok || len(rl.Data) != 1 {
		t.Fatal("the reference has no loss")
	}
	refLoss := float64(rl.Data[0])
	lossRel := Loss(t, "loss", loss, refLoss)
	worst, worstName := Grads(t, ref, got, names)
	t.Logf("loss %.7g (PyTorch %.7g, relative error %.2g); %d gradients compared, worst relative error %.3g (%s)",
		loss, refLoss, lossRel, len(names), worst, worstName)
	return ref
}
