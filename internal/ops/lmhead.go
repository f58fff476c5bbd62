package ops

import (
	"math"

	"github.com/anna-search/anna/internal/tensor"
)

// lmChunk is how many rows' logits LMHeadCrossEntropy holds at once
// (rows × vocabulary floats): 64 × 49,152 × 4 B = 12 MB for SmolLM2.
const lmChunk = 64

// LMHeadCrossEntropy is a language-model head and its token-level
// cross-entropy, forward and backward in one pass: logits = h·Wᵀ (h rows×C,
// W V×C — a tied input embedding or an lm_head, as nn.Linear without bias)
// and the loss is the mean over the rows whose target is ≥ 0 of
// −log softmax(logits)[target] (PyTorch's cross_entropy with
// ignore_index < 0, reduction "mean"). Rows with a negative target take no
// part. It returns the loss and how many rows counted, and adds scale × the
// gradient of the loss to dh (rows×C) and, when not nil, to dW (V×C).
// Logits are never held for more than lmChunk rows, so a 49k vocabulary
// costs megabytes, not the batch's rows × V.
func LMHeadCrossEntropy(dh, dW []float32, h, W []float32, targets []int32, rows, C, V int, scale float32, th int) (loss float64, count int) {
	for _, t := range targets[:rows] {
		if t >= 0 {
			count++
		}
	}
	if count == 0 {
		return 0, 0
	}
	// Gather the counted rows so the GEMMs run on them only.
	idx := make([]int, 0, count)
	for r, t := range targets[:rows] {
		if t >= 0 {
			idx = append(idx, r)
		}
	}
	hs := make([]float32, lmChunk*C)
	dhs := make([]float32, lmChunk*C)
	logits := make([]float32, lmChunk*V)
	losses := make([]float64, lmChunk)
	inv := 1 / float64(count)
	for lo := 0; lo < count; lo += lmChunk {
		n := min(lmChunk, count-lo)
		for i := 0; i < n; i++ {
			r := idx[lo+i]
			copy(hs[i*C:i*C+C], h[r*C:r*C+C])
		}
		tensor.Gemm(false, true, n, V, C, 1, hs, C, W, C, 0, logits, V, th)
		// Softmax per row, turned into ∂loss/∂logits = (p − onehot)/count·scale.
		ParallelFor(n, th, func(a, b int) {
			for i := a; i < b; i++ {
				row := logits[i*V : i*V+V]
				t := int(targets[idx[lo+i]])
				tl := row[t]
				mx := row[0]
				for _, v := range row {
					mx = max(mx, v)
				}
				var sum float64
				for j, v := range row {
					e := math.Exp(float64(v - mx))
					row[j] = float32(e)
					sum += e
				}
				losses[i] = math.Log(sum) - float64(tl-mx)
				k := float32(inv / sum * float64(scale))
				for j := range row {
					row[j] *= k
				}
				row[t] -= float32(inv * float64(scale))
			}
		})
		for i := 0; i < n; i++ {
			loss += losses[i]
		}
		clear(dhs[:n*C])
		tensor.Gemm(false, false, n, C, V, 1, logits, V, W, C, 0, dhs, C, th)
		for i := 0; i < n; i++ {
			r := idx[lo+i]
			d := dh[r*C : r*C+C]
			for c, v := range dhs[i*C : i*C+C] {
				d[c] += v
			}
		}
		if dW != nil {
			tensor.Gemm(true, false, V, C, n, 1, logits, V, hs, C, 1, dW, C, th)
		}
	}
	return loss * inv, count
}
