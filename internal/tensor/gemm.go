// Package tensor holds the float32 kernels the trainer is built on: a packed,
// blocked, multi-goroutine GEMM (whose B may also be a compact matrix, Rows:
// a frozen weight in float16, bfloat16 or GGUF blocks, widened while it is
// packed) and a few row-wise helpers. Beside it, apart, an inference GEMM
// (infer.go: Weight, packed once at load, and MatMulNN) for model/bert's
// forward, with its own micro-kernels (AVX-512 12×32, AVX2 6×16), fused
// bias and per-block epilogue; Gemm's arithmetic is unchanged by it. And
// an int8 inference GEMM (infer_int8.go: Int8Weight) for int8 graphs,
// uint8 activations times int8 weights summed exactly in int32 (AVX-512
// VNNI 8×32, AVX2 4×16, Go), then scaled to float32: every kernel gives
// the same bits.
//
// Every output element is reduced in the same order whatever the number of
// goroutines, so results are bit-for-bit reproducible across thread counts —
// the trainer's checkpoints resume exactly because of this. The inference
// GEMM keeps that property too (its own order, not Gemm's).
package tensor

import (
	"runtime"
	"sync"
)

// Register tile of the micro-kernel and cache blocks. mr×nr accumulators stay
// in registers; a kc×nr panel of B stays in L1, a kc×nc block of B in L2.
const (
	mr = 6
	nr = 16
	kc = 256
	nc = 512
	mc = 96
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(X) is X or Xᵀ. op(A) is m×k, op(B) is k×n, C is m×n. lda, ldb and ldc are
// the row strides of the stored (untransposed) arrays. threads ≤ 0 means
// GOMAXPROCS.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, threads int) {
	if !scaleC(m, n, k, alpha, beta, c, ldc) {
		return
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	gemm(transA, transB, m, n, k, alpha, a, lda, bmat{f: b, ld: ldb}, c, ldc, threads)
}

// gemm is Gemm after beta·C, with B dense or compact.
func gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b bmat, c []float32, ldc int, threads int) {
	nBlocks := (n + nc - 1) / nc
	mBlocks := (m + mc - 1) / mc
	if threads <= 1 || 2*m*n*k < 1<<20 {
		s := scratches.Get().(*Scratch)
		s.run(0, m, transA, transB, m, n, k, alpha, a, lda, b, c, ldc, nBlocks)
		scratches.Put(s)
		return
	}
	// Work is split into tasks of (a group of row blocks, one column block)
	// of C. Each task walks the whole k range in order, packing each k×nc
	// slice of B once for all its row blocks. Group boundaries are multiples
	// of mc, so every element is reduced in the same order whatever the
	// number of goroutines.
	per := 4 // tasks per goroutine: enough to balance the load
	if b.r != nil {
		per = 2 // each group widens its B again: fewer groups
	}
	groups := min(mBlocks, max(1, (threads*per+nBlocks-1)/nBlocks))
	rowsPer := (mBlocks + groups - 1) / groups * mc
	tasks := ((m + rowsPer - 1) / rowsPer) * nBlocks
	runTasks(threads, tasks, func(s *Scratch, t int) {
		i0 := (t / nBlocks) * rowsPer
		s.block(i0, min(m, i0+rowsPer), t%nBlocks, transA, transB, m, n, k, alpha, a, lda, b, c, ldc)
	})
}

// scratches keeps packing buffers between products. A Scratch carries
// nothing from one product to the next (every packed value is written
// before it is read), so which one a goroutine gets changes no result;
// without it each product allocated its buffers anew, gigabytes of garbage
// per decoder training step, which set the process's peak memory.
var scratches = sync.Pool{New: func() any { return new(Scratch) }}

// runTasks runs tasks 0..tasks−1 on up to threads goroutines, each with
// its own Scratch, taking the next task as it finishes one.
func runTasks(threads, tasks int, do func(s *Scratch, t int)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for g := 0; g < min(threads, tasks); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := scratches.Get().(*Scratch)
			defer scratches.Put(s)
			for {
				mu.Lock()
				t := next
				next++
				mu.Unlock()
				if t >= tasks {
					return
				}
				do(s, t)
			}
		}()
	}
	wg.Wait()
}

