//go:build !amd64

package tensor

func kernel(kk int, a, b []float32, c []float32, ldc int, alpha float32) {
	kernelGo(kk, a, b, c, ldc, alpha)
}
