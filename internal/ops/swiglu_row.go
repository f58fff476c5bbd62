package ops

// SwiGLURow sets out = silu(gate) ⊙ up for one row on the calling
// goroutine, bit for bit as SwiGLUForward (g·σ(g)·up with σ(g) =
// 1/(1 + Exp32(−g))), the exponentials eight at a time where AVX2 is there
// (expSubVec: Exp32's operations in its order). gate and up hold at least
// len(out) values; out must not overlap them.
func SwiGLURow(out, gate, up []float32) {
	n := len(out)
	gate, up = gate[:n], up[:n]
	for i, g := range gate {
		out[i] = -g
	}
	done := expSubVec(out, 0) // Exp32(−g − 0) = Exp32(−g)
	for i, e := range out[:done] {
		out[i] = gate[i] * (1 / (1 + e)) * up[i]
	}
	for i := done; i < n; i++ {
		g := gate[i]
		out[i] = g * sigmoid32(g) * up[i]
	}
}
