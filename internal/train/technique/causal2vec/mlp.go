package causal2vec

import (
	"math"
	"math/rand/v2"

	"github.com/anna-search/anna/internal/ops"
)

// Parameter names of the projector, as an nn.Sequential(Linear, GELU,
// Linear) named "causal2vec.mlp" would have them in a state dict.
const (
	W1Name = "causal2vec.mlp.0.weight" // d×k
	B1Name = "causal2vec.mlp.0.bias"   // d
	W2Name = "causal2vec.mlp.2.weight" // d×d
	B2Name = "causal2vec.mlp.2.bias"   // d
)

// mlp is the paper's Eq. (1), C = GELU(h·W1ᵀ (+ b1))·W2ᵀ (+ b2), with
// W1 d×k and W2 d×d; the GELU is the exact (erf) one, as nn.GELU() in the
// LLaVA-1.5 projector the paper cites.
type mlp struct {
	l1, l2   *ops.Linear
	params   []*ops.Param
	h, u, g  []float32 // the last forward's input (N×k), pre-activation, activation (N×d)
	rows, th int
}

// newMLP initialises as nn.Linear does (weights and biases uniform in
// ±1/√in).
func newMLP(k, d int, bias bool, seed uint64) *mlp {
	rng := rand.New(rand.NewPCG(seed, 0xc2f))
	m := &mlp{}
	param := func(name string, in int, noDecay bool, shape ...int) *ops.Param {
		n := 1
		for _, s := range shape {
			n *= s
		}
		p := &ops.Param{Name: name, Shape: shape, W: make([]float32, n), G: make([]float32, n), NoDecay: noDecay}
		bound := 1 / math.Sqrt(float64(in))
		for i := range p.W {
			p.W[i] = float32((2*rng.Float64() - 1) * bound)
		}
		m.params = append(m.params, p)
		return p
	}
	m.l1 = &ops.Linear{In: k, Out: d, W: param(W1Name, k, false, d, k)}
	if bias {
		m.l1.Bias = param(B1Name, k, true, d)
	}
	m.l2 = &ops.Linear{In: d, Out: d, W: param(W2Name, d, false, d, d)}
	if bias {
		m.l2.Bias = param(B2Name, d, true, d)
	}
	return m
}

// forward maps h (rows×k) to the contextual tokens (rows×d), keeping what
// backward needs.
func (m *mlp) forward(h []float32, rows, th int) []float32 {
	d := m.l1.Out
	m.h, m.rows, m.th = h, rows, th
	m.u, m.g = make([]float32, rows*d), make([]float32, rows*d)
	m.l1.Forward(m.u, h, nil, rows, th)
	ops.GELUForward(m.g, m.u, th)
	c := make([]float32, rows*d)
	m.l2.Forward(c, m.g, nil, rows, th)
	return c
}

// backward adds the parameters' gradients given dC (rows×d) and returns
// ∂/∂h (rows×k).
func (m *mlp) backward(dC []float32) []float32 {
	rows, th, d, k := m.rows, m.th, m.l1.Out, m.l1.In
	dg := make([]float32, rows*d)
	m.l2.Backward(dg, dC, m.g, nil, rows, th)
	du := make([]float32, rows*d)
	ops.GELUBackward(du, dg, m.u, th)
	dh := make([]float32, rows*k)
	m.l1.Backward(dh, du, m.h, nil, rows, th)
	return dh
}
