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

func prefetchBytes(p *int8, lines int) {}

func prefetchUint32(p *uint32, lines int) {}

// dotF32I8 returns Σ p[i]·float32(c[i]) (len(c) must be >= len(p)).
func dotF32I8(p []float32, c []int8) float32 { return dotF32I8Generic(p, c) }

// dotI8 returns Σ s[i]·c[i] (a, the absolute values, is for the AVX2
// kernel).
func dotI8(_ []uint8, s, c []int8) int32 { return dotI8Generic(s, c) }
