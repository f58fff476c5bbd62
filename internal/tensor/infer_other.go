//go:build !amd64

package tensor

// inferKernels lists the kernels this CPU runs: the portable one.
func inferKernels() []*ikernel { return []*ikernel{goKernel} }

// scoresKernel: none without assembly (ScoresMax reports false).
var scoresKernel func(int, *float32, int, *float32, int, *float32, int, *float32, float32, *float32, int)
