package hnsw

import (
	"bytes"
	"math"
	"math/rand"
	"strings"
	"testing"
)

func naiveDot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func TestDistances(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	t.Logf("AVX2+FMA kernels: %v", useAVX2)
	for _, n := range []int{0, 1, 3, 7, 8, 9, 16, 31, 32, 33, 40, 63, 64, 65, 384, 385, 391} {
		a, b := randVec(rng, n), randVec(rng, n)
		var dot, l2, na, nb float64
		for i := range a {
			dot += float64(a[i]) * float64(b[i])
			d := float64(a[i]) - float64(b[i])
			l2 += d * d
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		tol := 1e-4 * (1 + math.Sqrt(na*nb))
		for name, f := range map[string]func(a, b []float32) float32{"Dot": Dot, "dotGeneric": dotGeneric} {
			if got := f(a, b); math.Abs(float64(got)-dot) > tol {
				t.Errorf("n=%d: %s = %v, want %v", n, name, got, dot)
			}
		}
		for name, f := range map[string]func(a, b []float32) float32{"SquaredL2": SquaredL2, "squaredL2Generic": squaredL2Generic} {
			if got := f(a, b); math.Abs(float64(got)-l2) > 1e-4*(1+l2) {
				t.Errorf("n=%d: %s = %v, want %v", n, name, got, l2)
			}
		}
		if got := EuclideanDistance(a, b); math.Abs(float64(got)-math.Sqrt(l2)) > 1e-3 {
			t.Errorf("n=%d: EuclideanDistance = %v, want %v", n, got, math.Sqrt(l2))
		}
		wantCos := 1.0
		if na > 0 && nb > 0 {
			wantCos = 1 - dot/math.Sqrt(na*nb)
		}
		if got := CosineDistance(a, b); math.Abs(float64(got)-wantCos) > 1e-4 {
			t.Errorf("n=%d: CosineDistance = %v, want %v", n, got, wantCos)
		}
	}
	if d := CosineDistance([]float32{0, 0}, []float32{1, 0}); d != 1 {
		t.Errorf("CosineDistance with a zero vector = %v, want 1 (not NaN)", d)
	}
}

var sink float32

func benchDist(b *testing.B, f func(a, b []float32) float32) {
	rng := rand.New(rand.NewSource(1))
	x, y := randVec(rng, 384), randVec(rng, 384)
	b.SetBytes(384 * 4 * 2)
	for i := 0; i < b.N; i++ {
		sink += f(x, y)
	}
}

func BenchmarkDot384(b *testing.B)        { benchDist(b, Dot) }
func BenchmarkDotGeneric384(b *testing.B) { benchDist(b, dotGeneric) }
func BenchmarkNaiveDot384(b *testing.B)   { benchDist(b, naiveDot) }
func BenchmarkSquaredL2384(b *testing.B)  { benchDist(b, SquaredL2) }
func BenchmarkCosine384(b *testing.B)     { benchDist(b, CosineDistance) }

// dotI8 (AVX2 where the CPU has it) equals the exact integer sum, over
// every length from 0 to 200 (the kernel's 64- and 32-wide steps and the
// Go tail) and values at the ends of the range (±127).
func TestDotI8(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for n := 0; n <= 200; n++ {
		a, s, c := randI8(rng, n)
		var want int32
		for i := range s {
			want += int32(s[i]) * int32(c[i])
		}
		if got := dotI8(a, s, c); got != want {
			t.Fatalf("n=%d: dotI8 %d, want %d", n, got, want)
		}
	}
}

// randI8 is an int8 query (s, and a = |s|) and codes c of n values in
// [-127, 127], one in eight pairs at the ends of the range.
func randI8(rng *rand.Rand, n int) (a []uint8, s, c []int8) {
	s, c, a = make([]int8, n), make([]int8, n), make([]uint8, n)
	for i := range s {
		s[i], c[i] = int8(rng.Intn(255)-127), int8(rng.Intn(255)-127)
		if rng.Intn(8) == 0 {
			s[i], c[i] = 127, -127
		}
		a[i] = uint8(max(s[i], -s[i]))
	}
	return a, s, c
}

func BenchmarkDotF32I8_384(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	p, c := randVec(rng, 384), make([]int8, 384)
	for i := range c {
		c[i] = int8(rng.Intn(255) - 127)
	}
	var s float32
	for b.Loop() {
		s += dotF32I8(p, c)
	}
	_ = s
}

func BenchmarkDotI8_384(b *testing.B) {
	a, s, c := randI8(rand.New(rand.NewSource(1)), 384)
	var d int32
	for b.Loop() {
		d += dotI8(a, s, c)
	}
	_ = d
}

// TestExportNeedsAKnownDistance: a graph whose Distance is none of the
// package's four is refused by Export (the file records the function's
// name), with an error naming them.
func TestExportNeedsAKnownDistance(t *testing.T) {
	g := NewGraph[int]()
	g.Distance = func(a, b []float32) float32 { return SquaredL2(a, b) }
	g.Add(MakeNode(1, []float32{1, 2}), MakeNode(2, []float32{2, 1}))
	var buf bytes.Buffer
	if err := g.Export(&buf); err == nil || !strings.Contains(err.Error(), "SquaredEuclideanDistance") {
		t.Fatalf("Export with a custom distance: %v", err)
	}
	g2 := NewGraph[int]()
	g2.Distance = SquaredEuclideanDistance
	g2.Add(MakeNode(1, []float32{1, 2}))
	if err := g2.Export(&buf); err != nil {
		t.Fatalf("Export with SquaredEuclideanDistance: %v", err)
	}
}
