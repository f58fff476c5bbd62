package hnsw

import (
	"math"
	"slices"
)

// Scalar quantization (Quantize "int8").
//
// Each stored vector is also kept as int8 codes, one byte per dimension:
// x[j] ≈ mid[j] + scale[j]·c[j], c[j] in [-127, 127], mid and scale fitted
// per dimension to the range (min to max) of the vectors seen. The graph
// is built and searched with these codes; the float vectors are read only
// to re-score a search's final candidate list exactly, for Lookup and
// Export. So the floats need not be resident: a graph loaded from a file
// maps them (see ImportOptions.File) and touches only the pages of the
// candidates it re-scores.
//
// Per dimension rather than one global range: embedding models have a few
// dimensions whose values range several times wider than the others
// (MiniLM does), and a global range would spend most of the 255 levels of
// every other dimension on values they never take. Min/max rather than
// symmetric ±max: those wide dimensions are often offset from zero.
//
// For DotDistance, q·x ≈ q·mid + Σ (q[j]·scale[j])·c[j], so a query is
// prepared once (p = q⊙scale, c0 = q·mid). A search then quantizes p too,
// with one scale (p ≈ ps·s, s in [-127, 127]), and each distance is one
// int8×int8 dot product (dotI8: VPSIGNB, VPMADDUBSW, VPMADDWD on AVX2, or
// VPSIGNB, VPDPBUSD with AVX-512 VNNI; 32 dimensions a step, exact in
// int32) over a quarter of the bytes; the
// candidate list it ends with is re-scored with the float vectors, so
// only the walk sees the rounding. An insert's searches do the same; the
// neighbour heuristic's distances between two stored nodes decode one of
// them (nodeQuery, dotF32I8). Measured at 300k SciFact-variant vectors:
// recall unchanged within ±0.002 at ef 16–48, the build 15 % faster, the
// search's QPS within the run-to-run noise (the kernel alone is 2.2×
// faster, but a search mostly waits on memory).
//
// The ranges are fitted at the first insert and fitted again, over every
// vector, each time the graph has doubled since, up to refitUntil vectors;
// after that they are fixed and values outside them clamp. A refit
// re-encodes every code (links built with the old codes stay: they are
// still good links).

// refitUntil: see above.
const refitUntil = 1 << 16

// quantMargin widens each fitted range by this fraction of its width on
// each side, so that values slightly beyond the vectors seen so far do not
// clamp.
const quantMargin = 0.02

// Quantization modes of Graph.Quantize.
const (
	QuantizeNone = ""
	QuantizeInt8 = "int8"
)

type quantizer struct {
	mid, scale []float32
	// trainedOn is how many vectors the ranges were fitted on.
	trainedOn int
}

// fit fits the ranges to n vectors of dim floats read through vec.
func fitQuantizer(n, dim int, vec func(i int) []float32) quantizer {
	lo := make([]float32, dim)
	hi := make([]float32, dim)
	for j := range lo {
		lo[j], hi[j] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	for i := 0; i < n; i++ {
		for j, x := range vec(i) {
			lo[j] = min(lo[j], x)
			hi[j] = max(hi[j], x)
		}
	}
	qz := quantizer{mid: lo, scale: hi, trainedOn: n}
	for j := range lo {
		a, b := lo[j], hi[j]
		w := (b - a) * quantMargin
		a, b = a-w, b+w
		qz.mid[j] = (a + b) / 2
		qz.scale[j] = (b - a) / 254
	}
	return qz
}

// encode writes v's codes into dst.
func (qz *quantizer) encode(dst []int8, v []float32) {
	for j, x := range v {
		s := qz.scale[j]
		if s == 0 {
			dst[j] = 0
			continue
		}
		c := math.Round(float64((x - qz.mid[j]) / s))
		dst[j] = int8(max(-127, min(127, c)))
	}
}

// prepare fills p with v⊙scale and returns v·mid: then
// v·x ≈ c0 + dotF32I8(p, codes of x).
func (qz *quantizer) prepare(p, v []float32) float32 {
	var c0 float32
	for j, x := range v {
		p[j] = x * qz.scale[j]
		c0 += x * qz.mid[j]
	}
	return c0
}

// prepareCodes is prepare of the vector the codes c decode to.
func (qz *quantizer) prepareCodes(p []float32, c []int8) float32 {
	var c0 float32
	for j, x := range c {
		v := qz.mid[j] + qz.scale[j]*float32(x)
		p[j] = v * qz.scale[j]
		c0 += v * qz.mid[j]
	}
	return c0
}

func (qz *quantizer) clone() quantizer {
	return quantizer{mid: slices.Clone(qz.mid), scale: slices.Clone(qz.scale), trainedOn: qz.trainedOn}
}

// dotF32I8Generic is the portable dotF32I8.
func dotF32I8Generic(p []float32, c []int8) float32 {
	n := len(p)
	c = c[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += p[i] * float32(c[i])
		s1 += p[i+1] * float32(c[i+1])
		s2 += p[i+2] * float32(c[i+2])
		s3 += p[i+3] * float32(c[i+3])
	}
	for ; i < n; i++ {
		s0 += p[i] * float32(c[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// query is a search vector prepared for distances to stored nodes.
type query struct {
	f    []float32 // the vector
	dist DistanceFunc
	// Quantized graphs: p = f⊙scale, c0 = f·mid.
	p  []float32
	c0 float32
	// A search's query in a quantized graph: p ≈ ps·s, s in int8 (one
	// scale, ps = max|p|/127) and a = |s|, so that each distance is one
	// int8 dot product (dotI8). nil: distances use p.
	s  []int8
	a  []uint8
	ps float32
}

// quantizeQuery sets q.s, q.a and q.ps from q.p, in s and a (dim values of
// scratch each).
func (q *query) quantizeQuery(s []int8, a []uint8) {
	var m float32
	for _, x := range q.p {
		m = max(m, x, -x)
	}
	q.s, q.a = s[:len(q.p)], a[:len(q.p)]
	if m == 0 {
		clear(q.s)
		clear(q.a)
		q.ps = 0
		return
	}
	inv := 127 / m
	for j, x := range q.p {
		v := int8(math.Round(float64(x * inv)))
		q.s[j] = v
		q.a[j] = uint8(max(v, -v))
	}
	q.ps = m / 127
}

// dotI8Generic is the portable dotI8.
func dotI8Generic(s, c []int8) int32 {
	c = c[:len(s)]
	var d0, d1 int32
	i := 0
	for ; i+2 <= len(s); i += 2 {
		d0 += int32(s[i]) * int32(c[i])
		d1 += int32(s[i+1]) * int32(c[i+1])
	}
	for ; i < len(s); i++ {
		d0 += int32(s[i]) * int32(c[i])
	}
	return d0 + d1
}
