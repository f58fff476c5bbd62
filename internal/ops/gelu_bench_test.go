package ops

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkFastGELUBiasQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const C, rows = 1536, 64
	x, bias := randn(r, C*rows, 1), randn(r, C, 1)
	src := append([]float32(nil), x...)
	q, s := make([]uint8, C*rows), make([]float32, rows)
	b.Run("gelu", func(b *testing.B) {
		for range b.N {
			copy(x, src)
			FastGELUBias(x, bias)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
	b.Run("gelu+quantize", func(b *testing.B) {
		for range b.N {
			copy(x, src)
			FastGELUBiasQuantize(x, bias, q, C, s)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
	b.Run("quantize", func(b *testing.B) {
		for range b.N {
			QuantizeRows(q, C, src, rows, C, s)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
}