// scaleC does the beta·C part of C = alpha·op(A)·op(B) + beta·C (beta 0
// clears C, so NaNs in it do not survive) and reports whether a product is
// left to add.
func scaleC(m, n, k int, alpha, beta float32, c []float32, ldc int) bool {
	if m == 0 || n == 0 {
		return false
	}
	if beta != 1 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
			} else {
				for j := range row {
					row[j] *= beta
				}
			}
		}
	}
	return k != 0 && alpha != 0
}

// GemmSerial is Gemm on the calling goroutine, packing into s, which the
// caller reuses across calls (the many small per-head attention products).
func GemmSerial(s *Scratch, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !scaleC(m, n, k, alpha, beta, c, ldc) {
		return
	}
	s.run(0, m, transA, transB, m, n, k, alpha, a, lda, bmat{f: b, ld: ldb}, c, ldc, (n+nc-1)/nc)
}

// Scratch is one goroutine's packing buffers.
type Scratch struct {
	pa []float32 // packed A: mc/mr panels of kc×mr
	pb []float32 // packed B: nc/nr panels of kc×nr
	ct [mr * nr]float32
	wr []float32 // one widened run of a compact B
}

func (s *Scratch) run(i0, i1 int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b bmat, c []float32, ldc int, nBlocks int) {
	for jb := 0; jb < nBlocks; jb++ {
		s.block(i0, i1, jb, transA, transB, m, n, k, alpha, a, lda, b, c, ldc)
	}
}

// block computes C rows [i0,i1) × column block jb over all of k.
func (s *Scratch) block(i0, i1, jb int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b bmat, c []float32, ldc int) {
	j0 := jb * nc
	nn := min(nc, n-j0)
	rn := (nn + nr - 1) / nr * nr
	rm := (min(mc, i1-i0) + mr - 1) / mr * mr
	kmax := min(kc, k)
	if len(s.pb) < rn*kmax {
		s.pb = make([]float32, rn*kmax)
	}
	if len(s.pa) < rm*kmax {
		s.pa = make([]float32, rm*kmax)
	}
	for p0 := 0; p0 < k; p0 += kc {
		kk := min(kc, k-p0)
		s.packB(s.pb, transB, b, p0, kk, j0, nn)
		s.panels(i0, i1, transA, a, lda, p0, kk, s.pb, j0, nn, alpha, c, ldc)
	}
}

// panels adds alpha·op(A)[i0:i1, p0:p0+kk]·(packed B, kk × nn from column
// j0) to C, row block by row block.
func (s *Scratch) panels(i0, i1 int, transA bool, a []float32, lda, p0, kk int, pb []float32, j0, nn int, alpha float32, c []float32, ldc int) {
	for ib := i0; ib < i1; ib += mc {
		mm := min(mc, i1-ib)
		packA(s.pa, transA, a, lda, ib, mm, p0, kk)
		for jr := 0; jr < nn; jr += nr {
			bp := pb[(jr/nr)*kk*nr : (jr/nr+1)*kk*nr]
			for ir := 0; ir < mm; ir += mr {
				ap := s.pa[(ir/mr)*kk*mr : (ir/mr+1)*kk*mr]
				rows, cols := min(mr, mm-ir), min(nr, nn-jr)
				if rows == mr && cols == nr {
					kernel(kk, ap, bp, c[(ib+ir)*ldc+j0+jr:], ldc, alpha)
					continue
				}
				clear(s.ct[:])
				kernel(kk, ap, bp, s.ct[:], nr, alpha)
				for i := 0; i < rows; i++ {
					crow := c[(ib+ir+i)*ldc+j0+jr:]
					for j := 0; j < cols; j++ {
						crow[j] += s.ct[i*nr+j]
					}
				}
			}
		}
	}
}

