package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLURowMatchesForward: SwiGLURow gives SwiGLUForward's bits, for
// rows of every length up to 40 (the vector part and the tail) with
// values across the exponential's range, its clamps at −87 and 88
// included.
func TestSwiGLURowMatchesForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 40; n++ {
		gate, up := make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i] = float32(rng.NormFloat64() * 8)
			if i%7 == 3 {
				gate[i] = float32(rng.Float64()*400 - 200)
			}
			up[i] = float32(rng.NormFloat64())
		}
		want, got := make([]float32, n), make([]float32, n)
		SwiGLUForward(want, gate, up, 1)
		SwiGLURow(got, gate, up)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("n=%d, gate %v: SwiGLURow %v, SwiGLUForward %v", n, gate[i], got[i], want[i])
			}
		}
	}
}
