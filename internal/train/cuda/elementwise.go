package cuda

import (
	"errors"
	"fmt"
)

// Elementwise ops (internal/ops/ops.go's AddInPlace): adds, scaling, and
// the float32 ⇄ bf16 casts of the bf16 products; kernels/elementwise.cu.

// AddInPlace: dst[i] += src[i] for i < n.
func (d *Device) AddInPlace(dst, src *Buffer, n int) error {
	const op = "add"
	if err := errors.Join(need(op, "dst", dst, n), need(op, "src", src, n)); err != nil {
		return err
	}
	return d.launch("add_inplace", elementwise(int64(n)), block1(256), 0, ptr(dst), ptr(src), i64(n))
}

// Scale: x[i] *= s for i < n (gradient clipping, loss scaling).
func (d *Device) Scale(x *Buffer, s float32, n int) error {
	if err := need("scale", "x", x, n); err != nil {
		return err
	}
	return d.launch("scale_inplace", elementwise(int64(n)), block1(256), 0, ptr(x), f32(s), i64(n))
}

// CastToBF16 rounds n float32s of in to bfloat16 (nearest even) in out,
// which holds 2-byte elements.
func (d *Device) CastToBF16(out, in *Buffer, n int) error {
	if out == nil || out.size < 2*n {
		return fmt.Errorf("cuda: cast to bf16: out must hold %d bf16 elements", n)
	}
	if err := need("cast to bf16", "in", in, n); err != nil {
		return err
	}
	return d.launch("cast_f32_bf16", elementwise(int64(n)), block1(256), 0, ptr(out), ptr(in), i64(n))
}

// CastFromBF16 widens n bfloat16s of in to float32 in out.
func (d *Device) CastFromBF16(out, in *Buffer, n int) error {
	if in == nil || in.size < 2*n {
		return fmt.Errorf("cuda: cast from bf16: in must hold %d bf16 elements", n)
	}
	if err := need("cast from bf16", "out", out, n); err != nil {
		return err
	}
	return d.launch("cast_bf16_f32", elementwise(int64(n)), block1(256), 0, ptr(out), ptr(in), i64(n))
}
