package cuda

import (
	"errors"
)

// linearLayer is ops.Linear on the device, shared by Encoder and Decoder:
// y = x·Wᵀ (+ scale·(x·Aᵀ)·Bᵀ with LoRA factors) (+ bias), W [out, in].
// gw and gb are W's and the bias's gradients when they train (nil when
// frozen); a and b the LoRA factors, or nil.
type linearLayer struct {
	w, bias *Buffer
	gw, gb  *Buffer
	a, b    *Param
	in, out int
	rank    int
	scale   float32
}

// linearForward writes l(x) for rows rows of x into out, and x·Aᵀ into xa
// (rows × rank) under LoRA, as ops.Linear.Forward.
func (d *Device) linearForward(l *linearLayer, out, x, xa *Buffer, rows int) error {
	if err := d.Gemm(false, true, rows, l.out, l.in, 1, x, l.in, l.w, l.in, 0, out, l.out); err != nil {
		return err
	}
	if l.a != nil {
		if err := d.Gemm(false, true, rows, l.rank, l.in, 1, x, l.in, l.a.W, l.in, 0, xa, l.rank); err != nil {
			return err
		}
		if err := d.Gemm(false, true, rows, l.out, l.rank, l.scale, xa, l.rank, l.b.W, l.rank, 1, out, l.out); err != nil {
			return err
		}
	}
	if l.bias != nil {
		return d.BiasAdd(out, l.bias, rows, l.out)
	}
	return nil
}

// linearBackward adds ∂/∂x to dx and the trained gradients given dout, in
// ops.Linear.Backward's order: dx += dout·W; dW += doutᵀ·x and
// db += Σ_rows dout when they train; under LoRA (xa from the forward, dxa
// rows × rank of scratch) dxa = s·dout·B, dB += s·doutᵀ·xa,
// dA += dxaᵀ·x, dx += dxa·A.
func (d *Device) linearBackward(l *linearLayer, dx, dout, x, xa, dxa *Buffer, rows int) error {
	steps := []func() error{
		func() error { return d.Gemm(false, false, rows, l.in, l.out, 1, dout, l.out, l.w, l.in, 1, dx, l.in) },
	}
	if l.gw != nil {
		steps = append(steps, func() error { return d.Gemm(true, false, l.out, l.in, rows, 1, dout, l.out, x, l.in, 1, l.gw, l.in) })
	}
	if l.gb != nil {
		steps = append(steps, func() error { return d.ColSumAdd(l.gb, dout, rows, l.out) })
	}
	if l.a != nil {
		r := l.rank
		steps = append(steps,
			func() error { return d.Gemm(false, false, rows, r, l.out, l.scale, dout, l.out, l.b.W, r, 0, dxa, r) },
			func() error { return d.Gemm(true, false, l.out, r, rows, l.scale, dout, l.out, xa, r, 1, l.b.G, r) },
			func() error { return d.Gemm(true, false, r, l.in, rows, 1, dxa, r, x, l.in, 1, l.a.G, l.in) },
			func() error { return d.Gemm(false, false, rows, l.in, r, 1, dxa, r, l.a.W, l.in, 1, dx, l.in) })
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// BiasAdd adds b (cols) to every row of out (rows×cols).
func (d *Device) BiasAdd(out, b *Buffer, rows, cols int) error {
	const op = "bias add"
	if err := errors.Join(dims(op, "rows", rows, "cols", cols), need(op, "out", out, rows*cols), need(op, "b", b, cols)); err != nil {
		return err
	}
	return d.launch("bias_add", elementwise(int64(rows)*int64(cols)), block1(256), 0, ptr(out), ptr(b), i32(rows), i32(cols))
}

// ColSumAdd adds the column sums of x (rows×cols) to dst: a bias gradient.
func (d *Device) ColSumAdd(dst, x *Buffer, rows, cols int) error {
	const op = "column sum"
	if err := errors.Join(dims(op, "rows", rows, "cols", cols), need(op, "dst", dst, cols), need(op, "x", x, rows*cols)); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	chunks, rpc := d.chunking(rows, cols)
	part, err := d.scratchF32(chunks * cols)
	if err != nil {
		return err
	}
	if err := d.launch("colsum_partial", [3]uint32{blocks(int64(cols), 32), uint32(chunks), 1}, [3]uint32{32, 8, 1}, 0,
		ptr(part), ptr(x), i32(rows), i32(cols), i32(rpc)); err != nil {
		return err
	}
	return d.launch("colsum_finish", grid1(blocks(int64(cols), 256)), block1(256), 0, ptr(dst), ptr(part), i32(chunks), i32(cols))
}

// chunking splits rows into chunks for the two-stage column sums: enough
// (column tile, chunk) blocks to fill the device twice over, and no chunk
// shorter than 64 rows.
func (d *Device) chunking(rows, cols int) (chunks, rowsPerChunk int) {
	tiles := (cols + 31) / 32
	chunks = max(1, (2*max(d.SMs, 1)+tiles-1)/tiles)
	chunks = min(chunks, max(1, rows/64))
	rowsPerChunk = (rows + chunks - 1) / chunks
	return (rows + rowsPerChunk - 1) / rowsPerChunk, rowsPerChunk
}
