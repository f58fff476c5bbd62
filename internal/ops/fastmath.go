package ops

import "math"

// Erf32 is erf in float32 as a rational minimax approximation on [-4, 4]
// (Eigen's float erf; beyond ±4 erf is ±1 in float32). Absolute error is
// below 1e-6; math.Erf in float64 was a quarter of a training step.
func Erf32(x float32) float32 {
	x = max(-4, min(4, x))
	x2 := x * x
	p := x2*-2.72614225801306e-10 + 2.77068142495902e-08
	p = x2*p + -2.10102402082508e-06
	p = x2*p + -5.69250639462346e-05
	p = x2*p + -7.34990630326855e-04
	p = x2*p + -2.95459980854025e-03
	p = x2*p + -1.60960333262415e-02
	p *= x
	q := x2*-1.45660718464996e-05 + -2.13374055278905e-04
	q = x2*q + -1.68282697438203e-03
	q = x2*q + -7.37332916720468e-03
	q = x2*q + -1.42647390514189e-02
	return p / q
}

// Exp32 is e^x in float32: x = k·ln2 + r with |r| ≤ ln2/2, e^r by a degree-6
// polynomial, 2^k by building the exponent bits. Relative error is below
// 3e-7; inputs below −87 give 0 (as softmax and the GELU density need).
// k is rounded by truncation and a correction (floorRound), which gives
// exactly math.Floor's k without its call: Exp32's values are those of
// the math.Floor form bit for bit (TestExp32MatchesFloorForm), so the
// trainer's numbers do not depend on which form runs.
func Exp32(x float32) float32 {
	if x < -87 {
		return 0
	}
	if x > 88 {
		return float32(math.Inf(1))
	}
	return exp32Core(x)
}

// exp32Core is Exp32 for −87 ≤ x ≤ 88.
func exp32Core(x float32) float32 {
	y := float32(x*1.44269504088896341) + 0.5
	k := float32(int32(y)) // |y| < 128: the conversion truncates exactly
	if k > y {
		k-- // truncation rounded a negative y up: floor is one lower
	}
	r := x - float32(k*0.693359375) - float32(k*-2.12194440e-4)
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(float32(p*r)*r) + r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// expSubSum sets row[j] = Exp32(row[j] − mx) for every j and returns
// their sum, added in index order (softmax's numerator and denominator;
// the same values and sum as the scalar loop, one call per row). On amd64
// with AVX2 the values come eight at a time from exp_amd64.s, which does
// Exp32's operations in its order without FMA: the same bits.
func expSubSum(row []float32, mx float32) float32 {
	done := expSubVec(row, mx)
	var sum float32
	for _, e := range row[:done] {
		sum += e
	}
	for j := done; j < len(row); j++ {
		x := row[j] - mx
		var e float32
		switch {
		case x < -87:
		case x > 88:
			e = float32(math.Inf(1))
		default:
			e = exp32Core(x)
		}
		row[j] = e
		sum += e
	}
	return sum
}
