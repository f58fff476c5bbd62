//go:build !amd64

package ops

// The vector parts of the int8 helpers: none here.

var useInt8AVX2 = false

func fastGeluVec(x, b []float32) int { return 0 }

func minMaxVec(x []float32) (int, float32, float32) { return 0, 0, 0 }

func quantizeVec(q []uint8, x []float32, s float32, zp uint8) int { return 0 }

var useInt8AVX512 = false

func fastGelu16(x, b []float32) (int, float32)                            { return 0, 0 }
func absMax16(x []float32) (int, float32)                                 { return 0, 0 }
func quantize16(q []uint8, x []float32, inv float32) int                  { return 0 }
func quantizeMulVec(q []uint8, x []float32, inv float32, zp uint8) int    { return 0 }
func skipAdd16(y, x, bias []float32) int                                  { return 0 }
func rowSums16(y []float32, rows, C int, sum, sq []float32) bool          { return false }
func norm16(out, y, w, b []float32, mean, sd float32) (int, float32)      { return 0, 0 }
func skipAddVec(y, x, bias []float32) int                                 { return 0 }
func rowSumsVec(y []float32, rows, C int, sum, sq []float32) bool         { return false }
func normInt8Vec(out, y, w, b []float32, mean, sd float32) (int, float32) { return 0, 0 }

// rowSumsTransposed: no transposing kernel here (BenchmarkInt8Elementwise
// sets it on every architecture).
var rowSumsTransposed = true
