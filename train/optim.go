package train

import "math"

// AdamW is torch.optim.AdamW: decoupled weight decay, bias-corrected moments.
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
	Step                           int // optimizer steps taken
	m, v                           map[*Param][]float32
}

// NewAdamW returns AdamW with the usual defaults (0.9, 0.999, 1e-8).
func NewAdamW(weightDecay float64) *AdamW {
	return &AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay, m: map[*Param][]float32{}, v: map[*Param][]float32{}}
}

// Update applies one step with learning rate lr to every unfrozen param.
func (o *AdamW) Update(params []*Param, lr float64) {
	o.Step++
	bc1 := 1 - math.Pow(o.Beta1, float64(o.Step))
	bc2 := 1 - math.Pow(o.Beta2, float64(o.Step))
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	for _, p := range params {
		if p.Frozen {
			continue
		}
		m, v := o.moments(p)
		decay := float32(1)
		if !p.NoDecay {
			decay = float32(1 - lr*o.WeightDecay)
		}
		stepSize := float32(lr / bc1)
		invSqrtBC2 := float32(1 / math.Sqrt(bc2))
		eps := float32(o.Eps)
		for i, g := range p.G {
			m[i] = b1*m[i] + (1-b1)*g
			v[i] = b2*v[i] + (1-b2)*g*g
			denom := float32(math.Sqrt(float64(v[i])))*invSqrtBC2 + eps
			p.W[i] = p.W[i]*decay - stepSize*m[i]/denom
		}
	}
}

func (o *AdamW) moments(p *Param) (m, v []float32) {
	m, ok := o.m[p]
	if !ok {
		m = make([]float32, len(p.W))
		v = make([]float32, len(p.W))
		o.m[p], o.v[p] = m, v
		return m, v
	}
	return m, o.v[p]
}

// ClipGradNorm scales all unfrozen gradients so their global L2 norm is at
// most maxNorm (torch.nn.utils.clip_grad_norm_), returning the norm before
// clipping. maxNorm ≤ 0 only measures.
func ClipGradNorm(params []*Param, maxNorm float64) float64 {
	norm := math.Sqrt(gradSumSquares(params))
	if c, ok := clipFactor(norm, maxNorm); ok {
		scaleGrads(params, c)
	}
	return norm
}

// gradSumSquares is Σ g² over the trainable params' gradients.
func gradSumSquares(params []*Param) float64 {
	var s float64
	for _, p := range params {
		if p.Frozen {
			continue
		}
		for _, g := range p.G {
			s += float64(g) * float64(g)
		}
	}
	return s
}

// clipFactor is the factor that brings a gradient of this norm to maxNorm,
// and whether it applies (maxNorm ≤ 0: never).
func clipFactor(norm, maxNorm float64) (float32, bool) {
	if maxNorm > 0 && norm > maxNorm {
		return float32(maxNorm / (norm + 1e-6)), true
	}
	return 1, false
}

func scaleGrads(params []*Param, c float32) {
	for _, p := range params {
		if p.Frozen {
			continue
		}
		for i := range p.G {
			p.G[i] *= c
		}
	}
}

// LinearSchedule is linear warm-up to the peak over warmup steps, then
// linear decay to zero at total steps. step counts from 0; the first step
// already gets peak/warmup (not zero, unlike transformers' scheduler).
func LinearSchedule(step, warmup, total int, peak float64) float64 {
	if step < warmup {
		return peak * float64(step+1) / float64(warmup)
	}
	if total <= warmup {
		return peak
	}
	return peak * math.Max(0, float64(total-step)/float64(total-warmup))
}