// packA copies op(A)[i0:i0+mm, p0:p0+kk] into panels of mr rows, each stored
// k-major (mr values per k), zero-padding the last panel.
func packA(dst []float32, trans bool, a []float32, lda, i0, mm, p0, kk int) {
	for ir := 0; ir < mm; ir += mr {
		panel := dst[(ir/mr)*kk*mr : (ir/mr+1)*kk*mr]
		rows := min(mr, mm-ir)
		if !trans {
			for i := 0; i < mr; i++ {
				if i >= rows {
					for p := 0; p < kk; p++ {
						panel[p*mr+i] = 0
					}
					continue
				}
				src := a[(i0+ir+i)*lda+p0 : (i0+ir+i)*lda+p0+kk]
				for p, v := range src {
					panel[p*mr+i] = v
				}
			}
			continue
		}
		for p := 0; p < kk; p++ {
			src := a[(p0+p)*lda+i0+ir:]
			d := panel[p*mr : p*mr+mr]
			for i := 0; i < mr; i++ {
				if i < rows {
					d[i] = src[i]
				} else {
					d[i] = 0
				}
			}
		}
	}
}

// packB is packDense, or for a compact B the same panels from its rows
// widened one run at a time.
func (s *Scratch) packB(dst []float32, trans bool, b bmat, p0, kk, j0, nn int) {
	if b.r == nil {
		packDense(dst, trans, b.f, b.ld, p0, kk, j0, nn)
		return
	}
	if len(s.wr) < max(kc, nc) {
		s.wr = make([]float32, max(kc, nc))
	}
	if trans { // op(B) = Wᵀ: panel column j is W's row j0+jr+j over k
		run := s.wr[:kk]
		for jr := 0; jr < nn; jr += nr {
			panel := dst[(jr/nr)*kk*nr : (jr/nr+1)*kk*nr]
			for j := 0; j < nr; j++ {
				if jr+j >= nn {
					for p := 0; p < kk; p++ {
						panel[p*nr+j] = 0
					}
					continue
				}
				b.r.Read(run, j0+jr+j, p0)
				for p, v := range run {
					panel[p*nr+j] = v
				}
			}
		}
		return
	}
	run := s.wr[:nn] // op(B) = W: row p0+p over the block's columns
	for p := 0; p < kk; p++ {
		b.r.Read(run, p0+p, j0)
		for jr := 0; jr < nn; jr += nr {
			d := dst[(jr/nr)*kk*nr+p*nr : (jr/nr)*kk*nr+p*nr+nr]
			cols := copy(d, run[jr:min(nn, jr+nr)])
			clear(d[cols:])
		}
	}
}

// packDense copies op(B)[p0:p0+kk, j0:j0+nn] into panels of nr columns,
// each stored k-major (nr values per k), zero-padding the last panel.
func packDense(dst []float32, trans bool, b []float32, ldb, p0, kk, j0, nn int) {
	for jr := 0; jr < nn; jr += nr {
		panel := dst[(jr/nr)*kk*nr : (jr/nr+1)*kk*nr]
		cols := min(nr, nn-jr)
		if !trans {
			for p := 0; p < kk; p++ {
				src := b[(p0+p)*ldb+j0+jr:]
				d := panel[p*nr : p*nr+nr]
				if cols == nr {
					copy(d, src[:nr])
					continue
				}
				for j := 0; j < nr; j++ {
					if j < cols {
						d[j] = src[j]
					} else {
						d[j] = 0
					}
				}
			}
			continue
		}
		for j := 0; j < nr; j++ {
			if j >= cols {
				for p := 0; p < kk; p++ {
					panel[p*nr+j] = 0
				}
				continue
			}
			src := b[(j0+jr+j)*ldb+p0 : (j0+jr+j)*ldb+p0+kk]
			for p, v := range src {
				panel[p*nr+j] = v
			}
		}
	}
}

