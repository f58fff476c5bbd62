package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// PackedAttention's scores with the softmax's first step in the product's
// registers (tensor.ScoresMax) give the bits of the plain path (MatMulNN,
// then ExpScaled) for every length mod the kernels' tiles, heads of 32
// and 64, keys hidden by −Inf or a large bias, several sequences and
// goroutines; and both match attention in float64.
func TestPackedAttentionFused(t *testing.T) {
	defer func() { fuseScores = true }()
	r := rand.New(rand.NewPCG(31, 32))
	for _, D := range []int{32, 64} {
		for _, lens := range [][]int{{1}, {5, 12}, {13, 31, 33}, {64}, {100, 7}, {256}, {300}} {
			t.Run(fmt.Sprint("D=", D, "/lens=", lens), func(t *testing.T) {
				const H = 3
				R := 0
				a := PackedAttention{H: H, KV: H, D: D}
				for _, L := range lens {
					a.Lens, a.Offs = append(a.Lens, L), append(a.Offs, R)
					R += L
				}
				qkv := randn(r, R*3*H*D, 2)
				a.KeyBias = make([]float32, R)
				for i := range a.KeyBias {
					switch {
					case i%7 == 3:
						a.KeyBias[i] = float32(math.Inf(-1))
					case i%5 == 1:
						a.KeyBias[i] = -10000
					}
				}
				for _, o := range a.Offs { // every sequence keeps a key
					a.KeyBias[o] = 0
				}
				var got [2][]float32
				for i, fuse := range []bool{true, false} {
					fuseScores = fuse
					got[i] = make([]float32, R*H*D)
					if err := a.Forward(got[i], qkv, make([]AttScratch, 2)); err != nil {
						t.Fatal(err)
					}
				}
				for i := range got[0] {
					if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
						t.Fatalf("value %d: fused %v, plain %v", i, got[0][i], got[1][i])
					}
				}
				want := naivePacked(a, qkv)
				for i, w := range want {
					if d := math.Abs(float64(got[0][i]) - w); d > 1e-4*(1+math.Abs(w)) {
						t.Fatalf("value %d: %v, float64 %v", i, got[0][i], w)
					}
				}
			})
		}
	}
}

// naivePacked is PackedAttention (multi-head, not causal) in float64.
func naivePacked(a PackedAttention, qkv []float32) []float64 {
	H, D := a.H, a.D
	QW, C := 3*H*D, H*D
	out := make([]float64, len(qkv)/3)
	for n, L := range a.Lens {
		o := a.Offs[n]
		for h := range H {
			for i := range L {
				p := make([]float64, L)
				mx := math.Inf(-1)
				for j := range L {
					var s float64
					for d := range D {
						s += float64(qkv[(o+i)*QW+h*D+d]) * float64(qkv[(o+j)*QW+C+h*D+d])
					}
					p[j] = s/math.Sqrt(float64(D)) + float64(a.KeyBias[o+j])
					mx = math.Max(mx, p[j])
				}
				var sum float64
				for j := range p {
					p[j] = math.Exp(p[j] - mx)
					sum += p[j]
				}
				for d := range D {
					var v float64
					for j := range L {
						v += p[j] * float64(qkv[(o+j)*QW+2*C+h*D+d])
					}
					out[(o+i)*C+h*D+d] = v / sum
				}
			}
		}
	}
	return out
}
