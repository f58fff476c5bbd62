package tensor

import (
	"context"
	"runtime"
	"sync"

	"github.com/anna-search/anna/internal/parallel"
)

// The inference GEMM: products for a forward pass only (internal/model/bert), apart
// from Gemm, whose reduction order the trainer's checkpoints depend on and
// which it leaves alone. A weight is packed once, when the model is loaded
// (Weight), into panels of the micro-kernel's width; the activations (A)
// are read in place, row by row, without packing; the bias is added and
// the output stored by the micro-kernel itself. The micro-kernel is the
// widest this CPU runs: 12×32 in AVX-512, 6×16 in AVX2 with FMA, else a
// portable 4×16 in Go.
//
// Every element of C is A's row times B's column summed in k order, one
// fused multiply-add per k on amd64 (both assembly kernels: the same
// bits), in blocks of k whose boundaries depend on k alone, then plus the
// bias, then, for the second block of k on, plus C: so results do not
// depend on the number of goroutines, nor on where a row falls in a tile.
// They are not Gemm's bit for bit (Gemm scales by alpha and blocks k
// differently); they agree with it to float32 rounding.

// ikernel is one inference micro-kernel: an mr×nr tile.
type ikernel struct {
	name   string
	mr, nr int
	asm    func(kk int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int)
}

// goKernel is the portable kernel, in Go (whose compiler fuses the
// multiply-adds on some CPUs and not on others).
var goKernel = &ikernel{name: "go", mr: 4, nr: 16}

// inferKernel is the kernel this process runs: the first of inferKernels.
var inferKernel = inferKernels()[0]

// ikc is the largest block of k and imc the rows of A and C done per pass
// over B's panels. A kc×nr panel of B (48 KiB for AVX-512's 32 columns)
// streams from L2, prefetched, past the row tiles of mc×kc of A (in L2);
// a k of 384 (MiniLM's hidden size) in one block writes C once. On a
// Xeon with AVX-512 (2 MiB of L2 per core) 384 and 288 ran MiniLM's
// products at 150–170 GFLOP/s per core, 256 and 144 at 140–150, a kernel
// in L1 at 185 and bare FMAs at 205.
const (
	ikc = 384
	imc = 288
)

// kBlock is the block of k used for a product over k: k split into equal
// blocks of at most ikc.
func kBlock(k int) int {
	nb := (k + ikc - 1) / ikc
	return (k + nb - 1) / nb
}

