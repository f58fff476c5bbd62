package cuda

import (
	"errors"
	"fmt"
	"math"
)

// The optimizer's ops (train/optim.go: AdamW, and the global gradient
// norm that clipping scales by); kernels/optim.cu.

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
