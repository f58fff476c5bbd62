package bert

import "fmt"

// Interpolate moves m's weights towards base's: each weight becomes
// base + alpha·(m − base), the weight-space ensemble of a fine-tuned model
// and its start (WiSE-FT, Wortsman et al., 2022). alpha 1 keeps m, 0 gives
// base back. Both models are loaded checkpoints without LoRA factors (an
// exported checkpoint has them merged) and have the same parameters and
// shapes; m is changed only when they do, base never.
func (m *Model) Interpolate(base *Model, alpha float32) error {
	if m == nil || base == nil {
		return fmt.Errorf("bert: interpolate: nil model")
	}
	if !(alpha >= 0 && alpha <= 1) {
		return fmt.Errorf("bert: interpolate: alpha %v outside [0, 1]", alpha)
	}
	if m.lora != nil || base.lora != nil {
		return fmt.Errorf("bert: interpolate: a model has LoRA factors (interpolate exported checkpoints, whose factors are merged)")
	}
	if len(m.Params) != len(base.Params) {
		return fmt.Errorf("bert: interpolate: %d parameters against the base's %d", len(m.Params), len(base.Params))
	}
	for _, p := range m.Params {
		b := base.Param(p.Name)
		if b == nil {
			return fmt.Errorf("bert: interpolate: %s is not in the base model", p.Name)
		}
		if len(b.W) != len(p.W) {
			return fmt.Errorf("bert: interpolate: %s: shape %v against the base's %v", p.Name, p.Shape, b.Shape)
		}
	}
	for _, p := range m.Params {
		b := base.Param(p.Name)
		for i, w := range p.W {
			p.W[i] = b.W[i] + alpha*(w-b.W[i])
		}
	}
	return nil
}
