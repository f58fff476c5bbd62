package cuda

import (
	"errors"
)

// The decoder's ops (internal/ops: rmsnorm.go, rope.go, swiglu.go, embedding.go), the same
// arguments as there with device buffers; attention is
// AttentionGQAForward/Backward.

// GatherRows writes table's rows ids[r] (rows of C, V of them) into out.
func (d *Device) GatherRows(out, ids, table *Buffer, rows, C, V int) error {
	const op = "gather rows"
	if err := errors.Join(dims(op, "rows", rows, "C", C, "V", V), need(op, "out", out, rows*C), need(op, "ids", ids, rows),
		need(op, "table", table, V*C)); err != nil {
		return err
	}
	return d.launch("gather_rows", elementwise(int64(rows)*int64(C)), block1(256), 0,
		ptr(out), ptr(ids), ptr(table), i32(rows), i32(C), i32(V))
}

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

// ScatterAddRows adds d's rows to dtable's rows ids[r] (rows of C, V of
// them), skipping rows whose mask is zero: GatherRows' backward.
func (d *Device) ScatterAddRows(dtable, dd, ids, mask *Buffer, rows, C, V int) error {
	const op = "scatter add rows"
	if err := errors.Join(dims(op, "rows", rows, "C", C, "V", V), need(op, "dtable", dtable, V*C), need(op, "d", dd, rows*C),
		need(op, "ids", ids, rows), need(op, "mask", mask, rows)); err != nil {
		return err
	}
	return d.launch("scatter_add_rows", elementwise(int64(rows)*int64(C)), block1(256), 0,
		ptr(dtable), ptr(dd), ptr(ids), ptr(mask), i32(rows), i32(C), i32(V))
}

// Rope rotates x in place (ops.Rope: sign 1 Forward, −1 Backward): rows of
// heads×D, row r at position r % T; cos and sin are T×D/2 tables.
func (d *Device) Rope(x, cos, sin *Buffer, rows, T, heads, D int, sign float32) error {
	const op = "rope"
	if err := errors.Join(dims(op, "rows", rows, "T", T, "heads", heads, "D", D), need(op, "x", x, rows*heads*D),
		need(op, "cos", cos, T*D/2), need(op, "sin", sin, T*D/2)); err != nil {
		return err
	}
	return d.launch("rope_apply", elementwise(int64(rows)*int64(heads)*int64(D/2)), block1(256), 0,
		ptr(x), ptr(cos), ptr(sin), i32(rows), i32(T), i32(heads), i32(D), f32(sign))
}

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
