package hnsw

import (
	"math"
	"reflect"
)

// DistanceFunc is a function that computes the distance between two vectors.
// Smaller is closer. It must be safe for concurrent use.
type DistanceFunc func(a, b []float32) float32

// dotGeneric is the portable Dot.
//
// The Go compiler does not vectorise loops, so the speed comes from eight
// independent accumulators: the multiply-adds of one step do not wait on the
// previous step, which lets the CPU keep several FP units busy. This is about
// 3x faster than a single-accumulator loop on 384-d vectors
// (BenchmarkDotGeneric384 vs BenchmarkNaiveDot384).
func dotGeneric(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// squaredL2Generic is the portable SquaredL2, unrolled like dotGeneric.
func squaredL2Generic(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		d0 := aa[0] - bb[0]
		d1 := aa[1] - bb[1]
		d2 := aa[2] - bb[2]
		d3 := aa[3] - bb[3]
		d4 := aa[4] - bb[4]
		d5 := aa[5] - bb[5]
		d6 := aa[6] - bb[6]
		d7 := aa[7] - bb[7]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
		s4 += d4 * d4
		s5 += d5 * d5
		s6 += d6 * d6
		s7 += d7 * d7
	}
	for ; i < n; i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// CosineDistance computes 1 - cosine similarity. A zero vector is at
// distance 1 from everything (upstream returned NaN, which broke every
// comparison in the search).
func CosineDistance(a, b []float32) float32 {
	// Three SIMD dot products beat one fused scalar loop by far.
	na, nb := Dot(a, a), Dot(b, b)
	if na == 0 || nb == 0 {
		return 1
	}
	return 1 - Dot(a, b)/float32(math.Sqrt(float64(na)*float64(nb)))
}

// DotDistance computes 1 - a·b. For L2-normalised vectors this equals
// CosineDistance at the cost of a single dot product; it is what to use for
// normalised embeddings.
func DotDistance(a, b []float32) float32 {
	return 1 - Dot(a, b)
}

// EuclideanDistance computes the Euclidean distance between two vectors.
func EuclideanDistance(a, b []float32) float32 {
	return float32(math.Sqrt(float64(SquaredL2(a, b))))
}

// SquaredEuclideanDistance computes the squared Euclidean distance; it
// orders neighbours like EuclideanDistance without the square root.
func SquaredEuclideanDistance(a, b []float32) float32 {
	return SquaredL2(a, b)
}

// distanceFuncs names the distance functions a graph can be exported with
// (the name is written in the file). It is never modified.
var distanceFuncs = map[string]DistanceFunc{
	"euclidean":         EuclideanDistance,
	"cosine":            CosineDistance,
	"dot":               DotDistance,
	"squared_euclidean": SquaredEuclideanDistance,
}

func distanceFuncToName(fn DistanceFunc) (string, bool) {
	if fn == nil {
		return "", false
	}
	fnptr := reflect.ValueOf(fn).Pointer()
	for name, f := range distanceFuncs {
		if reflect.ValueOf(f).Pointer() == fnptr {
			return name, true
		}
	}
	return "", false
}

func distanceFuncByName(name string) (DistanceFunc, bool) {
	f, ok := distanceFuncs[name]
	return f, ok
}
