// Package densetest generates synthetic embedding-like vectors for the
// dense index's tests and benchmarks.
package densetest

import (
	"math"
	"math/rand"
)

// Clustered returns n L2-normalised dim-d vectors drawn around nClusters
// random Gaussian centres with per-component noise of standard deviation
// spread (spread 1 puts a point at cosine ≈ 0.7 from its centre). Clustered
// data is what real embeddings look like and is much harder for HNSW than
// uniform noise: greedy routing must cross between dense islands. The same
// seed gives the same vectors.
func Clustered(seed int64, n, dim, nClusters int, spread float64) [][]float32 {
	rng := rand.New(rand.NewSource(seed))
	centres := make([][]float32, nClusters)
	for i := range centres {
		c := make([]float32, dim)
		for j := range c {
			c[j] = float32(rng.NormFloat64())
		}
		centres[i] = c
	}
	slab := make([]float32, n*dim)
	out := make([][]float32, n)
	for i := range out {
		c := centres[rng.Intn(nClusters)]
		v := slab[i*dim : (i+1)*dim : (i+1)*dim]
		var ss float64
		for j := range v {
			x := float64(c[j]) + spread*rng.NormFloat64()
			v[j] = float32(x)
			ss += x * x
		}
		inv := float32(1 / math.Sqrt(ss))
		for j := range v {
			v[j] *= inv
		}
		out[i] = v
	}
	return out
}
