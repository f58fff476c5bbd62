package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// naiveInt8 is MatMulThen's definition, element by element: the exact
// integer sum, then the float32 roundings one at a time.
func naiveInt8(m, n, k int, a []uint8, lda int, zp uint8, w []int8, cs, rs, bias []float32) []float32 {
	out := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s int64
			for p := 0; p < k; p++ {
				s += (int64(a[i*lda+p]) - int64(zp)) * int64(w[j*k+p])
			}
			v := float32(float32(s) * cs[j])
			if rs != nil {
				v = float32(v * rs[i])
			}
			if bias != nil {
				v = float32(v + bias[j])
			}
			out[i*n+j] = v
		}
	}
	return out
}

// TestInt8MatMul: every int8 kernel this CPU runs gives naiveInt8's bits
// (the integer sums exact, the same roundings after them) on shapes that
// leave partial tiles in rows, columns and k (k not a multiple of 4),
// activations at 0 and 255, weights at ±64 (±127 for the kernels that
// take them), with and without row scales and bias, for any number of
// goroutines and either weight layout, leaving C's padding alone.
func TestInt8MatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	kerns := int8Kernels()
	if testing.Verbose() {
		for _, k := range kerns {
			t.Logf("kernel %s", k.name)
		}
	}
	for _, s := range [][3]int{{1, 1, 1}, {3, 5, 3}, {8, 32, 4}, {9, 33, 7}, {4, 16, 384}, {17, 70, 385}, {40, 384, 384}, {70, 96, 1536}} {
		m, n, k := s[0], s[1], s[2]
		for _, wmax := range []int{64, 127} {
			lda, ldc := Int8Stride(k)+5, n+3
			a := make([]uint8, m*lda)
			for i := range a {
				switch r.IntN(8) {
				case 0:
					a[i] = 0
				case 1:
					a[i] = 255
				default:
					a[i] = uint8(r.IntN(256))
				}
			}
			w := make([]int8, n*k)
			for i := range w {
				w[i] = int8(r.IntN(2*wmax+1) - wmax)
			}
			w[0] = int8(wmax)
			wt := make([]int8, k*n)
			for i := 0; i < n; i++ {
				for j := 0; j < k; j++ {
					wt[j*n+i] = w[i*k+j]
				}
			}
			cs, rs, bias := randSlice(r, n), randSlice(r, m), randSlice(r, n)
			zp := uint8(r.IntN(256))
			c0 := randSlice(r, m*ldc)
			for _, opt := range []struct{ rs, bias []float32 }{{nil, nil}, {rs, nil}, {nil, bias}, {rs, bias}} {
				want := naiveInt8(m, n, k, a, lda, zp, w, cs, opt.rs, opt.bias)
				for _, kern := range kerns {
					if wmax > kern.maxW {
						continue
					}
					for _, threads := range []int{1, 2, 5} {
						for _, kn := range []bool{false, true} {
							pw := packInt8Weight(kern, w, n, k, false)
							if kn {
								pw = packInt8Weight(kern, wt, n, k, true)
							}
							c := slices.Clone(c0)
							var calls atomic.Int64
							err := pw.MatMulThen(c, ldc, a, lda, m, zp, cs, opt.rs, opt.bias, threads, func(lo, hi int) { calls.Add(int64(hi - lo)) })
							if err != nil {
								t.Fatal(err)
							}
							if calls.Load() != int64(m) {
								t.Errorf("%s %v threads %d: then covered %d rows of %d", kern.name, s, threads, calls.Load(), m)
							}
							for i := 0; i < m; i++ {
								for j := 0; j < ldc; j++ {
									got := c[i*ldc+j]
									if j >= n {
										if math.Float32bits(got) != math.Float32bits(c0[i*ldc+j]) {
											t.Fatalf("%s %v: padding C[%d,%d] written", kern.name, s, i, j)
										}
										continue
									}
									if math.Float32bits(got) != math.Float32bits(want[i*n+j]) {
										t.Fatalf("%s %v wmax %d threads %d kn %v rs %v bias %v: C[%d,%d] = %v, want %v",
											kern.name, s, wmax, threads, kn, opt.rs != nil, opt.bias != nil, i, j, got, want[i*n+j])
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestInt8KernelChoice: a weight is packed for the first kernel that sums
// it exactly (no AVX2 past |w| 64), and misuse is an error, not a panic.
func TestInt8KernelChoice(t *testing.T) {
	w := []int8{65, 1, 2, 3}
	pw, err := PackInt8Weight(w, 2, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if pw.Kernel() == "avx2" {
		t.Errorf("a weight of 65 packed for the AVX2 kernel, whose 16-bit pair sums saturate")
	}
	w[0] = 64
	if pw, _ = PackInt8Weight(w, 2, 2, false); pw.Kernel() != int8Kernels()[0].name {
		t.Errorf("7-bit weight packed for %s, want %s", pw.Kernel(), int8Kernels()[0].name)
	}
	if _, err := PackInt8Weight(w, 3, 2, false); err == nil {
		t.Error("4 values packed as 3×2")
	}
	c := make([]float32, 4)
	cs := []float32{1, 1}
	for _, tc := range []struct {
		a    []uint8
		lda  int
		cs   []float32
		want string
	}{
		{make([]uint8, 4), 2, cs, "stride"},
		{make([]uint8, 5), 4, cs, "does not hold"},
		{make([]uint8, 8), 4, cs[:1], "column scales"},
	} {
		if err := pw.MatMulThen(c, 2, tc.a, tc.lda, 2, 0, tc.cs, nil, nil, 1, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("A of %d bytes, stride %d: %v, want %q", len(tc.a), tc.lda, err, tc.want)
		}
	}
}
