package cuda

import (
	"errors"
	"fmt"
	"math"
)

// Attention (internal/ops/attention.go): BERT's multi-head and the
// decoders' grouped-query attention around cuBLAS's batched products, the
// softmax, the head permutations and the key/value head repeat on the
// device; kernels/attention.cu.

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
