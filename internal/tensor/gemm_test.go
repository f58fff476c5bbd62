package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naive is the reference: a plain triple loop in float64.
func naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float32 {
	out := make([]float32, len(c))
	copy(out, c)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestGemmMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {7, 5, 3}, {6, 16, 1}, {13, 33, 300}, {100, 70, 257}, {97, 530, 40}, {200, 17, 600}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				lda, ldb, ldc := k+3, n+1, n+2
				if tA {
					lda = m + 3
				}
				if tB {
					ldb = k + 1
				}
				rowsA, rowsB := m, k
				if tA {
					rowsA = k
				}
				if tB {
					rowsB = n
				}
				a := randSlice(r, rowsA*lda)
				b := randSlice(r, rowsB*ldb)
				c := randSlice(r, m*ldc)
				want := naive(tA, tB, m, n, k, 0.7, a, lda, b, ldb, 0.3, c, ldc)
				for _, threads := range []int{1, 3} {
					got := append([]float32(nil), c...)
					Gemm(tA, tB, m, n, k, 0.7, a, lda, b, ldb, 0.3, got, ldc, threads)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							g, w := got[i*ldc+j], want[i*ldc+j]
							if d := math.Abs(float64(g - w)); d > 1e-4*math.Sqrt(float64(k))*(1+math.Abs(float64(w))) {
								t.Fatalf("m=%d n=%d k=%d tA=%v tB=%v threads=%d: C[%d,%d]=%g want %g", m, n, k, tA, tB, threads, i, j, g, w)
							}
						}
					}
					// Elements outside the m×n window (the ldc padding) are untouched.
					for i := 0; i < m; i++ {
						for j := n; j < ldc; j++ {
							if got[i*ldc+j] != c[i*ldc+j] {
								t.Fatalf("padding C[%d,%d] written", i, j)
							}
						}
					}
				}
			}
		}
	}
}

// The reduction order per element does not depend on the goroutine count.
func TestGemmDeterministicAcrossThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, n, k := 300, 700, 600
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	c1 := make([]float32, m*n)
	c4 := make([]float32, m*n)
	Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c1, n, 1)
	Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c4, n, 4)
	for i := range c1 {
		if c1[i] != c4[i] {
			t.Fatalf("element %d differs: %g vs %g", i, c1[i], c4[i])
		}
	}
}

func TestKernelAsmMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	kk := 37
	a, b := randSlice(r, kk*mr), randSlice(r, kk*nr)
	c1 := randSlice(r, mr*(nr+3))
	c2 := append([]float32(nil), c1...)
	kernel(kk, a, b, c1, nr+3, 0.5)
	kernelGo(kk, a, b, c2, nr+3, 0.5)
	for i := range c1 {
		if d := math.Abs(float64(c1[i] - c2[i])); d > 1e-4 {
			t.Fatalf("element %d: %g vs %g", i, c1[i], c2[i])
		}
	}
}

// BenchmarkGemm reports GFLOP/s for a MiniLM-sized projection
// (36864 tokens × 384 → 1536).
func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	m, n, k := 4096, 1536, 384
	x, w := randSlice(r, m*k), randSlice(r, n*k)
	c := make([]float32, m*n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Gemm(false, true, m, n, k, 1, x, k, w, k, 0, c, n, 0)
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// GemmPacked with a weight packed once by PackBT equals Gemm(false, true,
// …) bit for bit, for shapes across the block sizes, row strides, beta 0
// and 1, and any number of goroutines.
func TestGemmPackedEqualsGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][3]int{{1, 1, 1}, {3, 17, 5}, {8, 576, 576}, {8, 1536, 576}, {2, 530, 600}, {100, 1100, 300}} {
		m, n, k := s[0], s[1], s[2]
		lda, ldw, ldc := k+1, k+3, n+2
		a, w := randSlice(r, m*lda), randSlice(r, n*ldw)
		p := PackBT(w, n, k, ldw)
		for _, beta := range []float32{0, 1} {
			c := randSlice(r, m*ldc)
			want := append([]float32(nil), c...)
			Gemm(false, true, m, n, k, 0.7, a, lda, w, ldw, beta, want, ldc, 1)
			for _, threads := range []int{1, 3} {
				got := append([]float32(nil), c...)
				GemmPacked(m, 0.7, a, lda, p, beta, got, ldc, threads)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("m=%d n=%d k=%d beta=%g threads=%d: element %d %g, Gemm %g", m, n, k, beta, threads, i, got[i], want[i])
					}
				}
			}
		}
	}
}
