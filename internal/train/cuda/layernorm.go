package cuda

import (
	"errors"
)

// LayerNorm (internal/ops/layernorm.go); kernels/layernorm.cu. Its
// parameters' backward, shared with RMSNorm's gain, sums columns in two
// stages (linear.go's chunking).

// LayerNormForward normalises rows×C inp into out with gain w and bias b;
// mean and rstd (may be nil) receive the statistics the backward needs.
func (d *Device) LayerNormForward(out, mean, rstd, inp, w, b *Buffer, rows, C int, eps float32) error {
	const op = "layer norm forward"
	if err := errors.Join(dims(op, "rows", rows, "C", C), need(op, "out", out, rows*C), need(op, "inp", inp, rows*C),
		need(op, "w", w, C), need(op, "b", b, C), needOpt(op, "mean", mean, rows), needOpt(op, "rstd", rstd, rows)); err != nil {
		return err
	}
	return d.launch("layernorm_forward", grid1(blocks(int64(rows), 8)), block1(256), 0,
		ptr(out), ptr(mean), ptr(rstd), ptr(inp), ptr(w), ptr(b), i32(rows), i32(C), f32(eps))
}

// LayerNormBackward adds to dinp (and to dw, db when not nil) the gradient
// given dout.
func (d *Device) LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd *Buffer, rows, C int) error {
	const op = "layer norm backward"
	if err := errors.Join(dims(op, "rows", rows, "C", C), need(op, "dinp", dinp, rows*C), need(op, "dout", dout, rows*C),
		need(op, "inp", inp, rows*C), need(op, "w", w, C), need(op, "mean", mean, rows), need(op, "rstd", rstd, rows),
		needOpt(op, "dw", dw, C), needOpt(op, "db", db, C)); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	if err := d.launch("layernorm_backward_input", grid1(blocks(int64(rows), 8)), block1(256), 0,
		ptr(dinp), ptr(dout), ptr(inp), ptr(w), ptr(mean), ptr(rstd), i32(rows), i32(C)); err != nil {
		return err
	}
	return d.normParamsBackward(dw, db, dout, inp, mean, rstd, rows, C)
}

// normParamsBackward adds to dw (and db) when not nil a norm's gain (and
// bias) gradient given dout: Σ x̂·dout and Σ dout over the rows, with
// x̂ = (x − mean)·rstd, or x·rstd for RMSNorm (mean nil).
func (d *Device) normParamsBackward(dw, db, dout, inp, mean, rstd *Buffer, rows, C int) error {
	if (dw == nil && db == nil) || rows == 0 {
		return nil
	}
	chunks, rpc := d.chunking(rows, C)
	s, err := d.scratchF32(2 * chunks * C)
	if err != nil {
		return err
	}
	parts := splitF32(s, chunks*C, chunks*C)
	pdw, pdb := parts[0], parts[1]
	if dw == nil {
		pdw = nil
	}
	if db == nil {
		pdb = nil
	}
	if err := d.launch("layernorm_backward_params_partial", [3]uint32{blocks(int64(C), 32), uint32(chunks), 1}, [3]uint32{32, 8, 1}, 0,
		ptr(pdw), ptr(pdb), ptr(dout), ptr(inp), ptr(mean), ptr(rstd), i32(rows), i32(C), i32(rpc)); err != nil {
		return err
	}
	for _, p := range []struct{ dst, part *Buffer }{{dw, pdw}, {db, pdb}} {
		if p.dst == nil {
			continue
		}
		if err := d.launch("colsum_finish", grid1(blocks(int64(C), 256)), block1(256), 0,
			ptr(p.dst), ptr(p.part), i32(chunks), i32(C)); err != nil {
			return err
		}
	}
	return nil
}
