//go:build !amd64

package tensor

// inferKernels lists the kernels this CPU runs: the portable one.
func inferKernels() []*ikernel { return []*ikernel{goKernel} }
