package ops

import (
	"fmt"
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
	// LayerNorm's rows (384 wide: the hidden width) with the skip and the
	// quantizing after it; rows summed by gathers or by transposition.
	const H = 384
	hx, hy, hb := randn(r, H*rows, 1), randn(r, H*rows, 1), randn(r, H, 1)
	hw, hbb, hout := randn(r, H, 1), randn(r, H, 1), make([]float32, H*rows)
	ysrc := append([]float32(nil), hy...)
	for _, tr := range []bool{false, true} {
		b.Run(fmt.Sprintf("SkipLayerNormQuantize/transposed=%v", tr), func(b *testing.B) {
			defer func(v bool) { rowSumsTransposed = v }(rowSumsTransposed)
			rowSumsTransposed = tr
			for range b.N {
				copy(hy, ysrc)
				SkipLayerNormQuantize(hout, hx, hy, hb, hw, hbb, rows, H, 1e-12, q, H, s)
			}
			b.ReportMetric(float64(b.N)*H*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
		})
	}
	b.Run("QuantizeRows", func(b *testing.B) {
		for range b.N {
			QuantizeRows(q, C, src, rows, C, s)
		}
		b.ReportMetric(float64(b.N)*C*rows/b.Elapsed().Seconds()/1e9, "Gvalues/s")
	})
}