// kernelGo is the portable micro-kernel: C[0:mr,0:nr] += alpha·Σ_p a[p]⊗b[p],
// with a packed mr per k and b packed nr per k.
func kernelGo(kk int, a, b []float32, c []float32, ldc int, alpha float32) {
	var acc [mr * nr]float32
	a = a[:kk*mr]
	b = b[:kk*nr]
	for p := 0; p < kk; p++ {
		ap := a[p*mr : p*mr+mr : p*mr+mr]
		bp := b[p*nr : p*nr+nr : p*nr+nr]
		for i, av := range ap {
			row := acc[i*nr : i*nr+nr : i*nr+nr]
			for j, bv := range bp {
				row[j] += av * bv
			}
		}
	}
	for i := 0; i < mr; i++ {
		crow := c[i*ldc : i*ldc+nr : i*ldc+nr]
		for j := range crow {
			crow[j] += alpha * acc[i*nr+j]
		}
	}
}

// PackedB is op(B) = Wᵀ of a row-major n×k matrix W (a weight: out × in),
// packed once in the layout Gemm packs B into (column blocks of nc, k
// blocks of kc, panels of nr), for products that reuse it unchanged: a
// frozen weight times a few rows, at every step of generation, where
// packing it anew each time costs more than the product.
type PackedB struct {
	N, K   int
	blocks [][][]float32 // [column block][k block], each rn×kk
}

// PackBT packs Wᵀ (w is n×k with row stride ldw).
func PackBT(w []float32, n, k, ldw int) *PackedB {
	return packBT(bmat{f: w, ld: ldw}, n, k)
}

// PackBTRows is PackBT for a compact n×k W, bit for bit PackBT of W
// widened.
func PackBTRows(w Rows, n, k int) *PackedB { return packBT(bmat{r: w}, n, k) }

func packBT(w bmat, n, k int) *PackedB {
	var s Scratch
	p := &PackedB{N: n, K: k}
	for j0 := 0; j0 < n; j0 += nc {
		nn := min(nc, n-j0)
		rn := (nn + nr - 1) / nr * nr
		var kb [][]float32
		for p0 := 0; p0 < k; p0 += kc {
			kk := min(kc, k-p0)
			d := make([]float32, rn*kk)
			s.packB(d, true, w, p0, kk, j0, nn)
			kb = append(kb, d)
		}
		p.blocks = append(p.blocks, kb)
	}
	return p
}

// GemmPacked computes C = alpha·A·Wᵀ + beta·C with Wᵀ packed by PackBT: A
// is m×k (row stride lda), C m×n. Each element is reduced exactly as
// Gemm(false, true, …) reduces it, so the results are Gemm's bit for bit.
func GemmPacked(m int, alpha float32, a []float32, lda int, b *PackedB, beta float32, c []float32, ldc int, threads int) {
	n, k := b.N, b.K
	if !scaleC(m, n, k, alpha, beta, c, ldc) {
		return
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	nBlocks := len(b.blocks)
	mBlocks := (m + mc - 1) / mc
	runTasks(threads, mBlocks*nBlocks, func(s *Scratch, t int) {
		i0 := (t / nBlocks) * mc
		s.blockPacked(i0, min(m, i0+mc), t%nBlocks, m, k, alpha, a, lda, b, c, ldc)
	})
}

// blockPacked is block with column block jb of B already packed.
func (s *Scratch) blockPacked(i0, i1, jb, m, k int, alpha float32, a []float32, lda int, b *PackedB, c []float32, ldc int) {
	j0 := jb * nc
	nn := min(nc, b.N-j0)
	rm := (min(mc, i1-i0) + mr - 1) / mr * mr
	if kmax := min(kc, k); len(s.pa) < rm*kmax {
		s.pa = make([]float32, rm*kmax)
	}
	for p0 := 0; p0 < k; p0 += kc {
		kk := min(kc, k-p0)
		s.panels(i0, i1, false, a, lda, p0, kk, b.blocks[jb][p0/kc], j0, nn, alpha, c, ldc)
	}
}
