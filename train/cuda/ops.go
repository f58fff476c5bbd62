package cuda

import (
	"errors"
	"fmt"
	"math"
)

// The ops mirror the CPU's (internal/ops, train/objective, train's AdamW): same arguments
// (device buffers in place of slices), same layouts, same math. Each checks
// its sizes and returns an error rather than launching out of bounds.
// Ops queue work and return; Sync or a Download waits for it.

// need checks that b holds n 4-byte elements; what names it in the error.
func need(opName, what string, b *Buffer, n int) error {
	if b == nil {
		return fmt.Errorf("cuda: %s: %s is nil", opName, what)
	}
	if b.size < 4*n {
		return fmt.Errorf("cuda: %s: %s holds %d elements, needs %d", opName, what, b.size/4, n)
	}
	return nil
}

// needOpt is need for a buffer that may be nil (frozen parameters, unsaved
// statistics).
func needOpt(opName, what string, b *Buffer, n int) error {
	if b == nil {
		return nil
	}
	return need(opName, what, b, n)
}

func blocks(n int64, per int) uint32 {
	return uint32((n + int64(per) - 1) / int64(per))
}

func grid1(n uint32) [3]uint32      { return [3]uint32{n, 1, 1} }
func block1(n uint32) [3]uint32     { return [3]uint32{n, 1, 1} }
func elementwise(n int64) [3]uint32 { return grid1(blocks(n, 256)) }

// EmbeddingForward: out[n,t] = wte[ids[n,t]] + wpe[t] + wtt[types[n,t]]
// for N sequences of T positions, width C; V and TV are the word and
// token-type vocabulary sizes (an id out of range gives a NaN row).
func (d *Device) EmbeddingForward(out, ids, types, wte, wpe, wtt *Buffer, N, T, C, V, TV int) error {
	const op = "embedding forward"
	if err := errors.Join(dims(op, "N", N, "T", T, "C", C, "V", V, "TV", TV),
		need(op, "out", out, N*T*C), need(op, "ids", ids, N*T), need(op, "types", types, N*T),
		need(op, "wte", wte, V*C), need(op, "wpe", wpe, T*C), need(op, "wtt", wtt, TV*C)); err != nil {
		return err
	}
	return d.launch("embedding_forward", grid1(uint32(N*T)), block1(128), 0,
		ptr(out), ptr(ids), ptr(types), ptr(wte), ptr(wpe), ptr(wtt), i32(N*T), i32(T), i32(C), i32(V), i32(TV))
}

// EmbeddingBackward adds dout into the rows of the tables that are not nil.
func (d *Device) EmbeddingBackward(dwte, dwpe, dwtt, dout, ids, types *Buffer, N, T, C, V, TV int) error {
	const op = "embedding backward"
	if err := errors.Join(dims(op, "N", N, "T", T, "C", C, "V", V, "TV", TV),
		need(op, "dout", dout, N*T*C), need(op, "ids", ids, N*T), need(op, "types", types, N*T),
		needOpt(op, "dwte", dwte, V*C), needOpt(op, "dwpe", dwpe, T*C), needOpt(op, "dwtt", dwtt, TV*C)); err != nil {
		return err
	}
	if dwte == nil && dwpe == nil && dwtt == nil {
		return nil
	}
	return d.launch("embedding_backward", grid1(uint32(N*T)), block1(128), 0,
		ptr(dwte), ptr(dwpe), ptr(dwtt), ptr(dout), ptr(ids), ptr(types), i32(N*T), i32(T), i32(C), i32(V), i32(TV))
}

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

// BiasAdd adds b (cols) to every row of out (rows×cols).
func (d *Device) BiasAdd(out, b *Buffer, rows, cols int) error {
	const op = "bias add"
	if err := errors.Join(dims(op, "rows", rows, "cols", cols), need(op, "out", out, rows*cols), need(op, "b", b, cols)); err != nil {
		return err
	}
	return d.launch("bias_add", elementwise(int64(rows)*int64(cols)), block1(256), 0, ptr(out), ptr(b), i32(rows), i32(cols))
}

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

