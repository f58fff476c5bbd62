package cuda

import "errors"

// Rotary position embeddings (internal/ops/rope.go); kernels/rope.cu.

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
