package cuda

import (
	"errors"
	"fmt"
	"math"
)

// cuBLAS enum values (cublas_api.h, library_types.h).
const (
	opN = 0
	opT = 1

	dtF32  = 0  // CUDA_R_32F
	dtBF16 = 14 // CUDA_R_16BF

	compute32F     = 68 // CUBLAS_COMPUTE_32F
	compute32FTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major float32
// matrices with the same meaning of every argument as internal/tensor.Gemm:
// op(A) is m×k, op(B) is k×n, C is m×n, and lda, ldb, ldc are the row
// strides of the stored (untransposed) arrays. It runs in d.Math.
func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a *Buffer, lda int, b *Buffer, ldb int, beta float32, c *Buffer, ldc int) error {
	return d.gemm(dtF32, transA, transB, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1)
}

// GemmBatched is batch independent Gemms; matrix i of A starts sa elements
// after matrix i−1 (likewise sb, sc). The attention products use it over
// the N·H (sequence, head) pairs.
func (d *Device) GemmBatched(transA, transB bool, m, n, k int, alpha float32, a *Buffer, lda, sa int, b *Buffer, ldb, sb int, beta float32, c *Buffer, ldc, sc int, batch int) error {
	return d.gemm(dtF32, transA, transB, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch)
}

// GemmBF16 is Gemm with A and B in bfloat16 (see CastToBF16) and C in
// float32, accumulating in float32: the mixed-precision path.
func (d *Device) GemmBF16(transA, transB bool, m, n, k int, alpha float32, a *Buffer, lda int, b *Buffer, ldb int, beta float32, c *Buffer, ldc int) error {
	return d.gemm(dtBF16, transA, transB, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1)
}

// gemm checks sizes and runs one (batch ≤ 1) or a strided batch of
// products through cublasGemmEx / cublasGemmStridedBatchedEx.
func (d *Device) gemm(abType int, transA, transB bool, m, n, k int, alpha float32, a *Buffer, lda, sa int, b *Buffer, ldb, sb int, beta float32, c *Buffer, ldc, sc int, batch int) error {
	if err := d.usable(); err != nil {
		return err
	}
	if err := dims("gemm", "m", m, "n", n, "k", k, "batch", batch, "lda", lda, "ldb", ldb, "ldc", ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	esz := 4
	if abType == dtBF16 {
		esz = 2
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := errors.Join(
		matrixFits("gemm", "A", a, ar, ac, lda, sa, batch, esz),
		matrixFits("gemm", "B", b, br, bc, ldb, sb, batch, esz),
		matrixFits("gemm", "C", c, m, n, ldc, sc, batch, 4),
	); err != nil {
		return err
	}
	compute := compute32F
	if abType == dtF32 && d.Math == MathTF32 {
		compute = compute32FTF32
	}
	g := gemmPlan(transA, transB, m, n, k, alpha, a.ptr, lda, sa, b.ptr, ldb, sb, beta, c.ptr, ldc, sc, batch)
	g.aType, g.bType, g.cType, g.compute = abType, abType, dtF32, compute
	if err := d.be.gemm(g); err != nil {
		return err
	}
	if d.debug {
		return d.be.sync()
	}
	return nil
}

// gemmPlan maps a row-major product onto cuBLAS's column-major arguments:
// a row-major X with row stride ld is the column-major Xᵀ with leading
// dimension ld, so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ:
// cuBLAS's (m, n) are (n, m) and B goes first.
func gemmPlan(transA, transB bool, m, n, k int, alpha float32, a uint64, lda, sa int, b uint64, ldb, sb int, beta float32, c uint64, ldc, sc, batch int) *gemmArgs {
	return &gemmArgs{
		opA: op(transB), opB: op(transA), m: n, n: m, k: k,
		alpha: alpha, beta: beta,
		a: b, lda: ldb, sa: int64(sb),
		b: a, ldb: lda, sb: int64(sa),
		c: c, ldc: ldc, sc: int64(sc),
		batch: batch,
	}
}

func op(trans bool) int {
	if trans {
		return opT
	}
	return opN
}

// matrixFits checks that buf holds batch row-major rows×cols matrices with
// row stride ld, stride elements apart, of esz-byte elements.
func matrixFits(opName, what string, buf *Buffer, rows, cols, ld, stride, batch, esz int) error {
	if buf == nil {
		return fmt.Errorf("cuda: %s: %s is nil", opName, what)
	}
	if ld < cols {
		return fmt.Errorf("cuda: %s: %s has row stride %d < %d columns", opName, what, ld, cols)
	}
	if batch > 1 && stride < 0 {
		return fmt.Errorf("cuda: %s: %s has negative batch stride %d", opName, what, stride)
	}
	need := int64(rows-1)*int64(ld) + int64(cols) + int64(batch-1)*int64(stride)
	if have := int64(buf.size / esz); need > have {
		return fmt.Errorf("cuda: %s: %s needs %d elements, its buffer holds %d", opName, what, need, have)
	}
	return nil
}

// dims checks named sizes: each must be in [0, 2³¹) (kernels and cuBLAS
// take 32-bit sizes).
func dims(opName string, kv ...any) error {
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1].(int)
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("cuda: %s: %s = %d out of range", opName, kv[i], v)
		}
	}
	return nil
}