// run computes the tile C[0:mr, 0:nr] at c (stride ldc).
func (kn *ikernel) run(kk int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, bias []float32, acc bool) {
	mr, nr := kn.mr, kn.nr
	// Bounds are checked here once; the kernels trust them.
	_ = a[(mr-1)*lda+kk-1]
	_ = b[(kk-1)*ldb+nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	var bp *float32
	if bias != nil {
		_ = bias[nr-1]
		bp = &bias[0]
	}
	if kn.asm != nil {
		flags := 0
		if acc {
			flags = 1
		}
		kn.asm(kk, &a[0], lda, &b[0], ldb, &c[0], ldc, bp, flags)
		return
	}
	var t [4 * 16]float32
	for p := 0; p < kk; p++ {
		brow := b[p*ldb : p*ldb+16 : p*ldb+16]
		for i := 0; i < 4; i++ {
			av := a[i*lda+p]
			row := t[i*16 : i*16+16 : i*16+16]
			for j, bv := range brow {
				row[j] += av * bv
			}
		}
	}
	for i := 0; i < 4; i++ {
		crow := c[i*ldc : i*ldc+16 : i*ldc+16]
		for j := range crow {
			v := t[i*16+j]
			if bias != nil {
				v += bias[j]
			}
			if acc {
				v = crow[j] + v
			}
			crow[j] = v
		}
	}
}

// InferScratch is one goroutine's buffers for the inference products.
type InferScratch struct {
	a, c, b, bias []float32
}

func (s *InferScratch) grow(kn *ikernel, kk int) {
	if n := kn.mr * kk; len(s.a) < n {
		s.a = make([]float32, n)
	}
	if n := kk * kn.nr; len(s.b) < n {
		s.b = make([]float32, n)
	}
	if n := kn.mr * kn.nr; len(s.c) < n {
		s.c = make([]float32, n)
	}
	if len(s.bias) < kn.nr {
		s.bias = make([]float32, kn.nr)
	}
}

// lastRows is the last rows (fewer than mr) of a tile of A, kk values
// each at a (stride lda), copied into the scratch with zero rows after
// them to mr, so that a kernel reads no row past them.
func (s *InferScratch) lastRows(mr, kk int, a []float32, lda, rows int) []float32 {
	ap := s.a[:mr*kk]
	for r := 0; r < mr; r++ {
		if r < rows {
			copy(ap[r*kk:r*kk+kk], a[r*lda:])
		} else {
			clear(ap[r*kk : r*kk+kk])
		}
	}
	return ap
}

// panel adds op A[r0:r1, p0:p0+kk]·(a panel of B: kk rows of cols ≤ nr
// columns at b, stride ldb, readable for nr columns) to C[r0:r1, j0:j0+cols]
// (overwriting it, plus bias[j0:], when !acc).
func (s *InferScratch) panel(kn *ikernel, r0, r1, p0, kk int, a []float32, lda int, b []float32, ldb int, c []float32, ldc, j0, cols int, bias []float32, acc bool) {
	mr, nr := kn.mr, kn.nr
	var bb []float32
	if bias != nil {
		bb = bias[j0:]
		if cols < nr {
			bb = s.bias[:nr]
			clear(bb)
			copy(bb, bias[j0:j0+cols])
		}
	}
	i := r0
	if cols == nr {
		for ; i+mr <= r1; i += mr {
			kn.run(kk, a[i*lda+p0:], lda, b, ldb, c[i*ldc+j0:], ldc, bb, acc)
		}
	}
	for ; i < r1; i += mr {
		rows := min(mr, r1-i)
		ap, la := a[i*lda+p0:], lda
		if rows < mr {
			ap, la = s.lastRows(mr, kk, a[i*lda+p0:], lda, rows), kk
		}
		t := s.c[:mr*nr]
		kn.run(kk, ap, la, b, ldb, t, nr, bb, false)
		for r := 0; r < rows; r++ {
			crow, trow := c[(i+r)*ldc+j0:(i+r)*ldc+j0+cols], t[r*nr:r*nr+cols]
			if !acc {
				copy(crow, trow)
				continue
			}
			for j, v := range trow {
				crow[j] += v
			}
		}
	}
}

// Weight is a matrix W (n×k: nn.Linear's out×in) packed for MatMul, the
// products x·Wᵀ of inference: panels of the kernel's nr columns of Wᵀ,
// each k×nr, zero beyond n. It is read-only, safe for concurrent use.
type Weight struct {
	N, K int
	kn   *ikernel
	p    []float32
}

// PackWeight packs W for MatMul. w holds W row-major (n×k) when !kn, or
// Wᵀ row-major (k×n: ONNX MatMul's in×out) when kn.
func PackWeight(w []float32, n, k int, kn bool) *Weight {
	return packWeight(inferKernel, w, n, k, kn)
}

func packWeight(kern *ikernel, w []float32, n, k int, kn bool) *Weight {
	nr := kern.nr
	np := (n + nr - 1) / nr
	p := make([]float32, np*k*nr)
	for jp := 0; jp < np; jp++ {
		pan := p[jp*k*nr : (jp+1)*k*nr]
		for j := 0; j < nr && jp*nr+j < n; j++ {
			o := jp*nr + j
			for q := 0; q < k; q++ {
				if kn {
					pan[q*nr+j] = w[q*n+o]
				} else {
					pan[q*nr+j] = w[o*k+q]
				}
			}
		}
	}
	return &Weight{N: n, K: k, kn: kern, p: p}
}

var inferScratches = sync.Pool{New: func() any { return new(InferScratch) }}

// MatMul sets C[0:m, 0:N] = A[0:m, 0:K]·Wᵀ (+ bias, len N, when not nil),
// A and C row-major with strides lda and ldc, on up to threads goroutines
// (≤ 0: GOMAXPROCS), each a contiguous range of rows, or, for a few rows,
// of columns (tiles).
func (w *Weight) MatMul(c []float32, ldc int, a []float32, lda, m int, bias []float32, threads int) {
	w.MatMulThen(c, ldc, a, lda, m, bias, threads, nil)
}

// MatMulThen is MatMul that calls then(lo, hi) (when not nil) as soon as
// rows [lo, hi) of C are done, on the goroutine that did them, while they
// are still in its cache: the op that follows a product (an activation, a
// residual and a LayerNorm), fused with it. The ranges cover [0, m) once,
// each in one call; calls for different ranges may run at once.
func (w *Weight) MatMulThen(c []float32, ldc int, a []float32, lda, m int, bias []float32, threads int, then func(lo, hi int)) {
	if m <= 0 {
		return
	}
	if w.K == 0 || w.N == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+w.N]
			if bias != nil {
				copy(row, bias)
			} else {
				clear(row)
			}
		}
		if then != nil {
			then(0, m)
		}
		return
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	np := (w.N + w.kn.nr - 1) / w.kn.nr
	tiles(m, w.kn.mr, np, threads, true, then, func(r0, r1, jp0, jp1 int, then func(lo, hi int)) {
		w.rows(r0, r1, jp0, jp1, c, ldc, a, lda, bias, then)
	})
}

