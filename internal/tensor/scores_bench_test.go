package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAttentionProducts: attention's two products for one block of 12
// query rows of one head (D = 32, MiniLM's and bge-small's), Q·Kᵀ through
// ScoresMax and P·V through MatMulNN, at sequence lengths L, Q's and V's
// rows as they lie in the forward's QKV buffer (3·384 floats apart); G
// op/s counts a multiply-add as 2.
func BenchmarkAttentionProducts(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const m, D, QW = 12, 32, 3 * 384
	for _, L := range []int{128, 256, 512} {
		q, kt, v := randSlice(r, m*QW), randSlice(r, D*L), randSlice(r, L*QW)
		bias, sc := randSlice(r, L), randSlice(r, m*L)
		mx, out := make([]float32, 16*m), make([]float32, m*D)
		var s InferScratch
		b.Run(fmt.Sprintf("QK/L=%d", L), func(b *testing.B) {
			if !s.ScoresMax(m, L, D, q, QW, kt, L, sc, L, bias, 0.25, mx) {
				b.Skip("no ScoresMax kernel")
			}
			for range b.N {
				s.ScoresMax(m, L, D, q, QW, kt, L, sc, L, bias, 0.25, mx)
			}
			b.ReportMetric(float64(b.N)*float64(2*m*L*D)/b.Elapsed().Seconds()/1e9, "Gop/s")
		})
		b.Run(fmt.Sprintf("PV/L=%d", L), func(b *testing.B) {
			for range b.N {
				s.MatMulNN(m, D, L, sc, L, v, QW, out, D)
			}
			b.ReportMetric(float64(b.N)*float64(2*m*L*D)/b.Elapsed().Seconds()/1e9, "Gop/s")
		})
	}
}
