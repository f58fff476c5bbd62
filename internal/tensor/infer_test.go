package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naiveLinear is x·Wᵀ + bias in float64, W n×k.
func naiveLinear(m, n, k int, a []float32, lda int, w []float32, bias []float32) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i*lda+p]) * float64(w[j*k+p])
			}
			if bias != nil {
				s += float64(bias[j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

func closeTo(got float32, want float64, k int) bool {
	return math.Abs(float64(got)-want) <= 1e-5*math.Sqrt(float64(k))*(1+math.Abs(want))
}

// Weight.MatMul matches the float64 product for every kernel this CPU
// runs, shapes that leave partial tiles in rows, columns and k blocks,
// with and without a bias, leaves C's padding columns alone, and gives
// the same bits for any number of goroutines; the assembly kernels give
// the same bits as each other.
func TestWeightMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	kerns := inferKernels()
	for _, s := range [][3]int{{1, 1, 1}, {5, 17, 3}, {12, 32, 256}, {13, 33, 257}, {40, 384, 384}, {150, 100, 600}, {300, 70, 1536}} {
		m, n, k := s[0], s[1], s[2]
		lda, ldc := k+3, n+2
		a, w, c0 := randSlice(r, m*lda), randSlice(r, n*k), randSlice(r, m*ldc)
		wt := make([]float32, k*n) // Wᵀ, k×n
		for i := 0; i < n; i++ {
			for j := 0; j < k; j++ {
				wt[j*n+i] = w[i*k+j]
			}
		}
		for _, bias := range [][]float32{nil, randSlice(r, n)} {
			want := naiveLinear(m, n, k, a, lda, w, bias)
			var asmBits []float32
			for _, kern := range kerns {
				var first []float32
				for _, threads := range []int{1, 2, 5} {
					for _, kn := range []bool{false, true} {
						pw := packWeight(kern, w, n, k, false)
						if kn {
							pw = packWeight(kern, wt, n, k, true)
						}
						c := append([]float32(nil), c0...)
						pad := c0
						pw.MatMul(c, ldc, a, lda, m, bias, threads)
						for i := 0; i < m; i++ {
							for j := 0; j < ldc; j++ {
								g := c[i*ldc+j]
								if j >= n {
									if g != pad[i*ldc+j] {
										t.Fatalf("%s m=%d n=%d k=%d: padding C[%d,%d] written", kern.name, m, n, k, i, j)
									}
									continue
								}
								if !closeTo(g, want[i*n+j], k) {
									t.Fatalf("%s m=%d n=%d k=%d threads=%d bias=%v: C[%d,%d]=%g want %g", kern.name, m, n, k, threads, bias != nil, i, j, g, want[i*n+j])
								}
							}
						}
						if first == nil {
							first = c
						} else if d := firstDiff(first, c); d >= 0 {
							t.Fatalf("%s m=%d n=%d k=%d: %d goroutines change element %d: %g vs %g", kern.name, m, n, k, threads, d, c[d], first[d])
						}
					}
				}
				if kern.asm != nil {
					if asmBits == nil {
						asmBits = first
					} else if d := firstDiff(asmBits, first); d >= 0 {
						t.Fatalf("m=%d n=%d k=%d: kernel %s differs from %s at %d: %g vs %g", m, n, k, kern.name, kerns[0].name, d, first[d], asmBits[d])
					}
				}
			}
		}
	}
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// MatMulNN matches the float64 product with strided operands, including a
// B that ends at its slice's end and narrow panels.
func TestMatMulNN(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, kern := range inferKernels() {
		var s InferScratch
		for _, sh := range [][3]int{{1, 1, 1}, {7, 32, 32}, {25, 31, 19}, {256, 256, 32}, {100, 64, 300}, {13, 40, 600}} {
			m, n, k := sh[0], sh[1], sh[2]
			lda, ldb, ldc := k+5, n+1, n+3
			a := randSlice(r, m*lda)
			b := randSlice(r, (k-1)*ldb+n) // the last row ends the slice
			c := randSlice(r, m*ldc)
			mulNN(kern, &s, m, n, k, a, lda, b, ldb, c, ldc)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var want float64
					for p := 0; p < k; p++ {
						want += float64(a[i*lda+p]) * float64(b[p*ldb+j])
					}
					if g := c[i*ldc+j]; !closeTo(g, want, k) {
						t.Fatalf("%s m=%d n=%d k=%d: C[%d,%d]=%g want %g", kern.name, m, n, k, i, j, g, want)
					}
				}
			}
		}
	}
}

// BenchmarkWeightMatMul reports GFLOP/s of MiniLM's projections for a
// batch of 1024 tokens, per kernel, on GOMAXPROCS goroutines.
func BenchmarkWeightMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, kern := range inferKernels() {
		for _, s := range [][3]int{{1024, 1152, 384}, {1024, 1536, 384}, {1024, 384, 1536}} {
			m, n, k := s[0], s[1], s[2]
			x, w, bias := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, n)
			pw := packWeight(kern, w, n, k, false)
			c := make([]float32, m*n)
			b.Run(kern.name+"/"+itoa(n)+"x"+itoa(k), func(b *testing.B) {
				for b.Loop() {
					pw.MatMul(c, n, x, k, m, bias, 0)
				}
				b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
