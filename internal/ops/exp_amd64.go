package ops

import (
	"math"

	"golang.org/x/sys/cpu"
)

// expConsts is the number of constant vectors expSubAVX2 reads.
const expConsts = 15

// expSubAVX2 is in exp_amd64.s (AVX2, no FMA).
//
//go:noescape
func expSubAVX2(x *float32, n int, mx float32, c *[expConsts][8]float32)

// expTable holds expSubAVX2's constants; it is read only.
var expTable = func() *[expConsts][8]float32 {
	vals := [expConsts]float32{-87, 88, 1.44269504088896341, 0.5, 0.693359375, -2.12194440e-4,
		1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1,
		1, float32(math.Inf(1)), math.Float32frombits(127)}
	var t [expConsts][8]float32
	for i, v := range vals {
		for j := range t[i] {
			t[i][j] = v
		}
	}
	return &t
}()

var useExpAVX2 = cpu.X86.HasAVX2

// expSubVec sets row[j] = Exp32(row[j] − mx) for j below the largest
// multiple of 8 that fits, where AVX2 is there, and returns how many it did.
func expSubVec(row []float32, mx float32) int {
	n := len(row) &^ 7
	if !useExpAVX2 || n == 0 {
		return 0
	}
	expSubAVX2(&row[0], n, mx, expTable)
	return n
}
