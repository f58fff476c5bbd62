package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkInt8MatMul: the int8 products of MiniLM's and bge-small's layers
// (k×n: QKV 384×1152, attention out 384×384, FFN 384×1536 and 1536×384)
// on a batch of 1,024 rows, one goroutine, with each kernel this CPU has;
// G op/s counts a multiply-add as 2.
func BenchmarkInt8MatMul(b *testing.B) {
	const m = 1024
	r := rand.New(rand.NewPCG(1, 2))
	for _, kern := range int8Kernels() {
		for _, s := range [][2]int{{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}} {
			k, n := s[0], s[1]
			b.Run(fmt.Sprintf("%s/k=%d/n=%d", kern.name, k, n), func(b *testing.B) {
				w := make([]int8, n*k)
				for i := range w {
					w[i] = int8(r.IntN(2*kern.maxW+1) - kern.maxW)
				}
				lda := Int8Stride(k)
				a := make([]uint8, m*lda)
				for i := range a {
					a[i] = uint8(r.IntN(256))
				}
				cs, rs, bias := randSlice(r, n), randSlice(r, m), randSlice(r, n)
				c := make([]float32, m*n)
				pw := packInt8Weight(kern, w, n, k, false)
				b.ResetTimer()
				for range b.N {
					if err := pw.MatMulThen(c, n, a, lda, m, 128, cs, rs, bias, 1, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)*2*float64(m*n*k)/b.Elapsed().Seconds()/1e9, "Gop/s")
			})
		}
	}
}
