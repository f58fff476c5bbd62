package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// halves is a test Rows: float32 values rounded to bfloat16, kept as bits.
type halves struct {
	bits []uint16
	cols int
}

func (h halves) Read(dst []float32, i, j int) {
	for c := range dst {
		dst[c] = math.Float32frombits(uint32(h.bits[i*h.cols+j+c]) << 16)
	}
}

func (h halves) widen() []float32 {
	out := make([]float32, len(h.bits))
	for i, b := range h.bits {
		out[i] = math.Float32frombits(uint32(b) << 16)
	}
	return out
}

func randHalves(r *rand.Rand, rows, cols int) halves {
	h := halves{bits: make([]uint16, rows*cols), cols: cols}
	for i := range h.bits {
		h.bits[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
	}
	return h
}

// GemmRows and PackBTRows over a compact W equal Gemm and PackBT over W
// widened, bit for bit: both products a Linear makes with its weight (x·Wᵀ
// forward, dout·W backward), shapes across the block sizes (partial
// panels, several k and column blocks), beta 0 and 1, one goroutine or
// three.
func TestGemmRowsEqualsGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range [][3]int{{1, 1, 1}, {3, 17, 5}, {7, 530, 300}, {100, 1100, 600}, {200, 64, 1000}} {
		m, n, k := s[0], s[1], s[2]
		for _, transB := range []bool{true, false} {
			rows, cols := k, n // W as stored: k×n, or n×k for Wᵀ
			if transB {
				rows, cols = n, k
			}
			w := randHalves(r, rows, cols)
			wf := w.widen()
			a := randSlice(r, m*k)
			for _, beta := range []float32{0, 1} {
				c := randSlice(r, m*n)
				want := append([]float32(nil), c...)
				Gemm(false, transB, m, n, k, 0.7, a, k, wf, cols, beta, want, n, 1)
				for _, threads := range []int{1, 3} {
					got := append([]float32(nil), c...)
					GemmRows(transB, m, n, k, 0.7, a, k, w, beta, got, n, threads)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("m=%d n=%d k=%d transB=%v beta=%g threads=%d: element %d %g, Gemm %g", m, n, k, transB, beta, threads, i, got[i], want[i])
						}
					}
				}
			}
			if !transB {
				continue
			}
			p, q := PackBT(wf, n, k, k), PackBTRows(w, n, k)
			for jb := range p.blocks {
				for kb := range p.blocks[jb] {
					for i, v := range p.blocks[jb][kb] {
						if q.blocks[jb][kb][i] != v {
							t.Fatalf("n=%d k=%d: PackBTRows block %d,%d element %d %g, PackBT %g", n, k, jb, kb, i, q.blocks[jb][kb][i], v)
						}
					}
				}
			}
		}
	}
}
