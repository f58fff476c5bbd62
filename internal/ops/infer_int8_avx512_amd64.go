package ops

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// In infer_int8_avx512_amd64.s (AVX-512 F, BW, DQ); n is a multiple of 16.
//
//go:noescape
func fastGelu512(x, b *float32, n int, c *[int8Consts][8]float32) (absMax float32)

//go:noescape
func absMax512(x *float32, n int) float32

//go:noescape
func quantize512(q *uint8, x *float32, n int, inv float32)

//go:noescape
func skipAdd512(y, x, bias *float32, n int)

//go:noescape
func rowSums512(y *float32, n, stride int, mask uint16, sums *[32]float32)

//go:noescape
func colSums512(t *float32, n int, sums *[32]float32)

//go:noescape
func norm512(out, y, w, b *float32, n int, mean, sd float32) (absMax float32)

// useInt8AVX512 says whether the int8 helpers run their AVX-512 kernels
// (a variable for the tests of every path).
var useInt8AVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ

// The vector parts of the fused int8 helpers: each does the first
// len&^15 elements where there is AVX-512 and says how many it did (and,
// where it returns one, the largest |value| it wrote among them).

func fastGelu16(x, b []float32) (int, float32) {
	n := len(x) &^ 15
	if !useInt8AVX512 || n == 0 {
		return 0, 0
	}
	_ = b[n-1]
	return n, fastGelu512(&x[0], &b[0], n, int8Table)
}

func absMax16(x []float32) (int, float32) {
	n := len(x) &^ 15
	if !useInt8AVX512 || n == 0 {
		return 0, 0
	}
	return n, absMax512(&x[0], n)
}

func quantize16(q []uint8, x []float32, inv float32) int {
	n := len(x) &^ 15
	if !useInt8AVX512 || n == 0 {
		return 0
	}
	_ = q[n-1]
	quantize512(&q[0], &x[0], n, inv)
	return n
}

func skipAdd16(y, x, bias []float32) int {
	n := len(y) &^ 15
	if !useInt8AVX512 || n == 0 {
		return 0
	}
	_, _ = x[n-1], bias[n-1]
	skipAdd512(&y[0], &x[0], &bias[0], n)
	return n
}

// rowSumsTransposed lets rowSums16 take sixteen whole rows by
// transposition (a variable for the benchmark that compares it with the
// gathers).
var rowSumsTransposed = true

// rowSumsScratch holds the transposed rows: 16 values a column.
var rowSumsScratch = sync.Pool{New: func() any { return new([]float32) }}

// rowSums16 sums rows (≤ 16) rows of y (stride C, C values each) as
// rowSums does; false when it cannot.
func rowSums16(y []float32, rows, C int, sum, sq []float32) bool {
	if !useInt8AVX512 || rows <= 0 || rows > 16 || C <= 0 {
		return false
	}
	_ = y[(rows-1)*C+C-1]
	var s [32]float32
	if rows == 16 && C%16 == 0 && rowSumsTransposed && useTranspose512 {
		// The rows' columns side by side (transpose16, attention's Kᵀ
		// kernel), then summed a column at a time: the same sums in
		// the same order as a gather a column, without the gathers.
		tp := rowSumsScratch.Get().(*[]float32)
		t := growAtt(tp, 16*C)
		transpose16(&t[0], 16, &y[0], C, 1, C/16)
		colSums512(&t[0], C, &s)
		rowSumsScratch.Put(tp)
	} else {
		rowSums512(&y[0], C, C, uint16(1<<rows-1), &s)
	}
	copy(sum[:rows], s[:rows])
	copy(sq[:rows], s[16:16+rows])
	return true
}

func norm16(out, y, w, b []float32, mean, sd float32) (int, float32) {
	n := len(y) &^ 15
	if !useInt8AVX512 || n == 0 {
		return 0, 0
	}
	_, _, _ = out[n-1], w[n-1], b[n-1]
	return n, norm512(&out[0], &y[0], &w[0], &b[0], n, mean, sd)
}
