package ops

// GELUForward: out = x·Φ(x) = ½x(1 + erf(x/√2)) (PyTorch's exact GELU).
func GELUForward(out, x []float32, th int) {
	elementwise(len(out), th, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i]
			out[i] = 0.5 * v * (1 + Erf32(v*0.70710678118654752440))
		}
	})
}

// GELUBackward adds to dx the gradient given dout: Φ(x) + x·φ(x).
func GELUBackward(dx, dout, x []float32, th int) {
	elementwise(len(dout), th, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i]
			cdf := 0.5 * (1 + Erf32(v*0.70710678118654752440))
			pdf := 0.39894228040143267794 * Exp32(-0.5*v*v)
			dx[i] += dout[i] * (cdf + v*pdf)
		}
	})
}