// AttentionForward is BERT's attention: AttentionGQAForward with as many
// key/value heads as query heads (C/H wide), bidirectional.
func (d *Device) AttentionForward(ctx, att, q, k, v, mask, lens *Buffer, N, T, C, H int) error {
	if H <= 0 || C%H != 0 {
		return fmt.Errorf("cuda: attention forward: %d heads do not divide width %d", H, C)
	}
	return d.AttentionGQAForward(ctx, att, q, k, v, mask, lens, Attn{N: N, T: T, H: H, KV: H, D: C / H})
}

// AttentionBackward adds to dq, dk, dv the gradient given dctx, with att,
// q, k, v from AttentionForward.
func (d *Device) AttentionBackward(dq, dk, dv, dctx, att, q, k, v *Buffer, N, T, C, H int) error {
	if H <= 0 || C%H != 0 {
		return fmt.Errorf("cuda: attention backward: %d heads do not divide width %d", H, C)
	}
	return d.AttentionGQABackward(dq, dk, dv, dctx, att, q, k, v, Attn{N: N, T: T, H: H, KV: H, D: C / H})
}

// Attn is an attention's shape (internal/ops.Attention): N sequences of T
// positions, H query heads and KV key/value heads (H a multiple of KV;
// query head h reads key/value head h/(H/KV)), each D wide; Causal lets
// position i see keys 0..i only.
type Attn struct {
	N, T, H, KV, D int
	Causal         bool
}

