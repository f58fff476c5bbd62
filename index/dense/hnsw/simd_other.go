//go:build !amd64 || purego

package hnsw

const useAVX2 = false

// Dot returns the inner product of a and b (len(b) must be >= len(a)).
func Dot(a, b []float32) float32 { return dotGeneric(a, b) }

// SquaredL2 returns the squared Euclidean distance between a and b
// (len(b) must be >= len(a)).
func SquaredL2(a, b []float32) float32 { return squaredL2Generic(a, b) }

const hasPrefetch = false

func prefetchLines(p *float32, lines int) {}
