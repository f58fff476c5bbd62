package tensor

import (
	"fmt"
	"runtime"
	"sync"
)

// The int8 inference GEMM: the products of a quantized BERT graph (model/
// onnx's MatMulIntegerToFloat), unsigned 8-bit activations A (a zero point
// per call) times signed 8-bit weights, summed exactly in int32, then
// turned into float32 by the same operations ONNX Runtime's MLAS applies:
//
//	C[i, j] = ((float32(Σ_k (A[i,k] − zp)·W[j,k]) · colScale[j]) · rowScale[i]) + bias[j]
//
// each operation rounded to float32 on its own (no fused multiply-add),
// rowScale and bias optional. The sum is an integer, so every kernel gives
// the same int32 and, through the same roundings, the same float32 bits:
// AVX-512 VNNI (VPDPBUSD, 8×32 tiles), AVX2 (VPMADDUBSW then VPMADDWD, 4×16
// tiles) and the portable Go kernel (4×16). VPMADDUBSW adds two u8·s8
// products in 16 bits with saturation, exact only while 2·255·|w| ≤ 32767,
// so the AVX2 kernel runs only weights with |w| ≤ 64 (model/onnx's 7-bit
// quantizer guarantees it); others go to the next kernel on the list.
//
// A weight is packed once (PackInt8Weight) into panels of the kernel's nr
// columns, k in groups of 4 (the 4 bytes VPDPBUSD sums into one int32):
// group g of panel p holds, for each of its nr columns j, W[j, 4g:4g+4],
// zero past k and past n. Its column sums are kept for the zero point: Σ_k
// (A−zp)·W = Σ_k A·W − zp·Σ_k W. A's rows are read in place, 4 bytes at a
// time: a row must be readable up to k rounded up to 4 (Int8Stride), the
// bytes past k being anything (they meet zero weights).

// i8kernel is one int8 micro-kernel, an mr×nr tile over the whole of k.
type i8kernel struct {
	name   string
	mr, nr int
	// kalign is what the packed weight's k is rounded up to: 4 (a group),
	// or 64 for AMX (a tile's row of A).
	kalign int
	// maxW is the largest |weight| the kernel sums exactly (127: any).
	maxW int
	// asm does nt tiles down the rows against one panel (runTiles).
	asm func(kg int, a *uint8, lda int, b *int8, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32, nt int)
	// amx marks the AMX kernel, which does whole rows of 32 (rowsAMX).
	amx bool
}

// goInt8Kernel is the portable kernel.
var goInt8Kernel = &i8kernel{name: "go", mr: 4, nr: 16, kalign: 4, maxW: 127}

// kstride is k rounded up to the kernel's kalign: the packed weight's k.
func (kn *i8kernel) kstride(k int) int { return (k + kn.kalign - 1) / kn.kalign * kn.kalign }

// Int8Stride is the row stride, in bytes, that A needs for a product over
// k: k rounded up to a multiple of 4.
func Int8Stride(k int) int { return (k + 3) &^ 3 }

// Int8Weight is a matrix W (n×k: nn.Linear's out×in) of int8 values packed
// for MatMulThen. It is read-only, safe for concurrent use.
type Int8Weight struct {
	N, K   int
	kn     *i8kernel
	p      []int8
	colSum []int32 // Σ_k W[j, k]
}

// PackInt8Weight packs W for the fastest kernel this CPU runs exactly on
// W's values. w holds W row-major (n×k) when !kn, or Wᵀ row-major (k×n:
// ONNX MatMul's in×out, a quantized graph's layout) when kn. It is an
// error when w is not n·k values.
func PackInt8Weight(w []int8, n, k int, kn bool) (*Int8Weight, error) {
	if n < 0 || k < 0 || len(w) != n*k {
		return nil, fmt.Errorf("tensor: int8 weight of %d values is not %d×%d", len(w), n, k)
	}
	mx := 0
	for _, v := range w {
		mx = max(mx, abs8(v))
	}
	for _, kern := range int8Kernels() {
		if mx <= kern.maxW {
			return packInt8Weight(kern, w, n, k, kn), nil
		}
	}
	return packInt8Weight(goInt8Kernel, w, n, k, kn), nil
}