// AttentionGQAForward: for each sequence and query head, P =
// softmax(Q_h·K_gᵀ/√D + mask), ctx_h = P·V_g. q and ctx are N·T rows of
// H·D, k and v N·T rows of KV·D; att receives P, N·H blocks of T×T (rows at
// or past lens[n] zero, masked and, when causal, future keys 0).
func (d *Device) AttentionGQAForward(ctx, att, q, k, v, mask, lens *Buffer, s Attn) error {
	const op = "attention forward"
	N, T, H, KV, D := s.N, s.T, s.H, s.KV, s.D
	NTQ, NTK := N*T*H*D, N*T*KV*D
	if err := attnChecks(op, s, need(op, "ctx", ctx, NTQ), need(op, "att", att, N*H*T*T),
		need(op, "q", q, NTQ), need(op, "k", k, NTK), need(op, "v", v, NTK),
		need(op, "mask", mask, N*T), need(op, "lens", lens, N)); err != nil {
		return err
	}
	sc, err := d.scratchF32(4*NTQ + 2*NTK)
	if err != nil {
		return err
	}
	p := splitF32(sc, NTQ, NTQ, NTQ, NTQ, NTK, NTK)
	qp, kp, vp, ctxp, kg, vg := p[0], p[1], p[2], p[3], p[4], p[5]
	if err := d.permute(qp, q, N, T, H, D); err != nil {
		return err
	}
	if err := errors.Join(d.kvHeads(kp, kg, k, s), d.kvHeads(vp, vg, v, s)); err != nil {
		return err
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	B, Thd, TT := N*H, T*D, T*T
	if err := d.GemmBatched(false, true, T, T, D, scale, qp, D, Thd, kp, D, Thd, 0, att, T, TT, B); err != nil {
		return err
	}
	if err := d.launch("attn_softmax_forward", grid1(blocks(int64(B)*int64(T), 8)), block1(256), 0,
		ptr(att), ptr(mask), ptr(lens), i32(N), i32(H), i32(T), i32(b2i(s.Causal))); err != nil {
		return err
	}
	if err := d.GemmBatched(false, false, T, D, T, 1, att, T, TT, vp, D, Thd, 0, ctxp, D, Thd, B); err != nil {
		return err
	}
	return d.unpermute(ctx, ctxp, N, T, H, D, false)
}

// AttentionGQABackward adds to dq, dk and dv the gradient given dctx, with
// att, q, k, v from AttentionGQAForward (a group's query heads add into
// their shared key/value head).
func (d *Device) AttentionGQABackward(dq, dk, dv, dctx, att, q, k, v *Buffer, s Attn) error {
	const op = "attention backward"
	N, T, H, KV, D := s.N, s.T, s.H, s.KV, s.D
	NTQ, NTK := N*T*H*D, N*T*KV*D
	if err := attnChecks(op, s, need(op, "dq", dq, NTQ), need(op, "dk", dk, NTK), need(op, "dv", dv, NTK),
		need(op, "dctx", dctx, NTQ), need(op, "att", att, N*H*T*T),
		need(op, "q", q, NTQ), need(op, "k", k, NTK), need(op, "v", v, NTK)); err != nil {
		return err
	}
	rep := H / KV
	B, Thd, TT := N*H, T*D, T*T
	sc, err := d.scratchF32(7*NTQ + B*TT + 2*NTK)
	if err != nil {
		return err
	}
	p := splitF32(sc, NTQ, NTQ, NTQ, NTQ, NTQ, NTQ, NTQ, B*TT, NTK, NTK)
	qp, kp, vp, dctxp, dqp, dkp, dvp, dP, kg, vg := p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]
	for _, pr := range [][2]*Buffer{{qp, q}, {dctxp, dctx}} {
		if err := d.permute(pr[0], pr[1], N, T, H, D); err != nil {
			return err
		}
	}
	if err := errors.Join(d.kvHeads(kp, kg, k, s), d.kvHeads(vp, vg, v, s)); err != nil {
		return err
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	// dP = dctx·Vᵀ; dV = Pᵀ·dctx
	if err := d.GemmBatched(false, true, T, T, D, 1, dctxp, D, Thd, vp, D, Thd, 0, dP, T, TT, B); err != nil {
		return err
	}
	if err := d.GemmBatched(true, false, T, D, T, 1, att, T, TT, dctxp, D, Thd, 0, dvp, D, Thd, B); err != nil {
		return err
	}
	if err := d.launch("attn_softmax_backward", grid1(blocks(int64(B)*int64(T), 8)), block1(256), 0,
		ptr(dP), ptr(att), i64(B*T), i32(T)); err != nil {
		return err
	}
	// S = scale·Q·Kᵀ: dQ = scale·dS·K; dK = scale·dSᵀ·Q
	if err := d.GemmBatched(false, false, T, D, T, scale, dP, T, TT, kp, D, Thd, 0, dqp, D, Thd, B); err != nil {
		return err
	}
	if err := d.GemmBatched(true, false, T, D, T, scale, dP, T, TT, qp, D, Thd, 0, dkp, D, Thd, B); err != nil {
		return err
	}
	if err := d.unpermute(dq, dqp, N, T, H, D, true); err != nil {
		return err
	}
	for _, pr := range [][3]*Buffer{{dk, dkp, kg}, {dv, dvp, vg}} {
		src := pr[1]
		if rep > 1 { // the group's heads summed, into the freed [N,KV,T,D] buffer
			if err := d.launch("reduce_kv", elementwise(int64(NTK)), block1(256), 0,
				ptr(pr[2]), ptr(pr[1]), i32(N), i32(KV), i32(rep), i32(T*D)); err != nil {
				return err
			}
			src = pr[2]
		}
		if err := d.unpermute(pr[0], src, N, T, KV, D, true); err != nil {
			return err
		}
	}
	return nil
}

// kvHeads writes key or value rows x (N·T rows of KV·D) to dst in the
// batched layout [N, H, T, D], each key/value head repeated for its H/KV
// query heads (through grouped, [N, KV, T, D], when there are several).
func (d *Device) kvHeads(dst, grouped, x *Buffer, s Attn) error {
	rep := s.H / s.KV
	if rep == 1 {
		return d.permute(dst, x, s.N, s.T, s.KV, s.D)
	}
	if err := d.permute(grouped, x, s.N, s.T, s.KV, s.D); err != nil {
		return err
	}
	return d.launch("repeat_kv", elementwise(int64(s.N*s.H*s.T*s.D)), block1(256), 0,
		ptr(dst), ptr(grouped), i32(s.N), i32(s.KV), i32(rep), i32(s.T*s.D))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func attnChecks(op string, s Attn, errs ...error) error {
	if s.H <= 0 || s.KV <= 0 || s.H%s.KV != 0 {
		return fmt.Errorf("cuda: %s: %d query heads are not a multiple of %d key/value heads", op, s.H, s.KV)
	}
	if int64(s.N)*int64(s.H)*int64(s.T)*int64(s.T) > math.MaxInt32 {
		return fmt.Errorf("cuda: %s: %d×%d×%d×%d attention probabilities exceed 2³¹", op, s.N, s.H, s.T, s.T)
	}
	return errors.Join(append([]error{dims(op, "N", s.N, "T", s.T, "D", s.D)}, errs...)...)
}

func (d *Device) permute(dst, src *Buffer, N, T, H, hs int) error {
	return d.launch("permute_heads", elementwise(int64(N*T*H*hs)), block1(256), 0,
		ptr(dst), ptr(src), i32(N), i32(T), i32(H), i32(hs))
}

func (d *Device) unpermute(dst, src *Buffer, N, T, H, hs int, accumulate bool) error {
	acc := 0
	if accumulate {
		acc = 1
	}
	return d.launch("unpermute_heads", elementwise(int64(N*T*H*hs)), block1(256), 0,
		ptr(dst), ptr(src), i32(N), i32(T), i32(H), i32(hs), i32(acc))
}

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

// AdamWStep holds one AdamW step's scalars for one parameter.
type AdamWStep struct {
	Beta1, Beta2, Eps float32
	Decay             float32 // 1 − lr·weightDecay, or 1 for NoDecay params
	StepSize          float32 // lr / (1 − β1^step)
	InvSqrtBC2        float32 // 1 / √(1 − β2^step)
}

// AdamWScalars computes a step's scalars exactly as train.AdamW.Update
// does; step counts from 1 (the value of AdamW.Step after its increment).
func AdamWScalars(beta1, beta2, eps, weightDecay, lr float64, step int, noDecay bool) AdamWStep {
	bc1 := 1 - math.Pow(beta1, float64(step))
	bc2 := 1 - math.Pow(beta2, float64(step))
	decay := float32(1)
	if !noDecay {
		decay = float32(1 - lr*weightDecay)
	}
	return AdamWStep{Beta1: float32(beta1), Beta2: float32(beta2), Eps: float32(eps), Decay: decay,
		StepSize: float32(lr / bc1), InvSqrtBC2: float32(1 / math.Sqrt(bc2))}
}

// AdamW updates n float32 weights w in place from gradients g and moments
// m, v (zeroed before the first step). wbf, when not nil, receives the new
// weights in bfloat16 (2-byte elements).
func (d *Device) AdamW(w, g, m, v, wbf *Buffer, n int, s AdamWStep) error {
	const op = "adamw"
	if err := errors.Join(need(op, "w", w, n), need(op, "g", g, n), need(op, "m", m, n), need(op, "v", v, n)); err != nil {
		return err
	}
	if wbf != nil && wbf.size < 2*n {
		return fmt.Errorf("cuda: adamw: wbf must hold %d bf16 elements", n)
	}
	return d.launch("adamw_update", elementwise(int64(n)), block1(256), 0,
		ptr(w), ptr(g), ptr(m), ptr(v), ptr(wbf), i64(n),
		f32(s.Beta1), f32(s.Beta2), f32(s.Eps), f32(s.Decay), f32(s.StepSize), f32(s.InvSqrtBC2))
}

// SumSquares returns Σx² over every float32 of every buffer (the global
// gradient norm², for clipping): per-block sums on the device, added up in
// float64 on the host. It waits for the device.
func (d *Device) SumSquares(bufs ...*Buffer) (float64, error) {
	if err := d.usable(); err != nil {
		return 0, err
	}
	per := make([]int, len(bufs))
	total := 0
	for i, b := range bufs {
		if b == nil {
			return 0, fmt.Errorf("cuda: sum of squares: buffer %d is nil", i)
		}
		per[i] = int(min(max(blocks(int64(b.Len32()), 256*8), 1), 1024))
		total += per[i]
	}
	s, err := d.scratchF32(total)
	if err != nil {
		return 0, err
	}
	off := 0
	for i, b := range bufs {
		part := &Buffer{d: d, ptr: s.ptr + uint64(4*off), size: 4 * per[i]}
		if err := d.launch("sumsq_partial", grid1(uint32(per[i])), block1(256), 0, ptr(part), ptr(b), i64(b.Len32())); err != nil {
			return 0, err
		}
		off += per[i]
	}
	host := make([]float32, total)
	if err := Download(host, s); err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range host {
		sum += float64(v)
	}
	return sum, nil
}
