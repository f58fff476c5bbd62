package ops

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkInt8Elementwise: the int8 forward's FFN steps on rows of 1,536
// (MiniLM's and bge-small's intermediate width), values per second.
func BenchmarkInt8Elementwise(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const C, rows = 1536, 64
	x, bias := randn(r, C*rows, 1), randn(r, C, 1)
	src := append([]float32(nil), x...)
	q, s := make([]uint8, C*rows), make([]float32, rows)
	b.Run("FastGELUBias", func(b *testing.B) {
		for range b.N {
			copy(x, src)
			FastGELUBias(x, bias)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
	b.Run("FastGELUBiasQuantize", func(b *testing.B) {
		for range b.N {
			copy(x, src)
			FastGELUBiasQuantize(x, bias, q, C, s)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
	b.Run("QuantizeRows", func(b *testing.B) {
		for range b.N {
			QuantizeRows(q, C, src, rows, C, s)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
}