// tiles calls run over the m×np tiles of a product (m rows of C, np panels
// of the weight) on up to threads goroutines (≥ 1), and then(lo, hi) (when
// not nil) once for each range of rows, as soon as its rows are done.
//
// Where the rows make at least as many blocks as there are threads, run
// gets blocks of whole mr-row tiles (at most imc rows) over every panel,
// taken in turn by the goroutines, a few per goroutine, so that one that
// gets less of the CPU (a busy machine) takes fewer, and calls then itself
// (passed on). Where they do not — a short query: a dozen rows — and
// cols is set, the panels are split instead: run gets every row and a
// range of panels, with a nil then, and then(0, m) follows once all are
// done. Otherwise one block, or one thread, runs on the calling
// goroutine in one call.
//
// The float32 products split their panels (MiniLM's short query on two
// threads 3.0 ms, on one 4.1: BenchmarkQueryLatency); the int8 ones do not:
// their products for a dozen rows take microseconds, less than handing
// them out (1.09 -> 1.23 ms with AMX, measured on a build that split
// them; docs/results/encoder.md, 2026-12-06).
func tiles(m, mr, np, threads int, cols bool, then func(lo, hi int), run func(r0, r1, jp0, jp1 int, then func(lo, hi int))) {
	tiles := (m + mr - 1) / mr
	per := min(imc, max(4*mr, (tiles+4*threads-1)/(4*threads)*mr))
	blocks := (m + per - 1) / per
	if cols && blocks < threads && np > 1 {
		cp := max(1, (np+2*threads-1)/(2*threads)) // panels per chunk: about two chunks per goroutine
		chunks := (np + cp - 1) / cp
		inTurn(min(threads, chunks), chunks, func(b int) {
			run(0, m, b*cp, min(np, (b+1)*cp), nil)
		})
		if then != nil {
			then(0, m)
		}
		return
	}
	if threads <= 1 || blocks <= 1 {
		run(0, m, 0, np, then)
		return
	}
	inTurn(min(threads, blocks), blocks, func(b int) {
		run(b*per, min(m, (b+1)*per), 0, np, then)
	})
}

// inTurn calls do(b) for each b in [0, n) on threads goroutines that take
// them in turn (parallel.Each; on the calling goroutine when threads is
// 1). A panic on any of them is raised again here, on the caller's.
func inTurn(threads, n int, do func(b int)) {
	if err := parallel.Each(context.Background(), n, threads, func(b int) error { do(b); return nil }); err != nil {
		panic(err)
	}
}

