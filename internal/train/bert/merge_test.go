package bert

import (
	"strings"
	"testing"
)

// Interpolate gives base + alpha·(m − base) weight by weight, refuses
// what it cannot mix without changing m, and leaves base alone.
func TestInterpolate(t *testing.T) {
	cfg := tinyConfig()
	m, err := NewModel(cfg, RandomTensors(cfg, false, 0.1, 1), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	base, err := NewModel(cfg, RandomTensors(cfg, false, 0.1, 2), false, 2)
	if err != nil {
		t.Fatal(err)
	}
	trained, start := m.Tensors(), base.Tensors()
	if err := m.Interpolate(base, 0.25); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params {
		tw, bw := trained[p.Name].Data, start[p.Name].Data
		for i, w := range p.W {
			if want := bw[i] + 0.25*(tw[i]-bw[i]); w != want {
				t.Fatalf("%s[%d] = %v, want %v", p.Name, i, w, want)
			}
		}
		for i, w := range base.Param(p.Name).W {
			if w != bw[i] {
				t.Fatalf("the base's %s changed", p.Name)
			}
		}
	}
	for _, alpha := range []float32{-0.1, 1.5} {
		if err := m.Interpolate(base, alpha); err == nil || !strings.Contains(err.Error(), "alpha") {
			t.Fatalf("alpha %v: %v", alpha, err)
		}
	}
	other := *cfg
	other.IntermediateSize *= 2
	wide, err := NewModel(&other, RandomTensors(&other, false, 0.1, 3), false, 3)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Tensors()
	if err := m.Interpolate(wide, 0.5); err == nil || !strings.Contains(err.Error(), "intermediate.dense.weight") {
		t.Fatalf("a base of another shape: %v", err)
	}
	for name, tn := range m.Tensors() {
		for i, w := range tn.Data {
			if w != before[name].Data[i] {
				t.Fatalf("a refused interpolation changed %s", name)
			}
		}
	}
	if err := m.Interpolate(nil, 0.5); err == nil {
		t.Fatal("a nil base was accepted")
	}
}
