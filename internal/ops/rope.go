package ops

import "math"

// Rope holds the rotary tables of positions 0..T−1 for heads of width D:
// cos and sin, T×D/2 each (the two halves of a head share them).
type Rope struct {
	T, D     int
	Cos, Sin []float32
}

// NewRope computes the tables as transformers' LlamaRotaryEmbedding does,
// in float32 whatever the model's precision: inv_freq[i] = 1/θ^(2i/D),
// angle = position·inv_freq[i].
func NewRope(T, D int, theta float64) *Rope {
	h := D / 2
	r := &Rope{T: T, D: D, Cos: make([]float32, T*h), Sin: make([]float32, T*h)}
	for i := 0; i < h; i++ {
		e := float32(2*i) / float32(D)
		inv := 1 / float32(math.Pow(theta, float64(e)))
		for t := 0; t < T; t++ {
			a := float32(t) * inv
			r.Cos[t*h+i] = float32(math.Cos(float64(a)))
			r.Sin[t*h+i] = float32(math.Sin(float64(a)))
		}
	}
	return r
}

// Forward rotates x in place: x is N·T rows of heads×D, row n·T+t at
// position t. With the halves x1 = x[:D/2], x2 = x[D/2:] of each head
// ("rotate_half"): x1' = x1·cos − x2·sin, x2' = x2·cos + x1·sin.
func (r *Rope) Forward(x []float32, rows, heads, th int) { r.apply(x, rows, heads, 1, th) }

// Backward maps the gradient of the rotated x to that of x, in place (the
// transposed rotation: the angle negated).
func (r *Rope) Backward(dx []float32, rows, heads, th int) { r.apply(dx, rows, heads, -1, th) }

// ForwardAt rotates x in place, row i (heads×D) at position pos[i] (each
// below T): one new token per sequence, as incremental decoding runs.
func (r *Rope) ForwardAt(x []float32, pos []int, heads int) {
	for row, t := range pos {
		r.rotate(x[row*heads*r.D:(row+1)*heads*r.D], t, heads, 1)
	}
}

func (r *Rope) apply(x []float32, rows, heads int, sign float32, th int) {
	W := heads * r.D
	ParallelFor(rows, th, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			r.rotate(x[row*W:row*W+W], row%r.T, heads, sign)
		}
	})
}

// rotate turns one row's heads by position t's angles (negated for sign −1).
func (r *Rope) rotate(x []float32, t, heads int, sign float32) {
	D, h := r.D, r.D/2
	cs, sn := r.Cos[t*h:t*h+h], r.Sin[t*h:t*h+h]
	for hd := 0; hd < heads; hd++ {
		x1 := x[hd*D : hd*D+h]
		x2 := x[hd*D+h : hd*D+D]
		for i := range x1 {
			c, s := cs[i], sign*sn[i]
			a, b := x1[i], x2[i]
			x1[i] = a*c - b*s
			x2[i] = b*c + a*s
		}
	}
}
