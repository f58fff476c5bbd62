package cuda

import "errors"

// SwiGLU (internal/ops/swiglu.go); kernels/swiglu.cu.

// SwiGLUForward: out = silu(g)⊙u over n elements.
func (d *Device) SwiGLUForward(out, g, u *Buffer, n int) error {
	const op = "swiglu forward"
	if err := errors.Join(dims(op, "n", n), need(op, "out", out, n), need(op, "g", g, n), need(op, "u", u, n)); err != nil {
		return err
	}
	return d.launch("swiglu_forward", elementwise(int64(n)), block1(256), 0, ptr(out), ptr(g), ptr(u), i64(n))
}

// SwiGLUBackward adds to dg and du the gradient given dout.
func (d *Device) SwiGLUBackward(dg, du, dout, g, u *Buffer, n int) error {
	const op = "swiglu backward"
	if err := errors.Join(dims(op, "n", n), need(op, "dg", dg, n), need(op, "du", du, n), need(op, "dout", dout, n),
		need(op, "g", g, n), need(op, "u", u, n)); err != nil {
		return err
	}
	return d.launch("swiglu_backward", elementwise(int64(n)), block1(256), 0, ptr(dg), ptr(du), ptr(dout), ptr(g), ptr(u), i64(n))
}
