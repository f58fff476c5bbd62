package ops

// sigmoid32 is 1/(1+e^−x) with Exp32 (e^−x overflows to +Inf for
// x < −88, giving exactly 0).
func sigmoid32(x float32) float32 {
	return 1 / (1 + Exp32(-x))
}

// SwiGLUForward: out = silu(gate) ⊙ up, silu(x) = x·σ(x).
func SwiGLUForward(out, gate, up []float32, th int) {
	elementwise(len(out), th, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := gate[i]
			out[i] = g * sigmoid32(g) * up[i]
		}
	})
}

// SwiGLUBackward adds to dgate and dup the gradient given dout:
// dup = d·silu(g), dgate = d·up·σ(g)·(1 + g·(1−σ(g))).
func SwiGLUBackward(dgate, dup, dout, gate, up []float32, th int) {
	elementwise(len(dout), th, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g, d := gate[i], dout[i]
			s := sigmoid32(g)
			dup[i] += d * g * s
			dgate[i] += d * up[i] * s * (1 + g*(1-s))
		}
	})
}
