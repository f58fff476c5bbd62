package cuda

import (
	"errors"
	"fmt"
)

// Pooling (internal/ops/pooling.go: mean, [CLS], last token) and the L2
// normalisation of the pooled rows (train/objective's NormalizeRows);
// kernels/pooling.cu.

// Pooling modes (the manifest's names, as train.PoolMean etc.).
func poolCode(mode string) (int, error) {
	switch mode {
	case "mean":
		return 0, nil
	case "cls":
		return 1, nil
	case "lasttoken":
		return 2, nil
	}
	return 0, fmt.Errorf("cuda: pooling %q not supported (want mean, cls or lasttoken)", mode)
}

// Pool turns hidden (N×T×C) into one vector per sequence in out (N×C).
func (d *Device) Pool(out, hidden, mask, lens *Buffer, N, T, C int, mode string) error {
	const op = "pool"
	code, err := poolCode(mode)
	if err != nil {
		return err
	}
	if err := errors.Join(dims(op, "N", N, "T", T, "C", C), need(op, "out", out, N*C), need(op, "hidden", hidden, N*T*C),
		need(op, "mask", mask, N*T), need(op, "lens", lens, N)); err != nil {
		return err
	}
	return d.launch("pool_forward", grid1(uint32(N)), block1(128), 0,
		ptr(out), ptr(hidden), ptr(mask), ptr(lens), i32(N), i32(T), i32(C), i32(code))
}

// PoolBackward adds to dhidden (N×T×C) the gradient given dpooled (N×C).
func (d *Device) PoolBackward(dhidden, dpooled, mask, lens *Buffer, N, T, C int, mode string) error {
	const op = "pool backward"
	code, err := poolCode(mode)
	if err != nil {
		return err
	}
	if err := errors.Join(dims(op, "N", N, "T", T, "C", C), need(op, "dhidden", dhidden, N*T*C), need(op, "dpooled", dpooled, N*C),
		need(op, "mask", mask, N*T), need(op, "lens", lens, N)); err != nil {
		return err
	}
	return d.launch("pool_backward", [3]uint32{uint32(N), uint32(T), 1}, block1(128), 0,
		ptr(dhidden), ptr(dpooled), ptr(mask), ptr(lens), i32(N), i32(T), i32(C), i32(code))
}

// L2Normalize writes x's rows divided by their norms (clamped at 1e-12,
// as torch's F.normalize) to out, and the norms to norms (may be nil).
func (d *Device) L2Normalize(out, norms, x *Buffer, rows, C int) error {
	const op = "l2 normalise"
	if err := errors.Join(dims(op, "rows", rows, "C", C), need(op, "out", out, rows*C), need(op, "x", x, rows*C),
		needOpt(op, "norms", norms, rows)); err != nil {
		return err
	}
	return d.launch("l2norm_forward", grid1(blocks(int64(rows), 8)), block1(256), 0, ptr(out), ptr(norms), ptr(x), i32(rows), i32(C))
}

// L2NormalizeBackward writes dx = (g − (g·x̂)x̂)/|x| given g = ∂loss/∂x̂,
// the normalised rows xn and the norms from L2Normalize.
func (d *Device) L2NormalizeBackward(dx, g, xn, norms *Buffer, rows, C int) error {
	const op = "l2 normalise backward"
	if err := errors.Join(dims(op, "rows", rows, "C", C), need(op, "dx", dx, rows*C), need(op, "g", g, rows*C),
		need(op, "xn", xn, rows*C), need(op, "norms", norms, rows)); err != nil {
		return err
	}
	return d.launch("l2norm_backward", grid1(blocks(int64(rows), 8)), block1(256), 0,
		ptr(dx), ptr(g), ptr(xn), ptr(norms), i32(rows), i32(C))
}
