package cuda

import (
	"errors"
	"fmt"
	"math"
)

// paramSet is a device model's trainable parameters by name: the part of
// train.DeviceEncoder that Encoder and Decoder share (gradients, clipping,
// AdamW, checkpoint state).
type paramSet struct {
	dev    *Device
	Params []*Param
	byName map[string]*Param
}

// newParam uploads w as a trained parameter named name: its weights and a
// zeroed gradient (the AdamW moments come with its first step). free
// releases all of it.
func newParam(d *Device, name string, w []float32, noDecay bool) (*Param, error) {
	p := &Param{Name: name, N: len(w), NoDecay: noDecay}
	var err error
	if p.W, err = d.NewF32(w); err != nil {
		return nil, err
	}
	if p.G, err = d.AllocF32(len(w)); err == nil {
		err = p.G.Zero()
	}
	if err != nil {
		return nil, errors.Join(err, p.free())
	}
	return p, nil
}

// free releases a parameter's weights, gradient and moments.
func (p *Param) free() error { return errors.Join(p.W.Free(), p.G.Free(), p.m.Free(), p.v.Free()) }

// add makes p one of the set's trained parameters.
func (e *paramSet) add(p *Param) {
	e.Params = append(e.Params, p)
	e.byName[p.Name] = p
}

// named is the parameter called name, or an error naming it.
func (e *paramSet) named(name string) (*Param, error) {
	if p := e.byName[name]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("cuda: no parameter %s", name)
}

// Param returns the parameter with the given name, or nil.
func (e *paramSet) Param(name string) *Param { return e.byName[name] }

// ZeroGrad clears every gradient.
func (e *paramSet) ZeroGrad() error {
	for _, p := range e.Params {
		if err := p.G.Zero(); err != nil {
			return err
		}
	}
	return nil
}

// ClipGradNorm scales the gradients so their global L2 norm is at most
// maxNorm (≤ 0: only measure), returning the norm before clipping, as
// train.ClipGradNorm.
func (e *paramSet) ClipGradNorm(maxNorm float64) (float64, error) {
	s, err := e.GradSumSquares()
	if err != nil {
		return 0, err
	}
	norm := math.Sqrt(s)
	if maxNorm > 0 && norm > maxNorm {
		return norm, e.ScaleGrads(float32(maxNorm / (norm + 1e-6)))
	}
	return norm, nil
}

// GradSumSquares is Σ g² over every parameter's gradient.
func (e *paramSet) GradSumSquares() (float64, error) {
	gs := make([]*Buffer, len(e.Params))
	for i, p := range e.Params {
		gs[i] = p.G
	}
	return e.dev.SumSquares(gs...)
}

// ScaleGrads multiplies every gradient by c.
func (e *paramSet) ScaleGrads(c float32) error {
	for _, p := range e.Params {
		if err := e.dev.Scale(p.G, c, p.N); err != nil {
			return err
		}
	}
	return nil
}

// AdamW applies one train.AdamW step (step counts from 1) with learning
// rate lr to every parameter.
func (e *paramSet) AdamW(lr, weightDecay, beta1, beta2, eps float64, step int) error {
	for _, p := range e.Params {
		if p.m == nil {
			var err error
			if p.m, err = e.dev.AllocF32(p.N); err != nil {
				return err
			}
			if p.v, err = e.dev.AllocF32(p.N); err != nil {
				return err
			}
			if err := errors.Join(p.m.Zero(), p.v.Zero()); err != nil {
				return err
			}
		}
		s := AdamWScalars(beta1, beta2, eps, weightDecay, lr, step, p.NoDecay)
		if err := e.dev.AdamW(p.W, p.G, p.m, p.v, nil, p.N, s); err != nil {
			return fmt.Errorf("cuda: adamw %s: %w", p.Name, err)
		}
	}
	return nil
}

// Has reports whether the encoder holds the named weight.
func (e *paramSet) Has(name string) bool { return e.byName[name] != nil }

// State copies a weight and, after the first AdamW step, its moments into
// w, m and v; m and v nil: the weight only (train.DeviceEncoder).
func (e *paramSet) State(name string, w, m, v []float32) (bool, error) {
	p, err := e.named(name)
	if err != nil {
		return false, err
	}
	only := m == nil && v == nil
	if len(w) != p.N || !only && (len(m) != p.N || len(v) != p.N) {
		return false, fmt.Errorf("cuda: %s: host slices of %d, %d and %d values, want %d", name, len(w), len(m), len(v), p.N)
	}
	if err := Download(w, p.W); err != nil {
		return false, err
	}
	if p.m == nil || only {
		return false, nil
	}
	return true, errors.Join(Download(m, p.m), Download(v, p.v))
}

// AddGrad adds g, computed on the host, to the named parameter's gradient
// (train.DeviceEncoder).
func (e *paramSet) AddGrad(name string, g []float32) error {
	p, err := e.named(name)
	if err != nil {
		return err
	}
	if len(g) != p.N {
		return fmt.Errorf("cuda: %s: a gradient of %d values, want %d", name, len(g), p.N)
	}
	s, err := e.dev.scratchF32(p.N)
	if err != nil {
		return err
	}
	if err := Upload(s, g); err != nil {
		return err
	}
	return e.dev.AddInPlace(p.G, s, p.N)
}

// SetState replaces a weight and, when m is not nil, its moments
// (train.DeviceEncoder; resuming from a checkpoint).
func (e *paramSet) SetState(name string, w, m, v []float32) error {
	p, err := e.named(name)
	if err != nil {
		return err
	}
	if err := p.Upload(w); err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	return p.SetMoments(e.dev, m, v)
}
