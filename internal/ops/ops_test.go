package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randn(r *rand.Rand, n int, std float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(std * r.NormFloat64())
	}
	return x
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// checkGrad compares, for each input x_i, the analytic directional
// derivative ⟨grad_i, u⟩ of loss = ⟨f(x), R⟩ with the central finite
// difference (loss(x_i + h·u) − loss(x_i − h·u)) / 2h along a random u.
// f must recompute its output from the inputs' current values; grads are
// the backward's gradients for dout = R.
func checkGrad(t *testing.T, name string, r *rand.Rand, inputs, grads [][]float32, f func() []float32, R []float32) {
	t.Helper()
	const h = 1e-2
	for i, x := range inputs {
		u := randn(r, len(x), 1)
		orig := append([]float32(nil), x...)
		for j := range x {
			x[j] = orig[j] + h*u[j]
		}
		lp := dot(f(), R)
		for j := range x {
			x[j] = orig[j] - h*u[j]
		}
		lm := dot(f(), R)
		copy(x, orig)
		fd := (lp - lm) / (2 * h)
		an := dot(grads[i], u)
		if rel := math.Abs(fd-an) / math.Max(math.Abs(fd), 1e-3); rel > 2e-3 {
			t.Errorf("%s: input %d: analytic %.6g, finite difference %.6g (relative error %.2g)", name, i, an, fd, rel)
		}
	}
}

func TestRMSNormGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	rows, C := 7, 24
	x, w := randn(r, rows*C, 1), randn(r, C, 1)
	out, rstd := make([]float32, rows*C), make([]float32, rows)
	f := func() []float32 { RMSNormForward(out, rstd, x, w, rows, C, 1e-5, 2); return out }
	R := randn(r, rows*C, 1)
	f()
	dx, dw := make([]float32, rows*C), make([]float32, C)
	RMSNormBackward(dx, dw, R, x, w, rstd, rows, C, 2)
	checkGrad(t, "rmsnorm", r, [][]float32{x, w}, [][]float32{dx, dw}, f, R)
	// The forward itself: x / rms(x) ⊙ w.
	var ms float64
	for _, v := range x[:C] {
		ms += float64(v) * float64(v) / float64(C)
	}
	f()
	if want := float64(x[3]) / math.Sqrt(ms+1e-5) * float64(w[3]); math.Abs(float64(out[3])-want) > 1e-5 {
		t.Fatalf("rmsnorm out %g, want %g", out[3], want)
	}
}

func TestRopeGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	N, T, heads, D := 2, 5, 3, 8
	rope := NewRope(T, D, 10000)
	x := randn(r, N*T*heads*D, 1)
	out := make([]float32, len(x))
	f := func() []float32 { copy(out, x); rope.Forward(out, N*T, heads, 2); return out }
	R := randn(r, len(x), 1)
	dx := append([]float32(nil), R...)
	rope.Backward(dx, N*T, heads, 2)
	checkGrad(t, "rope", r, [][]float32{x}, [][]float32{dx}, f, R)
	// Position t, pair i rotates by t/θ^(2i/D): check one element.
	f()
	row, hd, i := 1*T+3, 2, 1 // sequence 1, position 3
	a := 3 / math.Pow(10000, float64(2*i)/float64(D))
	x1, x2 := float64(x[row*heads*D+hd*D+i]), float64(x[row*heads*D+hd*D+D/2+i])
	if want := x1*math.Cos(a) - x2*math.Sin(a); math.Abs(float64(out[row*heads*D+hd*D+i])-want) > 1e-5 {
		t.Fatalf("rope out %g, want %g", out[row*heads*D+hd*D+i], want)
	}
}

func TestSwiGLUGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	n := 50
	g, u := randn(r, n, 2), randn(r, n, 1)
	out := make([]float32, n)
	f := func() []float32 { SwiGLUForward(out, g, u, 2); return out }
	R := randn(r, n, 1)
	dg, du := make([]float32, n), make([]float32, n)
	SwiGLUBackward(dg, du, R, g, u, 2)
	checkGrad(t, "swiglu", r, [][]float32{g, u}, [][]float32{dg, du}, f, R)
}

func TestLinearLoRAGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	rows, in, out, rank := 6, 10, 7, 3
	l := &Linear{In: in, Out: out,
		W:    &Param{W: randn(r, out*in, 0.3), G: make([]float32, out*in)},
		Bias: &Param{W: randn(r, out, 0.3), G: make([]float32, out)},
		LoRA: &LoRA{Rank: rank, Scale: 2,
			A: &Param{W: randn(r, rank*in, 0.3), G: make([]float32, rank*in)},
			B: &Param{W: randn(r, out*rank, 0.3), G: make([]float32, out*rank)}}}
	x := randn(r, rows*in, 1)
	y, xa := make([]float32, rows*out), make([]float32, rows*rank)
	f := func() []float32 { l.Forward(y, x, xa, rows, 2); return y }
	R := randn(r, rows*out, 1)
	f()
	dx := make([]float32, rows*in)
	l.Backward(dx, R, x, xa, rows, 2)
	checkGrad(t, "linear", r, [][]float32{x, l.W.W, l.Bias.W, l.LoRA.A.W, l.LoRA.B.W},
		[][]float32{dx, l.W.G, l.Bias.G, l.LoRA.A.G, l.LoRA.B.G}, f, R)
	// Merged weights give the same output.
	w := append([]float32(nil), l.W.W...)
	l.LoRA.MergeInto(w, out, in)
	merged := &Linear{In: in, Out: out, W: &Param{W: w}, Bias: l.Bias}
	y2 := make([]float32, rows*out)
	merged.Forward(y2, x, nil, rows, 1)
	f()
	for i := range y {
		if math.Abs(float64(y[i]-y2[i])) > 1e-5 {
			t.Fatalf("merged LoRA output %g, want %g", y2[i], y[i])
		}
	}
}

// naiveAttention is the textbook float64 attention over the same layout:
// repeated key/value heads, an explicit mask (lengths, causality, the key
// mask), softmax, padded rows zero.
func naiveAttention(s Attention, q, k, v []float32, lens []int) []float64 {
	N, T, H, KV, D := s.N, s.T, s.H, s.KV, s.D
	out := make([]float64, N*T*H*D)
	for n := 0; n < N; n++ {
		for h := 0; h < H; h++ {
			g := h / (H / KV)
			for i := 0; i < lens[n]; i++ {
				sc := make([]float64, T)
				mx := math.Inf(-1)
				for j := 0; j < T; j++ {
					if j >= lens[n] || (s.Causal && j > i) || (s.KeyMask != nil && s.KeyMask[n*s.T+j] == 0) {
						sc[j] = math.Inf(-1)
						continue
					}
					for d := 0; d < D; d++ {
						sc[j] += float64(q[(n*T+i)*H*D+h*D+d]) * float64(k[(n*T+j)*KV*D+g*D+d])
					}
					sc[j] /= math.Sqrt(float64(D))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := 0; d < D; d++ {
						if sc[j] > 0 {
							out[(n*T+i)*H*D+h*D+d] += sc[j] / sum * float64(v[(n*T+j)*KV*D+g*D+d])
						}
					}
				}
			}
		}
	}
	return out
}

func TestAttentionMatchesNaiveAndGrad(t *testing.T) {
	// holes in the key mask (BERT's), within the lengths 6, 4, 2
	holes := []float32{1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0}
	for _, c := range []struct {
		causal bool
		kv     int
		mask   []float32
	}{{true, 2, nil}, {false, 2, nil}, {false, 4, holes}, {true, 2, holes}} {
		causal := c.causal
		r := rand.New(rand.NewPCG(5, 5))
		s := Attention{N: 3, T: 6, H: 4, KV: c.kv, D: 8, Causal: causal, KeyMask: c.mask}
		lens := []int{6, 4, 2}
		q := randn(r, s.N*s.T*s.H*s.D, 1)
		k := randn(r, s.N*s.T*s.KV*s.D, 1)
		v := randn(r, s.N*s.T*s.KV*s.D, 1)
		out, att := make([]float32, len(q)), make([]float32, s.AttSize())
		f := func() []float32 { s.Forward(out, att, q, k, v, lens, 2); return out }
		f()
		want := naiveAttention(s, q, k, v, lens)
		for i := range want {
			if math.Abs(float64(out[i])-want[i]) > 1e-5 {
				t.Fatalf("causal=%v kv=%d mask=%v: attention out[%d] = %g, naive %g", causal, c.kv, c.mask != nil, i, out[i], want[i])
			}
		}
		R := randn(r, len(out), 1)
		for n := range lens { // padded rows are not an output
			clear(R[(n*s.T+lens[n])*s.H*s.D : (n+1)*s.T*s.H*s.D])
		}
		dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
		s.Backward(dq, dk, dv, R, att, q, k, v, lens, 2)
		checkGrad(t, "attention", r, [][]float32{q, k, v}, [][]float32{dq, dk, dv}, f, R)
	}
}

func TestGELUGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	n := 60
	x := randn(r, n, 2)
	out := make([]float32, n)
	f := func() []float32 { GELUForward(out, x, 2); return out }
	R := randn(r, n, 1)
	dx := make([]float32, n)
	GELUBackward(dx, R, x, 2)
	checkGrad(t, "gelu", r, [][]float32{x}, [][]float32{dx}, f, R)
	f()
	if want := 1.5 * 0.5 * (1 + math.Erf(1.5/math.Sqrt2)); math.Abs(float64(geluOne(1.5))-want) > 1e-6 {
		t.Fatalf("gelu(1.5) = %g, want %g", geluOne(1.5), want)
	}
}

func geluOne(v float32) float32 {
	o := make([]float32, 1)
	GELUForward(o, []float32{v}, 1)
	return o[0]
}
