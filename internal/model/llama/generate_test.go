package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPickSamples: sampling draws each token at its softmax(logits/τ)
// probability, and with TopP only from the smallest set of most likely
// tokens reaching it, renormalised (counts of 40,000 draws within 0.01).
func TestPickSamples(t *testing.T) {
	logits := []float32{2, 1, 0, -1}
	soft := func(tau float64, keep int) []float64 {
		p := make([]float64, len(logits))
		var s float64
		for i, l := range logits[:keep] {
			p[i] = math.Exp(float64(l) / tau)
			s += p[i]
		}
		for i := range p {
			p[i] /= s
		}
		return p
	}
	for _, c := range []struct {
		o    GenerateOptions
		want []float64
	}{
		{GenerateOptions{Temperature: 1}, soft(1, 4)},
		{GenerateOptions{Temperature: 2}, soft(2, 4)},
		{GenerateOptions{Temperature: 1, TopP: 0.7}, soft(1, 2)}, // 0.644 < 0.7 ≤ 0.644 + 0.237
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		const draws = 40000
		got := make([]float64, len(logits))
		for range draws {
			got[pick(logits, c.o, rng)] += 1.0 / draws
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 0.01 {
				t.Fatalf("%+v: frequencies %.3f, want %.3f", c.o, got, c.want)
			}
		}
	}
}
