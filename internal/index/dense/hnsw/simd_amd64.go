//go:build !purego

package hnsw

import "golang.org/x/sys/cpu"

// AVX2+FMA kernels for Dot and SquaredL2 (simd_amd64.s). Distance
// evaluations are nearly all of HNSW's time; on 384-d vectors these are
// several times faster than the unrolled Go loops (BenchmarkDot384 vs
// BenchmarkDotGeneric384). Build with -tags purego to use the Go code only.

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func l2AVX2(a, b *float32, n int) float32

//go:noescape
func dotF32I8AVX2(p *float32, c *int8, n int) float32

// useAVX2 picks the AVX2+FMA loops; golang.org/x/sys/cpu checks that the
// OS saves the YMM registers. GODEBUG=cpu.avx2=off (or cpu.fma=off) keeps
// the Go loops.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useVNNI picks dotI8's AVX-512 VNNI loop (on YMM registers: AVX512F,
// AVX512VL, AVX512_VNNI, the OS saving the opmask and ZMM state) over its
// AVX2 one. On 384-d codes (BenchmarkDotI8Kernels_384, an AMD EPYC with
// both, 2026-11-27, fastest of the runs) 8.1 ns against 9.8 on a busy
// machine, 8.5 against 9.0 on a quiet one. GODEBUG=cpu.avx512vnni=off
// measures the AVX2 loop on a CPU that has both.
var useVNNI = useAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// Dot returns the inner product of a and b (len(b) must be >= len(a)).
func Dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if useAVX2 {
		_ = b[len(a)-1]
		return dotAVX2(&a[0], &b[0], len(a))
	}
	return dotGeneric(a, b)
}

// SquaredL2 returns the squared Euclidean distance between a and b
// (len(b) must be >= len(a)).
func SquaredL2(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if useAVX2 {
		_ = b[len(a)-1]
		return l2AVX2(&a[0], &b[0], len(a))
	}
	return squaredL2Generic(a, b)
}

// dotF32I8 returns Σ p[i]·float32(c[i]) (len(c) must be >= len(p)): the
// distance kernel of quantized graphs, a float query against int8 codes.
func dotF32I8(p []float32, c []int8) float32 {
	n := len(p)
	if n == 0 {
		return 0
	}
	if useAVX2 && n >= 8 {
		_ = c[n-1]
		v := n &^ 7
		s := dotF32I8AVX2(&p[0], &c[0], v)
		if v < n {
			s += dotF32I8Generic(p[v:], c[v:n])
		}
		return s
	}
	return dotF32I8Generic(p, c)
}

//go:noescape
func dotI8Asm(a *uint8, s *int8, c *int8, n int, vnni bool) int32

// dotI8 returns Σ s[i]·c[i] given a[i] = |s[i]| (len(a) = len(s) ≤
// len(c); every value in [-127, 127]): the search's distance kernel of
// quantized graphs, an int8 query against int8 codes.
func dotI8(a []uint8, s, c []int8) int32 {
	n := len(s)
	if n == 0 {
		return 0
	}
	if useAVX2 && n >= 32 {
		_, _, _ = a[n-1], c[n-1], s[n-1]
		v := n &^ 31
		d := dotI8Asm(&a[0], &s[0], &c[0], v, useVNNI)
		if v < n {
			d += dotI8Generic(s[v:], c[v:n])
		}
		return d
	}
	return dotI8Generic(s, c)
}

// prefetchLines asks the CPU to start loading lines cache lines from p.
// HNSW jumps between vectors at random addresses, so distance computations
// wait on memory far more than on arithmetic; announcing the next vectors
// while computing the current ones overlaps the two (as hnswlib does).
//
//go:noescape
func prefetchLines(p *float32, lines int)

const hasPrefetch = true

// prefetchUint32 is prefetchLines for a link list.
//
//go:noescape
func prefetchUint32(p *uint32, lines int)

// prefetchBytes is prefetchLines for int8 codes.
//
//go:noescape
func prefetchBytes(p *int8, lines int)
