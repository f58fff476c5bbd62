package cuda

import (
	"errors"
	"fmt"
)

// Activations (internal/ops/activation.go): gelu (erf), gelu_new /
// gelu_pytorch_tanh, relu, and the cross-encoder pooler's tanh;
// kernels/activation.cu.

// actCode numbers the activations as kernels/elementwise.cu does.
func actCode(act string) (int, error) {
	switch act {
	case "gelu":
		return 0, nil
	case "gelu_new", "gelu_pytorch_tanh":
		return 1, nil
	case "relu":
		return 2, nil
	}
	return 0, fmt.Errorf("cuda: activation %q not supported (want gelu, gelu_new, gelu_pytorch_tanh or relu)", act)
}

// Activation: out = act(inp) over n elements.
func (d *Device) Activation(act string, out, inp *Buffer, n int) error {
	code, err := actCode(act)
	if err != nil {
		return err
	}
	if err := errors.Join(need("activation", "out", out, n), need("activation", "inp", inp, n)); err != nil {
		return err
	}
	return d.launch("act_forward", elementwise(int64(n)), block1(256), 0, ptr(out), ptr(inp), i64(n), i32(code))
}

// ActivationBackward turns g (∂loss/∂act(inp)) into ∂loss/∂inp in place.
func (d *Device) ActivationBackward(act string, g, inp *Buffer, n int) error {
	code, err := actCode(act)
	if err != nil {
		return err
	}
	if err := errors.Join(need("activation backward", "g", g, n), need("activation backward", "inp", inp, n)); err != nil {
		return err
	}
	return d.launch("act_backward", elementwise(int64(n)), block1(256), 0, ptr(g), ptr(inp), i64(n), i32(code))
}

// Tanh: out = tanh(inp) (the cross-encoder pooler).
func (d *Device) Tanh(out, inp *Buffer, n int) error {
	if err := errors.Join(need("tanh", "out", out, n), need("tanh", "inp", inp, n)); err != nil {
		return err
	}
	return d.launch("tanh_forward", elementwise(int64(n)), block1(256), 0, ptr(out), ptr(inp), i64(n))
}

// TanhBackward: g *= 1 − y², y being Tanh's output.
func (d *Device) TanhBackward(g, y *Buffer, n int) error {
	if err := errors.Join(need("tanh backward", "g", g, n), need("tanh backward", "y", y, n)); err != nil {
		return err
	}
	return d.launch("tanh_backward", elementwise(int64(n)), block1(256), 0, ptr(g), ptr(y), i64(n))
}
