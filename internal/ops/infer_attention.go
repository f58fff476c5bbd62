package ops

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/anna-search/anna/internal/parallel"
	"github.com/anna-search/anna/internal/tensor"
)

// PackedAttention is the inference self-attention of model/bert's and
// model/llama's forwards over a batch of sequences laid back to back
// (sequence n: rows Offs[n] to Offs[n]+Lens[n], no padding rows): H query
// heads and KV key/value heads (H a multiple of KV; query head h reads
// key/value head h/(H/KV); multi-head attention is KV = H), each D wide.
// KeyBias (one value a row, 0 or a large negative) is added to every
// query's score of that key. Causal lets query i see keys 0..i only.
type PackedAttention struct {
	H, KV, D   int
	Causal     bool
	Lens, Offs []int
	KeyBias    []float32
}

// AttScratch is one attention goroutine's buffers: Kᵀ of a head, its
// scores, and the rows' 1/Σ, kept between calls.
type AttScratch struct {
	kt, s, inv []float32
	mm         tensor.InferScratch
}

func growAtt(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}

// Forward writes ctx (rows of H·D) from qkv (rows of H·D queries, then
// KV·D keys, then KV·D values): per sequence and query head, P =
// softmax(Q·Kᵀ/√D + KeyBias) over the head's key/value head (a causal
// row's later keys get probability 0), ctx = P·V. Tasks are (sequence,
// head) pairs, taken in turn by up to len(scratches) goroutines, each
// with its scratch; each task's arithmetic is fixed, so results do not
// depend on the number of goroutines. The error is a panic of one of
// them, recovered.
func (a PackedAttention) Forward(ctx, qkv []float32, scratches []AttScratch) error {
	H, KV, D := a.H, a.KV, a.D
	rep := H / KV
	QW, C := (H+2*KV)*D, H*D
	scale := float32(1 / math.Sqrt(float64(D)))
	tasks := len(a.Lens) * H
	scratches = scratches[:max(1, min(len(scratches), tasks))]
	var next atomic.Int64
	return parallel.Each(context.Background(), len(scratches), len(scratches), func(g int) error {
		sc := &scratches[g]
		for {
			task := int(next.Add(1) - 1)
			if task >= tasks {
				return nil
			}
			n, h := task/H, task%H
			kvh := h / rep
			L, o := a.Lens[n], a.Offs[n]
			// Kᵀ's rows and the scores' rows are Lp wide, a whole number
			// of the GEMM kernels' panels, so that no product of a
			// sequence's length takes the kernels' narrow-panel copies;
			// the columns past L are zero in Kᵀ and never read in s.
			Lp := (L + attPad - 1) &^ (attPad - 1)
			kt, s := growAtt(&sc.kt, D*Lp), growAtt(&sc.s, L*Lp)
			q := qkv[o*QW+h*D:]
			k := qkv[o*QW+C+kvh*D:]
			v := qkv[o*QW+C+KV*D+kvh*D:]
			transposeRows(kt, Lp, k, L, D, QW)
			sc.mm.MatMulNN(L, Lp, D, q, QW, kt, Lp, s, Lp)
			kb, inv := a.KeyBias[o:o+L], growAtt(&sc.inv, L)
			for i := 0; i < L; i++ {
				seen := L
				if a.Causal {
					seen = i + 1
				}
				inv[i] = 1 / ExpScaled(s[i*Lp:i*Lp+seen], kb[:seen], scale)
				clear(s[i*Lp+seen : i*Lp+L])
			}
			sc.mm.MatMulNN(L, D, L, s, Lp, v, QW, ctx[o*C+h*D:], C)
			for i, f := range inv { // the softmax's division, on P·V's rows
				row := ctx[(o+i)*C+h*D : (o+i)*C+h*D+D]
				for d := scaleVec(row, f); d < D; d++ {
					row[d] *= f
				}
			}
		}
	})
}

// attPad is the width PackedAttention rounds Kᵀ's and the scores' rows up
// to: a multiple of every GEMM kernel's panel (tensor's nr: 16 or 32).
const attPad = 32

// transposeRows sets kt (D rows of stride ldt ≥ L) to the transpose of L
// rows of D values (stride ld) from k, and zero in each row's columns L
// to ldt: blocks of 16×16 in AVX-512's registers where it can
// (transposeBlocks), the rest four rows at a time, so that each of kt's
// rows is written in runs rather than one value per pass over k.
func transposeRows(kt []float32, ldt int, k []float32, L, D, ld int) {
	j := transposeBlocks(kt, ldt, k, L, D, ld)
	for ; j+4 <= L; j += 4 {
		r0, r1 := k[j*ld:j*ld+D], k[(j+1)*ld:(j+1)*ld+D]
		r2, r3 := k[(j+2)*ld:(j+2)*ld+D], k[(j+3)*ld:(j+3)*ld+D]
		for d := range r0 {
			c := kt[d*ldt+j : d*ldt+j+4]
			c[0], c[1], c[2], c[3] = r0[d], r1[d], r2[d], r3[d]
		}
	}
	for ; j < L; j++ {
		for d, v := range k[j*ld : j*ld+D] {
			kt[d*ldt+j] = v
		}
	}
	if ldt > L {
		for d := 0; d < D; d++ {
			clear(kt[d*ldt+L : d*ldt+ldt])
		}
	}
}
