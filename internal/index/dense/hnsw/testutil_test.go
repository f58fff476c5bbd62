package hnsw

import (
	"cmp"
	"math"
	"math/rand"
	"slices"
)

// clustered returns n L2-normalised dim-d vectors drawn around nClusters
// random centres, the shape of real embedding sets (and harder for HNSW than
// uniform noise).
func clustered(rng *rand.Rand, n, dim, nClusters int, spread float64) [][]float32 {
	centres := make([][]float64, nClusters)
	for i := range centres {
		c := make([]float64, dim)
		for j := range c {
			c[j] = rng.NormFloat64()
		}
		centres[i] = c
	}
	out := make([][]float32, n)
	for i := range out {
		c := centres[rng.Intn(nClusters)]
		v := make([]float32, dim)
		var norm float64
		for j := range v {
			x := c[j] + spread*rng.NormFloat64()
			v[j] = float32(x)
			norm += x * x
		}
		inv := float32(1 / math.Sqrt(norm))
		for j := range v {
			v[j] *= inv
		}
		out[i] = v
	}
	return out
}

// exactKNN returns the keys of the k nearest live vectors by brute force.
func exactKNN(vecs map[int][]float32, q []float32, k int, dist DistanceFunc) []int {
	type kd struct {
		k int
		d float32
	}
	all := make([]kd, 0, len(vecs))
	for key, v := range vecs {
		all = append(all, kd{key, dist(q, v)})
	}
	slices.SortFunc(all, func(a, b kd) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	out := make([]int, 0, k)
	for i := 0; i < k && i < len(all); i++ {
		out = append(out, all[i].k)
	}
	return out
}

func overlap(got, want []int) int {
	n := 0
	for _, g := range got {
		if slices.Contains(want, g) {
			n++
		}
	}
	return n
}
