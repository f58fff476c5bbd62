package cuda

import "errors"

// RMSNorm (internal/ops/rmsnorm.go); kernels/rmsnorm.cu. The gain's
// gradient goes through LayerNorm's parameter backward with no mean.

// RMSNormForward: out[r] = x[r]/sqrt(mean(x[r]²)+eps)⊙w (ops.RMSNormForward);
// rstd receives each row's 1/sqrt(mean(x²)+eps).
func (d *Device) RMSNormForward(out, rstd, inp, w *Buffer, rows, C int, eps float32) error {
	const op = "rms norm forward"
	if err := errors.Join(dims(op, "rows", rows, "C", C), need(op, "out", out, rows*C), need(op, "rstd", rstd, rows),
		need(op, "inp", inp, rows*C), need(op, "w", w, C)); err != nil {
		return err
	}
	return d.launch("rmsnorm_forward", grid1(blocks(int64(rows), 8)), block1(256), 0,
		ptr(out), ptr(rstd), ptr(inp), ptr(w), i32(rows), i32(C), f32(eps))
}

// RMSNormBackward adds to dinp the input's gradient given dout, and to dw,
// when not nil (a trained gain), the gain's.
func (d *Device) RMSNormBackward(dinp, dw, dout, inp, w, rstd *Buffer, rows, C int) error {
	const op = "rms norm backward"
	if err := errors.Join(dims(op, "rows", rows, "C", C), need(op, "dinp", dinp, rows*C), need(op, "dout", dout, rows*C),
		need(op, "inp", inp, rows*C), need(op, "w", w, C), need(op, "rstd", rstd, rows), needOpt(op, "dw", dw, C)); err != nil {
		return err
	}
	if err := d.launch("rmsnorm_backward_input", grid1(blocks(int64(rows), 8)), block1(256), 0,
		ptr(dinp), ptr(dout), ptr(inp), ptr(w), ptr(rstd), i32(rows), i32(C)); err != nil {
		return err
	}
	return d.normParamsBackward(dw, nil, dout, inp, nil, rstd, rows, C)
}
