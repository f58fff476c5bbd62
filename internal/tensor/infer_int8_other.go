//go:build !amd64

package tensor

// int8Kernels lists the int8 kernels this CPU runs: the portable one.
func int8Kernels() []*i8kernel { return []*i8kernel{goInt8Kernel} }

// rowsAMXTile is never called: no AMX kernel is listed.
func rowsAMXTile(kp int, a []uint8, lda int, b []int8, np int, c []float32, ldc int, corr []int32, cs, rs, bias []float32, tmp []int32) {
	panic("tensor: no AMX kernel on this architecture")
}
