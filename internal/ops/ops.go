// Package ops holds the transformer ops anna trains and runs on the CPU,
// llm.c style: each op is one plain float32 forward and one hand-written
// backward over row-major arrays, in a file of its own named as its CUDA
// twin in internal/train/cuda — embedding (BERT's sum of tables, a decoder's rows
// gather), layernorm, rmsnorm (also per head, Qwen3's q/k norm), rope
// (Hugging Face's rotate_half layout), attention (multi-head or
// grouped-query, causal or bidirectional, right padding given as lengths
// per sequence, a key mask with holes), activation (GELU exact and tanh,
// ReLU, tanh), swiglu, pooling (mean over a mask, first, last token),
// linear layers with optional biases and LoRA factors, and a language-model
// head's cross-entropy; the matrix products through internal/tensor's GEMM.
// The trainer's models (internal/train/bert, internal/train/decoder) use forward and
// backward; inference (model/llama's generation) the forwards.
//
// Invariants: every forward writes (overwrites) its outputs; every backward
// adds (accumulates) into its input gradients and into the gradients of the
// parameters it is given, and a nil gradient slice (a frozen parameter) is
// skipped — but for the softmax helpers (SoftmaxPrefix, SoftmaxBackward),
// which work in place, as documented. A frozen weight may be kept compact
// (Param.Base, W nil): the ops that read it widen it while packing, so
// results are bit for bit those with the float32 weight. Work is split
// over rows in contiguous chunks, one goroutine per chunk, and every
// reduction runs in a fixed order (table scatters on one goroutine), so
// results do not depend on the number of goroutines, nor on the CPU: the
// softmax's exponentials run eight at a time in AVX2 assembly where there
// is AVX2 (exp_amd64.s), with Exp32's operations in its order and no FMA,
// so they are Exp32's values bit for bit. Sizes are the
// caller's contract: the ops do not check slice lengths beyond what
// indexing does, so a short slice panics with an index out of range (a
// programming error, not bad input); a pooling mode PoolForward does not
// know is an error.
//
// Apart from those, infer.go holds inference-only helpers for model/bert's
// forward (SoftmaxScaled, ExpScaled, GELUInPlace, AddLayerNorm): AVX2 with
// FMA where there is AVX2 (infer_amd64.s; ExpScaled's rows in AVX-512
// where there is AVX-512, softmax_avx512_amd64.s, the same values), the
// same formulas in Go elsewhere. They are in place, single-goroutine, and agree with the
// training ops to float32 rounding but, unlike them, not bit for bit
// across CPUs; the training ops do not use them. PackedAttention
// (infer_attention.go), model/bert's and model/llama's inference attention
// over sequences laid back to back, is built on them (and on an AVX-512
// transposition of each head's keys, transpose_amd64.s).
package ops

import (
	"sync"

	"github.com/anna-search/anna/internal/tensor"
)

// Param is one trainable tensor, its gradient and optimizer flags.
type Param struct {
	Name  string // the checkpoint's (Hugging Face) name
	Shape []int
	W, G  []float32
	// Frozen params get no gradient and are not updated (LoRA base weights,
	// the unused pooler of a bi-encoder).
	Frozen bool
	// NoDecay params (biases, norms) are excluded from weight decay, as in
	// the Hugging Face trainers.
	NoDecay bool
	// Base, when W is nil, is a frozen 2-D weight (Shape rows×cols) kept
	// in the compact form it was loaded in (float16, bfloat16, GGUF
	// blocks): Linear widens it while its GEMM packs it, bit for bit the
	// products with the widened weight. Such a Param is Frozen.
	Base tensor.Rows
}

// Floats returns p's values as float32: W, or Base widened into a new
// slice.
func (p *Param) Floats() []float32 {
	if p.W != nil || p.Base == nil {
		return p.W
	}
	rows, cols := p.Shape[0], p.Shape[1]
	w := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		p.Base.Read(w[i*cols:(i+1)*cols], i, 0)
	}
	return w
}

// Grad is p's gradient, or nil when p is nil or frozen (ops skip it).
func (p *Param) Grad() []float32 {
	if p == nil || p.Frozen {
		return nil
	}
	return p.G
}

// ParallelFor runs f over [0,n) split into contiguous chunks, one goroutine
// per chunk. Each index is handled by exactly one call, so per-row results
// do not depend on the number of goroutines.
func ParallelFor(n, threads int, f func(lo, hi int)) {
	if threads > n {
		threads = n
	}
	if threads <= 1 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + threads - 1) / threads
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// Grow returns b resliced to n floats when its capacity holds them, else a
// new slice of n zeros: a workspace reused from call to call (its old
// values are not cleared).
func Grow(b []float32, n int) []float32 {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]float32, n)
}

// elementwise runs f over [0,n) in chunks of 4096.
func elementwise(n, th int, f func(lo, hi int)) {
	const chunk = 4096
	ParallelFor((n+chunk-1)/chunk, th, func(lo, hi int) {
		f(lo*chunk, min(hi*chunk, n))
	})
}

// AddInPlace adds src to dst elementwise.
func AddInPlace(dst, src []float32, th int) {
	elementwise(len(dst), th, func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		for i, v := range s {
			d[i] += v
		}
	})
}
