// Package objective holds the trainer's losses, shared by every
// architecture (BERT encoders in package train, decoders in internal/train/decoder):
// InfoNCE over cosine similarities with in-batch negatives and a soft-label
// KL distillation term for bi-encoders, binary cross-entropy and listwise
// softmax for cross-encoders, each with an optional distillation term on a
// teacher's scores. Each returns the loss and its gradient with
// respect to its inputs, computed in float64; a loss never panics on well
// formed sizes (Q, G, C matching the slices) and reports a missing teacher
// as an error.
package objective

import (
	"fmt"
	"math"
	"slices"
)

// ContrastiveConfig sets the bi-encoder objective: InfoNCE over cosine
// similarity / Temperature, plus DistillWeight × KL(teacher ‖ student) over
// each query's own [positive, negatives] when teacher scores are given.
type ContrastiveConfig struct {
	Temperature float64 // student temperature τ (default 0.05)
	// InBatch adds every other query's positive and negatives as negatives.
	InBatch            bool
	DistillWeight      float64 // weight of the KL term (0: none)
	TeacherTemperature float64 // τ_t for the teacher's softmax (default 1)
}

// ContrastiveLoss computes the loss for Q queries (q, Q×C) each with a group
// of G documents (d, Q·G×C, the positive first then G−1 negatives), and the
// gradients with respect to q and d. teacher (Q×G raw teacher scores) may be
// nil when DistillWeight is 0.
func ContrastiveLoss(q, d []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (loss float64, dq, dd []float32, err error) {
	loss, _, dq, dd, err = ContrastiveLossParts(q, d, Q, G, C, teacher, cfg)
	return loss, dq, dd, err
}

// Parts are the terms of a contrastive loss: InfoNCE and the weighted
// distillation KL. Each is summed from the same values as the loss, so
// InfoNCE + Distill equals the loss up to the order of the additions.
type Parts struct {
	InfoNCE, Distill float64
}

// ContrastiveEval is a held-out evaluation of a batch's pooled embeddings e
// (laid out as for ContrastiveStep): the loss, and how many queries rank
// their positive above all of their own negatives (Correct).
func ContrastiveEval(e []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (loss float64, correct int, err error) {
	q, d := e[:Q*C], e[Q*C:]
	loss, _, _, err = ContrastiveLoss(q, d, Q, G, C, teacher, cfg)
	return loss, Correct(q, d, Q, G, C), err
}

// ContrastiveStep is what a model's contrastive backward pass starts from:
// the loss of a batch's pooled embeddings e (Q queries, then Q·G
// documents, each C wide), its parts, and ∂loss/∂e multiplied by scale (a
// gradient-accumulation step's share). de is nil when the loss is not
// finite: the caller then skips its backward pass, and the trainer the step.
func ContrastiveStep(e []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig, scale float32) (loss float64, parts Parts, de []float32, err error) {
	loss, parts, dq, dd, err := ContrastiveLossParts(e[:Q*C], e[Q*C:], Q, G, C, teacher, cfg)
	if err != nil || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, parts, nil, err
	}
	de = append(dq, dd...)
	for i := range de {
		de[i] *= scale
	}
	return loss, parts, de, nil
}

// ContrastiveLossParts is ContrastiveLoss, also returning the loss's parts.
func ContrastiveLossParts(q, d []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (loss float64, parts Parts, dq, dd []float32, err error) {
	tau := cfg.Temperature
	if tau <= 0 {
		tau = 0.05
	}
	tt := cfg.TeacherTemperature
	if tt <= 0 {
		tt = 1
	}
	if cfg.DistillWeight > 0 && len(teacher) != Q*G {
		return 0, parts, nil, nil, fmt.Errorf("objective: distillation needs %d teacher scores, got %d", Q*G, len(teacher))
	}
	D := Q * G
	qn, qnorm := NormalizeRows(q, Q, C)
	dn, dnorm := NormalizeRows(d, D, C)
	// s[i][j] = cos(q_i, d_j)/τ over the candidates of query i.
	s := make([]float64, Q*D)
	for i := 0; i < Q; i++ {
		for j := 0; j < D; j++ {
			if !cfg.InBatch && j/G != i {
				continue
			}
			s[i*D+j] = Dot(qn[i*C:i*C+C], dn[j*C:j*C+C]) / tau
		}
	}
	ds := make([]float64, Q*D) // ∂loss/∂s
	for i := 0; i < Q; i++ {
		lo, hi := 0, D
		if !cfg.InBatch {
			lo, hi = i*G, i*G+G
		}
		row := s[i*D+lo : i*D+hi]
		p := softmax64(row)
		target := i*G - lo
		nce := -math.Log(max(p[target], 1e-300)) / float64(Q)
		loss += nce
		parts.InfoNCE += nce
		for j := range p {
			g := p[j]
			if j == target {
				g--
			}
			ds[i*D+lo+j] += g / float64(Q)
		}
		if cfg.DistillWeight > 0 {
			kl, grad := distill(softmax64(s[i*D+i*G:i*D+i*G+G]), teacher[i*G:i*G+G], tt)
			for g := range grad {
				ds[i*D+i*G+g] += cfg.DistillWeight * grad[g] / float64(Q)
			}
			dt := cfg.DistillWeight * kl / float64(Q)
			loss += dt
			parts.Distill += dt
		}
	}
	// Back through s = qn·dnᵀ/τ and the normalisations.
	dqn := make([]float64, Q*C)
	ddn := make([]float64, D*C)
	for i := 0; i < Q; i++ {
		for j := 0; j < D; j++ {
			g := ds[i*D+j] / tau
			if g == 0 {
				continue
			}
			for c := 0; c < C; c++ {
				dqn[i*C+c] += g * float64(dn[j*C+c])
				ddn[j*C+c] += g * float64(qn[i*C+c])
			}
		}
	}
	dq = NormalizeRowsBackward(dqn, qn, qnorm, Q, C)
	dd = NormalizeRowsBackward(ddn, dn, dnorm, D, C)
	return loss, parts, dq, dd, nil
}

// NormalizeRows returns x with unit rows (norm clamped at 1e-12, as torch's
// F.normalize) and the norms.
func NormalizeRows(x []float32, rows, C int) ([]float32, []float64) {
	out := make([]float32, len(x))
	norms := make([]float64, rows)
	for r := 0; r < rows; r++ {
		v := x[r*C : r*C+C]
		n := math.Max(math.Sqrt(Dot(v, v)), 1e-12)
		norms[r] = n
		for c := range v {
			out[r*C+c] = float32(float64(v[c]) / n)
		}
	}
	return out, norms
}

// NormalizeRowsBackward maps ∂/∂(x/|x|) to ∂/∂x: (g − (g·x̂)x̂)/|x|.
func NormalizeRowsBackward(g []float64, xn []float32, norms []float64, rows, C int) []float32 {
	out := make([]float32, rows*C)
	for r := 0; r < rows; r++ {
		var proj float64
		for c := 0; c < C; c++ {
			proj += g[r*C+c] * float64(xn[r*C+c])
		}
		for c := 0; c < C; c++ {
			out[r*C+c] = float32((g[r*C+c] - proj*float64(xn[r*C+c])) / norms[r])
		}
	}
	return out
}

// BCELoss is binary cross-entropy on logits (one per pair) against labels
// in [0,1], averaged over pairs.
func BCELoss(logits, labels []float32) (loss float64, dlogits []float32) {
	n := float64(len(logits))
	dlogits = make([]float32, len(logits))
	for i, z := range logits {
		x, y := float64(z), float64(labels[i])
		// log(1+e^x) − y·x, written stably.
		loss += (math.Max(x, 0) - x*y + math.Log1p(math.Exp(-math.Abs(x)))) / n
		dlogits[i] = float32((sigmoid(x) - y) / n)
	}
	return loss, dlogits
}

// CrossConfig sets a cross-encoder objective's distillation term.
type CrossConfig struct {
	DistillWeight      float64 // weight of the teacher term (0: none)
	TeacherTemperature float64 // τ_t dividing the teacher's scores (default 1)
}

// CrossEncoderLoss is a cross-encoder objective over Q queries' G
// candidates (logits Q×G, the positive first): bce (labels per pair, in
// [0,1]) or listwise, plus, when cfg.DistillWeight > 0, a term on the
// teacher's raw scores (Q×G): for listwise KL(softmax(teacher/τ_t) ‖
// softmax(logits)) per query, averaged over queries, as the bi-encoder's
// distillation; for bce the binary cross-entropy against
// sigmoid(teacher/τ_t) per pair (the fused teacher's scores are
// calibrated log-odds, so this is its probability of relevance), averaged
// over pairs. parts.InfoNCE holds the label term, parts.Distill the
// weighted teacher term.
func CrossEncoderLoss(objective string, logits, labels []float32, Q, G int, teacher []float32, cfg CrossConfig) (loss float64, parts Parts, dlogits []float32, err error) {
	if len(logits) != Q*G {
		return 0, parts, nil, fmt.Errorf("objective: %d logits, want %d queries × %d", len(logits), Q, G)
	}
	if cfg.DistillWeight > 0 && len(teacher) != Q*G {
		return 0, parts, nil, fmt.Errorf("objective: distillation needs %d teacher scores, got %d", Q*G, len(teacher))
	}
	tt := cfg.TeacherTemperature
	if tt <= 0 {
		tt = 1
	}
	switch objective {
	case "bce":
		if len(labels) != Q*G {
			return 0, parts, nil, fmt.Errorf("objective: bce needs %d labels, got %d", Q*G, len(labels))
		}
		parts.InfoNCE, dlogits = BCELoss(logits, labels)
		if cfg.DistillWeight > 0 {
			soft := make([]float32, len(teacher))
			for i, t := range teacher {
				soft[i] = float32(sigmoid(float64(t) / tt))
			}
			l, d := BCELoss(logits, soft)
			parts.Distill = cfg.DistillWeight * l
			for i := range dlogits {
				dlogits[i] += float32(cfg.DistillWeight) * d[i]
			}
		}
	case "listwise":
		// One softmax serves both terms; each gradient entry is summed in
		// float64 and rounded once (the row's entries sum to zero).
		dlogits = make([]float32, Q*G)
		for i := 0; i < Q; i++ {
			s := make([]float64, G)
			for g := range G {
				s[g] = float64(logits[i*G+g])
			}
			ps := softmax64(s)
			parts.InfoNCE += -math.Log(max(ps[0], 1e-300)) / float64(Q)
			d := slices.Clone(ps)
			d[0]-- // the positive
			if cfg.DistillWeight > 0 {
				kl, grad := distill(ps, teacher[i*G:i*G+G], tt)
				for g := range grad {
					d[g] += cfg.DistillWeight * grad[g]
				}
				parts.Distill += cfg.DistillWeight * kl / float64(Q)
			}
			for g := range G {
				dlogits[i*G+g] = float32(d[g] / float64(Q))
			}
		}
	default:
		return 0, parts, nil, fmt.Errorf("objective: cross-encoder objective %q unknown (want bce or listwise)", objective)
	}
	return parts.InfoNCE + parts.Distill, parts, dlogits, nil
}

// distill is KL(softmax(teacher/τ_t) ‖ ps) over one query's candidates,
// ps the student's softmax, and its gradient with respect to the student's
// logits, ps − pt.
func distill(ps []float64, teacher []float32, tt float64) (kl float64, grad []float64) {
	t := make([]float64, len(teacher))
	for g := range t {
		t[g] = float64(teacher[g]) / tt
	}
	pt := softmax64(t)
	grad = make([]float64, len(pt))
	for g := range pt {
		if pt[g] > 0 {
			kl += pt[g] * (math.Log(pt[g]) - math.Log(max(ps[g], 1e-300)))
		}
		grad[g] = ps[g] - pt[g]
	}
	return kl, grad
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func softmax64(x []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	out := make([]float64, len(x))
	var s float64
	for i, v := range x {
		out[i] = math.Exp(v - mx)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// Dot is the float64 dot product of two float32 vectors.
func Dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// Correct counts the queries (q, Q×C) whose positive — the first of their
// own G documents in d (Q·G×C) — has a higher cosine similarity than every
// one of their own negatives.
func Correct(q, d []float32, Q, G, C int) int {
	qn, _ := NormalizeRows(q, Q, C)
	dn, _ := NormalizeRows(d, Q*G, C)
	n := 0
	for i := 0; i < Q; i++ {
		qi := qn[i*C : i*C+C]
		pos := Dot(qi, dn[i*G*C:i*G*C+C])
		best := true
		for g := 1; g < G; g++ {
			if Dot(qi, dn[(i*G+g)*C:(i*G+g)*C+C]) >= pos {
				best = false
			}
		}
		if best {
			n++
		}
	}
	return n
}
