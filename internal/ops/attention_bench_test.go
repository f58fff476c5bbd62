package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPackedAttention: one sequence of L tokens, 12 heads of 32 (MiniLM's
// and bge-small's shapes), one goroutine; "Gop/s" counts Q·Kᵀ's and P·V's
// multiply-adds as 2 ops each (4·L²·D a head), softmax free, as the roofline
// benchmark does.
func BenchmarkPackedAttention(b *testing.B) {
	const H, D = 12, 32
	for _, L := range []int{64, 128, 200, 256, 512} {
		b.Run(fmt.Sprint("L=", L), func(b *testing.B) {
			N := max(1, 1024/L) // the encoder's batches: about 1,024 tokens
			r := rand.New(rand.NewPCG(1, 2))
			qkv := make([]float32, N*L*3*H*D)
			for i := range qkv {
				qkv[i] = float32(r.NormFloat64())
			}
			out := make([]float32, N*L*H*D)
			a := PackedAttention{H: H, KV: H, D: D, KeyBias: make([]float32, N*L)}
			for n := range N {
				a.Lens, a.Offs = append(a.Lens, L), append(a.Offs, n*L)
			}
			sc := make([]AttScratch, 1)
			b.ResetTimer()
			for range b.N {
				if err := a.Forward(out, qkv, sc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*4*float64(N*L*L*D*H)/b.Elapsed().Seconds()/1e9, "Gop/s")
		})
	}
}

func BenchmarkAttentionParts(b *testing.B) {
	const H, D = 12, 32
	for _, L := range []int{128, 256, 512} {
		r := rand.New(rand.NewPCG(1, 2))
		QW := 3 * H * D
		qkv := make([]float32, L*QW)
		for i := range qkv {
			qkv[i] = float32(r.NormFloat64())
		}
		out := make([]float32, L*H*D)
		var sc AttScratch
		kt, s := growAtt(&sc.kt, D*L), growAtt(&sc.s, L*L)
		kb := make([]float32, L)
		b.Run(fmt.Sprint("kt/L=", L), func(b *testing.B) {
			for range b.N {
				transposeRows(kt, L, qkv[H*D:], L, D, QW)
			}
		})
		b.Run(fmt.Sprint("qk/L=", L), func(b *testing.B) {
			for range b.N {
				sc.mm.MatMulNN(L, L, D, qkv, QW, kt, L, s, L)
			}
			b.ReportMetric(float64(b.N)*2*float64(L*L*D)/b.Elapsed().Seconds()/1e9, "Gop/s")
		})
		b.Run(fmt.Sprint("softmax/L=", L), func(b *testing.B) {
			for range b.N {
				for i := 0; i < L; i++ {
					ExpScaled(s[i*L:i*L+L], kb, 0.01)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(L*L), "ns/elem")
		})
		b.Run(fmt.Sprint("pv/L=", L), func(b *testing.B) {
			for range b.N {
				sc.mm.MatMulNN(L, D, L, s, L, qkv[2*H*D:], QW, out, H*D)
			}
			b.ReportMetric(float64(b.N)*2*float64(L*L*D)/b.Elapsed().Seconds()/1e9, "Gop/s")
		})
	}
}
