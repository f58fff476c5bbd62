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

// AttScratch is one attention goroutine's buffers: Kᵀ of a head, a
// block's scores, its rows' 1/Σ and running maxima, the keys' bias in
// base 2, kept between calls.
type AttScratch struct {
	kt, s, inv, kbl, mx []float32
	mm                  tensor.InferScratch
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
	s2 := scale * log2e32
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
			kt, s := growAtt(&sc.kt, D*Lp), growAtt(&sc.s, attRows*Lp)
			q := qkv[o*QW+h*D:]
			k := qkv[o*QW+C+kvh*D:]
			v := qkv[o*QW+C+KV*D+kvh*D:]
			transposeRows(kt, Lp, k, L, D, QW)
			kb, inv := a.KeyBias[o:o+L], growAtt(&sc.inv, attRows)
			// Without a causal mask the softmax's first step (scale, bias,
			// each row's maximum) is done on the scores in the product's
			// registers (tensor's ScoresMax, where the CPU has it): kbl is
			// the bias in base 2, −Inf past L; the same values as
			// ExpScaled's.
			var kbl, mx []float32
			if !a.Causal && fuseScores {
				kbl, mx = growAtt(&sc.kbl, Lp), growAtt(&sc.mx, attRows*16)
				for j, b := range kb {
					kbl[j] = b * log2e32
				}
				for j := L; j < Lp; j++ {
					kbl[j] = float32(math.Inf(-1))
				}
			}
			// The task this goroutine likely takes next (tasks go round
			// in turn): its queries, keys and values are asked for in
			// the second level cache a block of rows at a time, while
			// this one computes (rows of Q, K and V lie far apart).
			var nq, nk, nv []float32
			nL := 0
			if nt := task + len(scratches); nt < tasks {
				nn, nh := nt/H, nt%H
				no := a.Offs[nn]
				nL = a.Lens[nn]
				nq = qkv[no*QW+nh*D:]
				nk = qkv[no*QW+C+(nh/rep)*D:]
				nv = qkv[no*QW+C+KV*D+(nh/rep)*D:]
			}
			// attRows query rows at a time: their scores stay in the
			// first level cache from Q·Kᵀ through the softmax to P·V.
			for i0 := 0; i0 < L; i0 += attRows {
				m := min(attRows, L-i0)
				if i0 < nL {
					r := min(attRows, nL-i0)
					if i0+attRows >= L { // the last block: the rest
						r = nL - i0
					}
					prefetch(nq[i0*QW:], r, QW, D)
					prefetch(nk[i0*QW:], r, QW, D)
					prefetch(nv[i0*QW:], r, QW, D)
				}
				fused := false
				if kbl != nil {
					copy(mx, negInfRows[:])
					fused = sc.mm.ScoresMax(m, Lp, D, q[i0*QW:], QW, kt, Lp, s, Lp, kbl, s2, mx)
				}
				if fused {
					if !expRowsVec(s, Lp, L, m, mx, inv) {
						for i := 0; i < m; i++ {
							inv[i] = 1 / expRowMax(s[i*Lp:i*Lp+L], mx[i*16:i*16+16])
						}
					}
				} else {
					sc.mm.MatMulNN(m, Lp, D, q[i0*QW:], QW, kt, Lp, s, Lp)
					for i := 0; i < m; i++ {
						seen := L
						if a.Causal {
							seen = i0 + i + 1
						}
						inv[i] = 1 / ExpScaled(s[i*Lp:i*Lp+seen], kb[:seen], scale)
						clear(s[i*Lp+seen : i*Lp+L])
					}
				}
				out := ctx[(o+i0)*C+h*D:]
				sc.mm.MatMulNN(m, D, L, s, Lp, v, QW, out, C)
				if !scaleRowsVec(out, C, D, inv[:m]) { // the softmax's division, on P·V's rows
					for i, f := range inv[:m] {
						row := out[i*C : i*C+D]
						for d := scaleVec(row, f); d < D; d++ {
							row[d] *= f
						}
					}
				}
			}
		}
	})
}

// negInfRows is −Inf in every lane of attRows rows' maxima (ScoresMax's
// starting values).
var negInfRows = func() (v [attRows * 16]float32) {
	for i := range v {
		v[i] = float32(math.Inf(-1))
	}
	return v
}()

// fuseScores lets Forward take tensor's ScoresMax where it can (a
// variable for the test that compares the two paths bit for bit).
var fuseScores = true

// attRows is how many query rows PackedAttention takes at a time: a
// multiple of every GEMM kernel's tile height (tensor's mr: 6 or 12),
// their scores (attRows·L floats) small enough for the first level cache.
const attRows = 12

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

// expRowMax is ExpScaled's second step on a row whose first is done (its
// values in base 2, its maximum the largest of m's 16 lanes): x =
// 2^(x − max), their sum returned, as ExpScaled sums them.
func expRowMax(row, m []float32) float32 {
	mx := m[0]
	for _, v := range m[1:] {
		mx = max(mx, v)
	}
	return exp2SubSum(row, mx)
}
