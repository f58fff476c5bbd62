//go:build !amd64

package ops

func transposeBlocks(kt []float32, ldt int, k []float32, L, D, ld int) int { return 0 }

func prefetch(x []float32, rows, stride, n int) {}
