//go:build !amd64

package tensor

// int8Kernels lists the int8 kernels this CPU runs: the portable one.
func int8Kernels() []*i8kernel { return []*i8kernel{goInt8Kernel} }
