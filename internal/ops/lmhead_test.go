package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naiveLMLoss is LMHeadCrossEntropy's loss in float64, straight from its
// definition.
func naiveLMLoss(h, W []float32, targets []int32, rows, C, V int) float64 {
	var loss float64
	n := 0
	for r := 0; r < rows; r++ {
		if targets[r] < 0 {
			continue
		}
		n++
		logits := make([]float64, V)
		mx := math.Inf(-1)
		for v := 0; v < V; v++ {
			for c := 0; c < C; c++ {
				logits[v] += float64(h[r*C+c]) * float64(W[v*C+c])
			}
			mx = math.Max(mx, logits[v])
		}
		var s float64
		for _, l := range logits {
			s += math.Exp(l - mx)
		}
		loss += math.Log(s) + mx - logits[targets[r]]
	}
	return loss / float64(n)
}

func TestLMHeadCrossEntropy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	// More counted rows than one chunk, some rows ignored.
	rows, C, V := lmChunk+9, 12, 37
	h, W := randn(r, rows*C, 1), randn(r, V*C, 0.5)
	targets := make([]int32, rows)
	for i := range targets {
		targets[i] = int32(r.IntN(V))
		if i%5 == 2 {
			targets[i] = -100
		}
	}
	dh, dW := make([]float32, rows*C), make([]float32, V*C)
	const scale = 0.75
	loss, count := LMHeadCrossEntropy(dh, dW, h, W, targets, rows, C, V, scale, 2)
	want := naiveLMLoss(h, W, targets, rows, C, V)
	if count != rows-rows/5-btoi(rows%5 > 2) || math.Abs(loss-want) > 1e-5*math.Abs(want) {
		t.Fatalf("loss %.8g over %d rows, want %.8g", loss, count, want)
	}
	for i, tg := range targets {
		if tg < 0 {
			for _, v := range dh[i*C : i*C+C] {
				if v != 0 {
					t.Fatalf("row %d is ignored but got a gradient", i)
				}
			}
		}
	}
	// Directional derivatives against central differences of the float64
	// loss.
	const eps = 1e-3
	for k, pair := range [][2][]float32{{h, dh}, {W, dW}} {
		x, g := pair[0], pair[1]
		u := randn(r, len(x), 1)
		orig := append([]float32(nil), x...)
		for j := range x {
			x[j] = orig[j] + eps*u[j]
		}
		lp := naiveLMLoss(h, W, targets, rows, C, V)
		for j := range x {
			x[j] = orig[j] - eps*u[j]
		}
		lm := naiveLMLoss(h, W, targets, rows, C, V)
		copy(x, orig)
		fd := scale * (lp - lm) / (2 * eps)
		an := dot(g, u)
		if rel := math.Abs(fd-an) / math.Max(math.Abs(fd), 1e-6); rel > 1e-3 {
			t.Errorf("input %d: analytic %.6g, finite difference %.6g (relative error %.2g)", k, an, fd, rel)
		}
	}
	// No counted rows: no loss, no gradient, no NaN.
	for i := range targets {
		targets[i] = -1
	}
	if l, n := LMHeadCrossEntropy(dh, nil, h, W, targets, rows, C, V, 1, 2); l != 0 || n != 0 {
		t.Fatalf("no targets: loss %g over %d rows", l, n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
