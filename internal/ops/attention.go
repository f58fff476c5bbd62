package ops

import (
	"math"

	"github.com/anna-search/anna/internal/tensor"
)

// Attention is the shape of a grouped-query attention: N sequences of T
// positions, H query heads and KV key/value heads (H a multiple of KV;
// query head h reads key/value head h/(H/KV)), each D wide. Causal lets
// position i see keys 0..i; otherwise every query sees every real key.
// KeyMask (N×T, nil: none) hides, within each sequence's length, the keys
// whose value is 0 (BERT's attention mask, which may leave holes).
// Multi-head attention is KV = H.
type Attention struct {
	N, T, H, KV, D int
	Causal         bool
	KeyMask        []float32
}

// AttSize is the length of the probability workspace: N·H·T·T.
func (s Attention) AttSize() int { return s.N * s.H * s.T * s.T }

// Forward computes, for each sequence n over its first lens[n] positions
// (right padding) and each query head h: P = softmax(Q_h·K_gᵀ/√D + mask),
// out_h = P·V_g. q and out are N·T rows of H·D, k and v N·T rows of KV·D.
// The probabilities of (n, h) go to att[(n·H+h)·T·T:] as a lens[n]² block
// (kept for the backward). Keys at or past lens[n] (and, when causal, after
// the query) get probability exactly 0, as transformers' additive minimum
// gives after exp underflows. Padded query rows of out are zero.
func (s Attention) Forward(out, att, q, k, v []float32, lens []int, th int) {
	N, T, H, KV, D := s.N, s.T, s.H, s.KV, s.D
	rep := H / KV
	qs, ks := H*D, KV*D
	scale := float32(1 / math.Sqrt(float64(D)))
	ParallelFor(N*KV, th, func(lo, hi int) {
		var sc tensor.Scratch
		for task := lo; task < hi; task++ {
			n, g := task/KV, task%KV
			L := lens[n]
			kb := n*T*ks + g*D
			for h := g * rep; h < (g+1)*rep; h++ {
				qb := n*T*qs + h*D
				p := att[(n*H+h)*T*T:]
				tensor.GemmSerial(&sc, false, true, L, L, D, scale, q[qb:], qs, k[kb:], ks, 0, p, L)
				var msk []float32
				if s.KeyMask != nil {
					msk = s.KeyMask[n*T : n*T+L]
				}
				for i := 0; i < L; i++ {
					seen := L
					if s.Causal {
						seen = i + 1
					}
					softmaxMasked(p[i*L:i*L+L], seen, msk)
				}
				tensor.GemmSerial(&sc, false, false, L, D, L, 1, p, L, v[kb:], ks, 0, out[qb:], qs)
				for t := L; t < T; t++ {
					clear(out[n*T*qs+t*qs+h*D : n*T*qs+t*qs+h*D+D])
				}
			}
		}
	})
}

// Backward adds to dq, dk and dv the gradient given dout, from Forward's
// att and inputs. Tasks are (sequence, key/value head), so a group's
// query heads add into their shared dk, dv rows in a fixed order.
func (s Attention) Backward(dq, dk, dv, dout, att, q, k, v []float32, lens []int, th int) {
	N, T, H, KV, D := s.N, s.T, s.H, s.KV, s.D
	rep := H / KV
	qs, ks := H*D, KV*D
	scale := float32(1 / math.Sqrt(float64(D)))
	ParallelFor(N*KV, th, func(lo, hi int) {
		dp := make([]float32, T*T)
		var sc tensor.Scratch
		for task := lo; task < hi; task++ {
			n, g := task/KV, task%KV
			L := lens[n]
			kb := n*T*ks + g*D
			for h := g * rep; h < (g+1)*rep; h++ {
				qb := n*T*qs + h*D
				p := att[(n*H+h)*T*T : (n*H+h)*T*T+L*L]
				d := dp[:L*L]
				// dP = dout·Vᵀ; dV += Pᵀ·dout
				tensor.GemmSerial(&sc, false, true, L, L, D, 1, dout[qb:], qs, v[kb:], ks, 0, d, L)
				tensor.GemmSerial(&sc, true, false, L, D, L, 1, p, L, dout[qb:], qs, 1, dv[kb:], ks)
				// softmax: masked entries have P = 0.
				for i := 0; i < L; i++ {
					SoftmaxBackward(p[i*L:i*L+L], d[i*L:i*L+L])
				}
				// S = scale·Q·Kᵀ: dQ += scale·dS·K; dK += scale·dSᵀ·Q
				tensor.GemmSerial(&sc, false, false, L, D, L, scale, d, L, k[kb:], ks, 1, dq[qb:], qs)
				tensor.GemmSerial(&sc, true, false, L, D, L, scale, d, L, q[qb:], qs, 1, dk[kb:], ks)
			}
		}
	})
}

// SoftmaxPrefix turns row[:seen] into its softmax, in place, and zeroes
// row[seen:] (the masked keys: probability exactly 0).
func SoftmaxPrefix(row []float32, seen int) { softmaxMasked(row, seen, nil) }

// SoftmaxBackward turns d, ∂loss/∂ a softmax's output p, into ∂loss/∂ its
// input, in place: d ← p ⊙ (d − Σ_j p_j·d_j).
func SoftmaxBackward(p, d []float32) {
	var dot float32
	for j := range p {
		dot += p[j] * d[j]
	}
	for j := range p {
		d[j] = p[j] * (d[j] - dot)
	}
}

// softmaxMasked is SoftmaxPrefix that also gives probability exactly 0 to
// the keys j < seen whose msk[j] is 0 (msk nil: none).
func softmaxMasked(row []float32, seen int, msk []float32) {
	mx := float32(math.Inf(-1))
	for j, x := range row[:seen] {
		if msk == nil || msk[j] != 0 {
			mx = max(mx, x)
		}
	}
	if msk == nil {
		inv := 1 / expSubSum(row[:seen], mx)
		for j := range row[:seen] {
			row[j] *= inv
		}
		clear(row[seen:])
		return
	}
	// The vector path exponentiates masked keys too; they are zeroed
	// below, and the sum adds the others in index order as the scalar
	// loop does.
	done := expSubVec(row[:seen], mx)
	var sum float32
	for j := range row[:seen] {
		if msk[j] == 0 {
			row[j] = 0
			continue
		}
		if j >= done {
			row[j] = Exp32(row[j] - mx)
		}
		sum += row[j]
	}
	inv := 1 / sum
	for j := range row[:seen] {
		row[j] *= inv
	}
	clear(row[seen:])
}
