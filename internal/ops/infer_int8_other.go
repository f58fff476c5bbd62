//go:build !amd64

package ops

// The vector parts of the int8 helpers: none here.

var useInt8AVX2 = false

func fastGeluVec(x, b []float32) int { return 0 }

func minMaxVec(x []float32) (int, float32, float32) { return 0, 0, 0 }

func quantizeVec(q []uint8, x []float32, s float32, zp uint8) int { return 0 }