func abs8(v int8) int {
	if v < 0 {
		return -int(v)
	}
	return int(v)
}

func packInt8Weight(kern *i8kernel, w []int8, n, k int, kn bool) *Int8Weight {
	nr, kp := kern.nr, kern.kstride(k)
	np := (n + nr - 1) / nr
	p := make([]int8, np*kp*nr)
	cs := make([]int32, n)
	for o := 0; o < n; o++ {
		pan := p[(o/nr)*kp*nr:]
		j := o % nr
		for q := 0; q < k; q++ {
			v := w[o*k+q]
			if kn {
				v = w[q*n+o]
			}
			pan[(q/4)*nr*4+j*4+q%4] = v
			cs[o] += int32(v)
		}
	}
	return &Int8Weight{N: n, K: k, kn: kern, p: p, colSum: cs}
}

// Kernel names the micro-kernel the weight was packed for.
func (w *Int8Weight) Kernel() string { return w.kn.name }

// int8Scratch is one goroutine's buffers for partial tiles.
type int8Scratch struct {
	a        []uint8
	c, rs    []float32
	cs, bias []float32
	corr     []int32
	tmp      []int32 // the AMX kernel's int32 tile
}

var int8Scratches = sync.Pool{New: func() any { return new(int8Scratch) }}

// MatMulThen sets C[0:m, 0:N] = ((float32(Σ_k (A[i,k] − zp)·W[j,k]) ·
// colScale[j]) · rowScale[i]) + bias[j] (rowScale, bias: nil for none),
// A row-major m×K bytes with stride lda ≥ Int8Stride(K), C float32 with
// stride ldc, on up to threads goroutines (≤ 0: GOMAXPROCS), and calls
// then(lo, hi) (when not nil) as soon as rows [lo, hi) of C are done, on
// the goroutine that did them (as Weight.MatMulThen). The results do not
// depend on the kernel or the number of goroutines. Slices too short for
// the shapes are an error, reported before anything is written.
func (w *Int8Weight) MatMulThen(c []float32, ldc int, a []uint8, lda, m int, zp uint8, colScale, rowScale, bias []float32, threads int, then func(lo, hi int)) error {
	if m <= 0 {
		return nil
	}
	kp := Int8Stride(w.K)
	switch {
	case lda < kp || len(a) < (m-1)*lda+kp:
		return fmt.Errorf("tensor: int8 A of %d bytes, stride %d, does not hold %d rows of %d", len(a), lda, m, kp)
	case ldc < w.N || len(c) < (m-1)*ldc+w.N:
		return fmt.Errorf("tensor: C of %d values, stride %d, does not hold %d rows of %d", len(c), ldc, m, w.N)
	case len(colScale) < w.N || (bias != nil && len(bias) < w.N):
		return fmt.Errorf("tensor: %d column scales or %d biases for %d columns", len(colScale), len(bias), w.N)
	case rowScale != nil && len(rowScale) < m:
		return fmt.Errorf("tensor: %d row scales for %d rows", len(rowScale), m)
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// zp·Σ_k W, padded to whole panels.
	nr := w.kn.nr
	np := (w.N + nr - 1) / nr
	corr := make([]int32, np*nr)
	cs := make([]float32, np*nr)
	copy(cs, colScale[:w.N])
	var bb []float32
	if bias != nil {
		bb = make([]float32, np*nr)
		copy(bb, bias[:w.N])
	}
	for j, s := range w.colSum {
		corr[j] = int32(zp) * s
	}
	tiles(m, w.kn.mr, np, threads, false, then, func(r0, r1, _, _ int, then func(lo, hi int)) { // whole panels: see tiles
		if w.kn.amx {
			w.rowsAMX(r0, r1, c, ldc, a, lda, corr, cs, rowScale, bb, then)
			return
		}
		w.rows(r0, r1, c, ldc, a, lda, corr, cs, rowScale, bb, then)
	})
	return nil
}

// rows is MatMulThen for rows [r0, r1) on the calling goroutine; corr, cs
// and bias (or nil) are padded to whole panels.
func (w *Int8Weight) rows(r0, r1 int, c []float32, ldc int, a []uint8, lda int, corr []int32, cs, rowScale, bias []float32, then func(lo, hi int)) {
	s := int8Scratches.Get().(*int8Scratch)
	defer int8Scratches.Put(s)
	kern := w.kn
	mr, nr, kp := kern.mr, kern.nr, Int8Stride(w.K)
	if len(s.a) < mr*kp {
		s.a = make([]uint8, mr*kp)
	}
	if len(s.c) < mr*nr {
		s.c = make([]float32, mr*nr)
	}
	if len(s.rs) < mr {
		s.rs = make([]float32, mr)
	}
	np := (w.N + nr - 1) / nr
	for i0 := r0; i0 < r1; i0 += imc {
		i1 := min(r1, i0+imc)
		for jp := 0; jp < np; jp++ {
			j0 := jp * nr
			cols := min(nr, w.N-j0)
			b := w.p[jp*kp*nr : (jp+1)*kp*nr]
			var bp []float32
			if bias != nil {
				bp = bias[j0 : j0+nr]
			}
			i := i0
			if nt := (i1 - i0) / mr; cols == nr && nt > 0 { // the whole tiles, in one call
				var rs []float32
				if rowScale != nil {
					rs = rowScale[i0:]
				}
				kern.runTiles(nt, kp, a[i0*lda:], lda, b, c[i0*ldc+j0:], ldc, corr[j0:j0+nr], cs[j0:j0+nr], rs, bp)
				i += nt * mr
			}
			for ; i < i1; i += mr {
				rows := min(mr, i1-i)
				var rs []float32
				if rowScale != nil {
					rs = rowScale[i:]
				}
				// A partial tile: A's rows copied (the kernel reads mr rows),
				// C through a scratch tile.
				ap, la := a[i*lda:], lda
				if rows < mr {
					ap, la = s.a[:mr*kp], kp
					for r := 0; r < mr; r++ {
						if r < rows {
							copy(ap[r*kp:r*kp+kp], a[(i+r)*lda:(i+r)*lda+kp])
						} else {
							clear(ap[r*kp : r*kp+kp])
						}
					}
					if rs != nil {
						copy(s.rs[:mr], rs[:rows])
						clear(s.rs[rows:mr])
						rs = s.rs[:mr]
					}
				}
				t := s.c[:mr*nr]
				kern.runTiles(1, kp, ap, la, b, t, nr, corr[j0:j0+nr], cs[j0:j0+nr], rs, bp)
				for r := 0; r < rows; r++ {
					copy(c[(i+r)*ldc+j0:(i+r)*ldc+j0+cols], t[r*nr:r*nr+cols])
				}
			}
		}
		if then != nil {
			then(i0, i1)
		}
	}
}

// rowsAMX is MatMulThen for rows [r0, r1) on the calling goroutine with
// the AMX kernel: tiles of 32 rows over every panel in one call (one tile
// configuration), A read in place where its 32 rows are readable for the
// packed k (a multiple of 64: the bytes past K meet zero weights), else
// copied, C written in place when the tile's rows and the panels are
// whole, else through a scratch; corr, cs and bias (or nil) are padded to
// whole panels.
func (w *Int8Weight) rowsAMX(r0, r1 int, c []float32, ldc int, a []uint8, lda int, corr []int32, cs, rowScale, bias []float32, then func(lo, hi int)) {
	s := int8Scratches.Get().(*int8Scratch)
	defer int8Scratches.Put(s)
	const mr, nr = 32, 32
	kp := w.kn.kstride(w.K)
	np := (w.N + nr - 1) / nr
	if len(s.a) < mr*kp {
		s.a = make([]uint8, mr*kp)
	}
	if len(s.c) < mr*np*nr {
		s.c = make([]float32, mr*np*nr)
	}
	if len(s.rs) < mr {
		s.rs = make([]float32, mr)
	}
	if len(s.tmp) < 2*mr*nr {
		s.tmp = make([]int32, 2*mr*nr)
	}
	for i0 := r0; i0 < r1; i0 += imc {
		i1 := min(r1, i0+imc)
		for i := i0; i < i1; i += mr {
			rows := min(mr, i1-i)
			ap, la := a[i*lda:], lda
			var rs []float32
			if rowScale != nil {
				rs = rowScale[i:]
			}
			if rows < mr || (i+mr-1)*lda+kp > len(a) {
				ap, la = s.a[:mr*kp], kp
				for r := 0; r < mr; r++ {
					d := ap[r*kp : r*kp+kp]
					if r < rows {
						clear(d[copy(d, a[(i+r)*lda:min(len(a), (i+r)*lda+kp)]):])
					} else {
						clear(d)
					}
				}
				if rs != nil {
					clear(s.rs[copy(s.rs[:mr], rs[:rows]):mr])
					rs = s.rs[:mr]
				}
			}
			if rows == mr && w.N == np*nr {
				rowsAMXTile(kp, ap, la, w.p, np, c[i*ldc:], ldc, corr, cs, rs, bias, s.tmp)
				continue
			}
			t := s.c[:mr*np*nr]
			rowsAMXTile(kp, ap, la, w.p, np, t, np*nr, corr, cs, rs, bias, s.tmp)
			for r := 0; r < rows; r++ {
				copy(c[(i+r)*ldc:(i+r)*ldc+w.N], t[r*np*nr:])
			}
		}
		if then != nil {
			then(i0, i1)
		}
	}
}

// runTiles computes nt ≥ 1 mr×nr tiles down the rows over kp (a multiple
// of 4) values of k (tile t: A's and C's rows and rs from t·mr on), in one
// call of the assembly kernel where there is one; rs (nt·mr values) and
// bias (nr) may be nil.
func (kn *i8kernel) runTiles(nt, kp int, a []uint8, lda int, b []int8, c []float32, ldc int, corr []int32, cs, rs, bias []float32) {
	mr, nr := kn.mr, kn.nr
	// Bounds are checked here once; the kernels trust them.
	_ = a[(nt*mr-1)*lda+kp-1]
	_ = b[kp*nr-1]
	_ = c[(nt*mr-1)*ldc+nr-1]
	_, _ = corr[nr-1], cs[nr-1]
	var rp, bp *float32
	if rs != nil {
		_ = rs[nt*mr-1]
		rp = &rs[0]
	}
	if bias != nil {
		_ = bias[nr-1]
		bp = &bias[0]
	}
	if kn.asm != nil {
		kn.asm(kp/4, &a[0], lda, &b[0], &c[0], ldc, &corr[0], &cs[0], rp, bp, nt)
		return
	}
	for t := 0; t < nt; t++ {
		var rt []float32
		if rs != nil {
			rt = rs[t*mr:]
		}
		kn.goTile(kp, a[t*mr*lda:], lda, b, c[t*mr*ldc:], ldc, corr, cs, rt, bias)
	}
}

// goTile is the portable kernel's tile.
func (kn *i8kernel) goTile(kp int, a []uint8, lda int, b []int8, c []float32, ldc int, corr []int32, cs, rs, bias []float32) {
	var acc [4 * 16]int32
	for g := 0; g < kp/4; g++ {
		bg := b[g*64 : g*64+64 : g*64+64]
		for i := 0; i < 4; i++ {
			av := a[i*lda+4*g : i*lda+4*g+4 : i*lda+4*g+4]
			a0, a1, a2, a3 := int32(av[0]), int32(av[1]), int32(av[2]), int32(av[3])
			row := acc[i*16 : i*16+16 : i*16+16]
			for j := range row {
				bj := bg[j*4 : j*4+4 : j*4+4]
				row[j] += a0*int32(bj[0]) + a1*int32(bj[1]) + a2*int32(bj[2]) + a3*int32(bj[3])
			}
		}
	}
	for i := 0; i < 4; i++ {
		crow := c[i*ldc : i*ldc+16 : i*ldc+16]
		for j := range crow {
			v := float32(float32(acc[i*16+j]-corr[j]) * cs[j])
			if rs != nil {
				v = float32(v * rs[i])
			}
			if bias != nil {
				v = float32(v + bias[j])
			}
			crow[j] = v
		}
	}
}
