package train

import (
	"math"
	"testing"
)

// Two AdamW steps on hand-computed values (torch.optim.AdamW's formula).
func TestAdamWMatchesFormula(t *testing.T) {
	p := &Param{Name: "w", W: []float32{1, -2}, G: []float32{0.5, -0.1}}
	b := &Param{Name: "b", W: []float32{1}, G: []float32{0.5}, NoDecay: true}
	fz := &Param{Name: "f", W: []float32{3}, G: []float32{1}, Frozen: true}
	o := NewAdamW(0.1)
	lr := 0.01
	o.Update([]*Param{p, b, fz}, lr)
	// Step 1: m̂ = g, v̂ = g², so the update is lr·g/(|g|+eps) after decay.
	want := func(w, g float64, decay float64) float64 { return w*(1-lr*decay) - lr*g/(math.Abs(g)+1e-8) }
	check := func(got float32, want float64) {
		t.Helper()
		if math.Abs(float64(got)-want) > 1e-6 {
			t.Fatalf("got %.8f want %.8f", got, want)
		}
	}
	check(p.W[0], want(1, 0.5, 0.1))
	check(p.W[1], want(-2, -0.1, 0.1))
	check(b.W[0], want(1, 0.5, 0))
	check(fz.W[0], 3)
	// Step 2 with a new gradient: moments by the formula.
	w0 := float64(p.W[0])
	p.G[0] = 0.2
	o.Update([]*Param{p}, lr)
	m := 0.9*0.1*0.5 + 0.1*0.2
	v := 0.999*0.001*0.25 + 0.001*0.04
	mh, vh := m/(1-0.81), v/(1-0.999*0.999)
	check(p.W[0], w0*(1-lr*0.1)-lr*mh/(math.Sqrt(vh)+1e-8))
}

func TestClipAndSchedule(t *testing.T) {
	p := &Param{G: []float32{3, 4}}
	if n := ClipGradNorm([]*Param{p}, 1); n != 5 {
		t.Fatalf("norm %g want 5", n)
	}
	if math.Abs(float64(p.G[0])-0.6) > 1e-6 || math.Abs(float64(p.G[1])-0.8) > 1e-6 {
		t.Fatalf("clipped to %v", p.G)
	}
	for _, c := range []struct {
		step int
		want float64
	}{{0, 0.25}, {3, 1}, {4, 1}, {8, 0.5}, {12, 0}} {
		if got := LinearSchedule(c.step, 4, 12, 1); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("step %d: lr %g want %g", c.step, got, c.want)
		}
	}
}
