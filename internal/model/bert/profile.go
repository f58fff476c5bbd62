package bert

import (
	"sync/atomic"
	"time"
)

// OpClass is a class of a forward's work, for a roofline (ForwardProfile).
type OpClass int

const (
	// GEMM is the layers' weight products (Q/K/V, attention output, the
	// MLP's two), their bias and dequantization included.
	GEMM OpClass = iota
	// Attention is the scores, softmax and weighted sum of every head.
	Attention
	// Elementwise is the rest: embeddings, LayerNorms, the activation,
	// quantizing the products' inputs, copies.
	Elementwise
	NumOpClasses
)

func (c OpClass) String() string {
	return [...]string{"gemm", "attention", "elementwise"}[c]
}

// Profile is what ForwardProfile adds up, per op class: the time spent
// and the arithmetic done (a multiply-add counts two ops; elementwise
// work counts the values it writes). With one thread the times are that
// thread's, exact by class; with more, a class's time is the wall time of
// its phases, the fused steps run inside a product (a residual and
// LayerNorm on each block of rows as it is done) moved from the product
// to Elementwise as measured on the goroutines that ran them.
type Profile struct {
	// Clock reads the time the profile counts (nil: wall time); a
	// benchmark on a shared machine passes its thread's CPU clock.
	Clock func() time.Duration
	Time  [NumOpClasses]time.Duration
	Ops   [NumOpClasses]float64
	inner atomic.Int64 // time of fused steps inside the current product
}

func (p *Profile) now() time.Duration {
	if p == nil {
		return 0
	}
	if p.Clock != nil {
		return p.Clock()
	}
	return time.Duration(time.Now().UnixNano())
}

// add counts the time since t0 and ops to class c.
func (p *Profile) add(c OpClass, t0 time.Duration, ops float64) {
	if p == nil {
		return
	}
	p.Time[c] += p.now() - t0
	p.Ops[c] += ops
}

// gemm counts a product begun at t0 (its fused steps, timed by fused,
// moved to Elementwise) and its ops.
func (p *Profile) gemm(t0 time.Duration, ops, fusedValues float64) {
	if p == nil {
		return
	}
	in := time.Duration(p.inner.Swap(0))
	p.Time[GEMM] += p.now() - t0 - in
	p.Ops[GEMM] += ops
	p.Time[Elementwise] += in
	p.Ops[Elementwise] += fusedValues
}

// fused wraps a product's then: its time is counted apart (gemm).
func (p *Profile) fused(then func(lo, hi int)) func(lo, hi int) {
	if p == nil || then == nil {
		return then
	}
	return func(lo, hi int) {
		t0 := p.now()
		then(lo, hi)
		p.inner.Add(int64(p.now() - t0))
	}
}

// Total is the time and ops of every class together.
func (p *Profile) Total() (time.Duration, float64) {
	var t time.Duration
	var ops float64
	for c := range NumOpClasses {
		t += p.Time[c]
		ops += p.Ops[c]
	}
	return t, ops
}
