package ops

// int8Consts is the number of constant rows int8Table holds.
const int8Consts = 17

// In infer_int8_amd64.s (AVX2); n is a multiple of 8 (≥ 8 for minMaxAVX2).
//
//go:noescape
func fastGeluAVX2(x, b *float32, n int, c *[int8Consts][8]float32)

//go:noescape
func minMaxAVX2(x *float32, n int) (lo, hi float32)

//go:noescape
func quantizeAVX2(q *uint8, x *float32, n int, s, zp float32)

//go:noescape
func quantizeMulAVX2(q *uint8, x *float32, n int, s, zp float32)

//go:noescape
func norm8AVX2(out, y, w, b *float32, n int, mean, sd float32) (absMax float32)

//go:noescape
func skipAdd8AVX2(y, x, bias *float32, n int)

//go:noescape
func rowSums8AVX2(y *float32, n, stride, rows int, sums *[16]float32)

// int8Table holds the constants of infer_int8_amd64.s, in its order; it is
// read only.
var int8Table = func() *[int8Consts][8]float32 {
	vals := [int8Consts]float32{fastGeluA, fastGeluB, 0.5, 1, -9, 9,
		tanhA13, tanhA11, tanhA9, tanhA7, tanhA5, tanhA3, tanhA1, tanhB6, tanhB4, tanhB2, tanhB0}
	var t [int8Consts][8]float32
	for i, v := range vals {
		for j := range t[i] {
			t[i][j] = v
		}
	}
	return &t
}()

// useInt8AVX2 says whether the int8 helpers run their AVX2 kernels (a
// variable for the tests of both paths).
var useInt8AVX2 = useInferAVX2

func fastGeluVec(x, b []float32) int {
	n := len(x) &^ 7
	if !useInt8AVX2 || n == 0 {
		return 0
	}
	_ = b[n-1]
	fastGeluAVX2(&x[0], &b[0], n, int8Table)
	return n
}

func minMaxVec(x []float32) (n int, lo, hi float32) {
	n = len(x) &^ 7
	if !useInt8AVX2 || n == 0 {
		return 0, 0, 0
	}
	lo, hi = minMaxAVX2(&x[0], n)
	return n, lo, hi
}

func quantizeVec(q []uint8, x []float32, s float32, zp uint8) int {
	return quantizeVecOp(quantizeAVX2, q, x, s, zp)
}

// quantizeMulVec is quantizeVec with x·inv in place of x/s.
func quantizeMulVec(q []uint8, x []float32, inv float32, zp uint8) int {
	return quantizeVecOp(quantizeMulAVX2, q, x, inv, zp)
}

func quantizeVecOp(k func(q *uint8, x *float32, n int, s, zp float32), q []uint8, x []float32, s float32, zp uint8) int {
	n := len(x) &^ 7
	if !useInt8AVX2 || n == 0 {
		return 0
	}
	_ = q[n-1]
	k(&q[0], &x[0], n, s, float32(zp))
	return n
}

// skipAddVec, rowSumsVec and normInt8Vec are skipAdd16's, rowSums16's and
// norm16's AVX2 forms (eight values, or eight rows, at a time), for a CPU
// without AVX-512; the same bits.

func skipAddVec(y, x, bias []float32) int {
	n := len(y) &^ 7
	if !useInt8AVX2 || n == 0 {
		return 0
	}
	_, _ = x[n-1], bias[n-1]
	skipAdd8AVX2(&y[0], &x[0], &bias[0], n)
	return n
}

func rowSumsVec(y []float32, rows, C int, sum, sq []float32) bool {
	if !useInt8AVX2 || rows <= 0 || rows > 16 || C <= 0 {
		return false
	}
	for r0 := 0; r0 < rows; r0 += 8 { // eight rows a call
		n := min(8, rows-r0)
		_ = y[(r0+n-1)*C+C-1]
		var s [16]float32
		rowSums8AVX2(&y[r0*C], C, C, n, &s)
		copy(sum[r0:r0+n], s[:n])
		copy(sq[r0:r0+n], s[8:8+n])
	}
	return true
}

func normInt8Vec(out, y, w, b []float32, mean, sd float32) (int, float32) {
	n := len(y) &^ 7
	if !useInt8AVX2 || n == 0 {
		return 0, 0
	}
	_, _, _ = out[n-1], w[n-1], b[n-1]
	return n, norm8AVX2(&out[0], &y[0], &w[0], &b[0], n, mean, sd)
}
