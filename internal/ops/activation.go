package ops

import "math"

// Activations (Hugging Face's hidden_act names).
const (
	ActGELU     = "gelu"              // exact: x·Φ(x)
	ActGELUTanh = "gelu_pytorch_tanh" // the tanh approximation (also "gelu_new")
	ActReLU     = "relu"
)

const (
	invSqrt2   = 0.70710678118654752440
	invSqrt2Pi = 0.39894228040143267794
	sqrt2OverP = 0.79788456080286535588 // √(2/π)
)

// ActivationForward writes act(inp) into out, elementwise; any other act
// (model.Config.Validate refuses it) leaves out alone.
func ActivationForward(act string, out, inp []float32, th int) {
	switch act {
	case ActGELU:
		GELUForward(out, inp, th)
	case ActGELUTanh, "gelu_new":
		elementwise(len(inp), th, func(lo, hi int) {
			for i, v := range inp[lo:hi] {
				u := float64(sqrt2OverP * (v + 0.044715*v*v*v))
				out[lo+i] = 0.5 * v * (1 + float32(math.Tanh(u)))
			}
		})
	case ActReLU:
		elementwise(len(inp), th, func(lo, hi int) {
			for i, v := range inp[lo:hi] {
				out[lo+i] = max(v, 0)
			}
		})
	}
}

// ActivationBackward adds to dinp the gradient given dout = ∂loss/∂act(inp).
func ActivationBackward(act string, dinp, dout, inp []float32, th int) {
	switch act {
	case ActGELU:
		GELUBackward(dinp, dout, inp, th)
	case ActGELUTanh, "gelu_new":
		elementwise(len(inp), th, func(lo, hi int) {
			for i, v := range inp[lo:hi] {
				t := float32(math.Tanh(float64(sqrt2OverP * (v + 0.044715*v*v*v))))
				dinp[lo+i] += dout[lo+i] * (0.5*(1+t) + 0.5*v*(1-t*t)*sqrt2OverP*(1+3*0.044715*v*v))
			}
		})
	case ActReLU:
		elementwise(len(inp), th, func(lo, hi int) {
			for i, v := range inp[lo:hi] {
				if v > 0 {
					dinp[lo+i] += dout[lo+i]
				}
			}
		})
	}
}

// GELUForward: out = x·Φ(x) = ½x(1 + erf(x/√2)) (PyTorch's exact GELU).
func GELUForward(out, x []float32, th int) {
	elementwise(len(out), th, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i]
			out[i] = 0.5 * v * (1 + Erf32(v*invSqrt2))
		}
	})
}

// GELUBackward adds to dx the gradient given dout: Φ(x) + x·φ(x).
func GELUBackward(dx, dout, x []float32, th int) {
	elementwise(len(dout), th, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i]
			cdf := 0.5 * (1 + Erf32(v*invSqrt2))
			pdf := invSqrt2Pi * Exp32(-0.5*v*v)
			dx[i] += dout[i] * (cdf + v*pdf)
		}
	})
}

// TanhForward: out = tanh(inp) (in float64, rounded to float32).
func TanhForward(out, inp []float32) {
	for i, v := range inp {
		out[i] = float32(math.Tanh(float64(v)))
	}
}

// TanhBackward adds to dinp the gradient given dout, from the forward's
// output y: dout·(1 − y²).
func TanhBackward(dinp, dout, y []float32) {
	for i, v := range y {
		dinp[i] += dout[i] * (1 - v*v)
	}
}
