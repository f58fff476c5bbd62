package tensor

import "runtime"

// Rows is a row-major matrix kept in a compact stored form — a frozen
// weight left in the precision it was loaded in (float16, bfloat16, a GGUF
// block type) — whose rows the GEMM widens to float32 while it packs them,
// so the product costs no float32 copy of the matrix. A product with Rows
// is bit for bit the product with the widened matrix: the packed panels
// are the same.
type Rows interface {
	// Read writes the row's elements [j, j+len(dst)) of row i into dst.
	// Read is called from several goroutines at once.
	Read(dst []float32, i, j int)
}

// bmat is Gemm's B operand: dense float32 (f, row stride ld) or compact.
type bmat struct {
	f  []float32
	ld int
	r  Rows
}

// GemmRows computes C = alpha·A·op(W) + beta·C for a compact W: op(W) is
// Wᵀ (W n×k) when transB, else W (k×n). A is m×k with row stride lda, C
// m×n with row stride ldc. threads ≤ 0 means GOMAXPROCS.
func GemmRows(transB bool, m, n, k int, alpha float32, a []float32, lda int, w Rows, beta float32, c []float32, ldc int, threads int) {
	if !scaleC(m, n, k, alpha, beta, c, ldc) {
		return
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	gemm(false, transB, m, n, k, alpha, a, lda, bmat{r: w}, c, ldc, threads)
}