// rows is MatMulThen for rows [r0, r1) and panels [jp0, jp1) on the
// calling goroutine.
func (w *Weight) rows(r0, r1, jp0, jp1 int, c []float32, ldc int, a []float32, lda int, bias []float32, then func(lo, hi int)) {
	s := inferScratches.Get().(*InferScratch)
	defer inferScratches.Put(s)
	kern, nr, K := w.kn, w.kn.nr, w.K
	kb := kBlock(K)
	s.grow(kern, kb)
	for i0 := r0; i0 < r1; i0 += imc {
		i1 := min(r1, i0+imc)
		for p0 := 0; p0 < K; p0 += kb {
			kk := min(kb, K-p0)
			first := p0 == 0
			for jp := jp0; jp < jp1; jp++ {
				var bb []float32
				if first {
					bb = bias
				}
				cols := min(nr, w.N-jp*nr)
				s.panel(kern, i0, i1, p0, kk, a, lda, w.p[jp*K*nr+p0*nr:], nr, c, ldc, jp*nr, cols, bb, !first)
			}
		}
		if then != nil {
			then(i0, i1)
		}
	}
}

// MatMulNN sets C[0:m, 0:n] = A[0:m, 0:k]·B[0:k, 0:n] on the calling
// goroutine, every matrix row-major with its own stride (the per-head
// products of attention), reducing each element as MatMul does.
func (s *InferScratch) MatMulNN(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	mulNN(inferKernel, s, m, n, k, a, lda, b, ldb, c, ldc)
}

func mulNN(kern *ikernel, s *InferScratch, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	nr := kern.nr
	kb := kBlock(k)
	s.grow(kern, kb)
	for p0 := 0; p0 < k; p0 += kb {
		kk := min(kb, k-p0)
		for j0 := 0; j0 < n; j0 += nr {
			cols := min(nr, n-j0)
			bp, lb := b[p0*ldb+j0:], ldb
			if cols < nr || (kk-1)*ldb+nr > len(bp) { // a narrow panel, or one ending the slice: padded copy
				bp, lb = s.b[:kk*nr], nr
				for q := 0; q < kk; q++ {
					d := bp[q*nr : q*nr+nr]
					clear(d[copy(d, b[(p0+q)*ldb+j0:(p0+q)*ldb+j0+cols]):])
				}
			}
			s.panel(kern, 0, m, p0, kk, a, lda, bp, lb, c, ldc, j0, cols, nil, p0 > 0)
		}
	}
}

// ScoresMax is attention's scores with the softmax's first step done in
// the product's registers, where this CPU runs the AVX-512 kernel: C
// (m×n) = s·(A·B) + bias (A m×k, B k×n, bias one value a column), each
// value MatMulNN's product then one fused multiply-add, and mx (16 lanes
// a row, at least m rounded up to the kernel's 12 rows) raised to each
// row's values where larger. n must be a multiple of 32 and k at most
// ikc (one block of k: the same sums as MatMulNN's). It reports false,
// doing nothing, on other CPUs or shapes.
func (s *InferScratch) ScoresMax(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, bias []float32, scale float32, mx []float32) bool {
	kern := inferKernel
	if scoresKernel == nil || m <= 0 || k <= 0 || k > ikc || n%kern.nr != 0 || len(bias) < n {
		return false
	}
	mr, nr := kern.mr, kern.nr
	tiles := (m + mr - 1) / mr
	_ = mx[tiles*mr*16-1]
	_ = b[(k-1)*ldb+n-1]
	_ = c[(m-1)*ldc+n-1]
	s.grow(kern, k)
	for i := 0; i < m; i += mr {
		rows := min(mr, m-i)
		if rows == mr { // every panel in one call
			_ = a[(i+mr-1)*lda+k-1]
			scoresKernel(k, &a[i*lda], lda, &b[0], ldb, &c[i*ldc], ldc, &bias[0], scale, &mx[i*16], n/nr)
			continue
		}
		// The last rows: copied, and C through a scratch tile.
		ap := s.lastRows(mr, k, a[i*lda:], lda, rows)
		for j := 0; j < n; j += nr {
			t := s.c[:mr*nr]
			scoresKernel(k, &ap[0], k, &b[j], ldb, &t[0], nr, &bias[j], scale, &mx[i*16], 1)
			for r := 0; r < rows; r++ {
				copy(c[(i+r)*ldc+j:(i+r)*ldc+j+nr], t[r*nr:r*nr+nr])
			}
		}
	}
	return true
}
