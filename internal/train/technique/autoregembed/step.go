package autoregembed

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

// texts returns each sequence's real tokens, without the EOS the tokenizer
// appended and without a leading Prefix (the BOS it added).
func (t *Technique) texts(b *decoder.Batch) ([][]int32, error) {
	if b == nil {
		return nil, errors.New("autoregembed: no token batch")
	}
	if b.N <= 0 || b.T <= 0 || len(b.IDs) != b.N*b.T || len(b.Mask) != b.N*b.T {
		return nil, fmt.Errorf("autoregembed: token batch N=%d T=%d does not match its %d ids and %d mask values", b.N, b.T, len(b.IDs), len(b.Mask))
	}
	V := t.enc.Cfg.VocabSize
	out := make([][]int32, b.N)
	for n := range out {
		L := 0
		for p := 0; p < b.T; p++ {
			switch mk := b.Mask[n*b.T+p]; {
			case mk == 1 && L == p:
				L++
			case mk == 0:
			default:
				return nil, fmt.Errorf("autoregembed: sequence %d, position %d: mask %g (want ones then zeros: right padding only)", n, p, mk)
			}
		}
		ids := b.IDs[n*b.T : n*b.T+L]
		for p, id := range ids {
			if id < 0 || int(id) >= V {
				return nil, fmt.Errorf("autoregembed: token id %d at sequence %d, position %d outside the vocabulary of %d", id, n, p, V)
			}
		}
		if L > 0 && ids[L-1] == t.cfg.EOS {
			ids = ids[:L-1]
		}
		// The BOS the tokenizer adds is Prefix, which encoderBatch puts
		// back: keep one.
		if p := t.cfg.Prefix; len(p) > 0 && len(ids) >= len(p) && slices.Equal(ids[:len(p)], p) {
			ids = ids[len(p):]
		}
		out[n] = ids
	}
	return out, nil
}

// encBatch is an encoder input: Prefix + text + instruction + memory.
type encBatch struct {
	b    *decoder.Batch
	ids  []int32 // N×T: each row's token id, −1 at memory and padding rows
	lens []int   // real rows per sequence, memory included
}

// encoderBatch builds the encoder input of texts[n] + instrs[n] for model m
// (its embedding table) with memory tokens mem.
func (t *Technique) encoderBatch(m *decoder.Model, mem []float32, texts, instrs [][]int32) *encBatch {
	N, k, C := len(texts), t.k, t.C
	eb := &encBatch{lens: make([]int, N)}
	T := 0
	for n := range texts {
		eb.lens[n] = len(t.cfg.Prefix) + len(texts[n]) + len(instrs[n]) + k
		T = max(T, eb.lens[n])
	}
	b := &decoder.Batch{N: N, T: T, Mask: make([]float32, N*T), Inputs: make([]float32, N*T*C)}
	eb.ids = make([]int32, N*T)
	for i := range eb.ids {
		eb.ids[i] = -1
	}
	for n := range texts {
		row := eb.ids[n*T:]
		p := copy(row, t.cfg.Prefix)
		p += copy(row[p:], texts[n])
		p += copy(row[p:], instrs[n])
		m.EmbedTokens(b.Inputs[n*T*C:(n*T+p)*C], row[:p])
		copy(b.Inputs[(n*T+p)*C:(n*T+p+k)*C], mem)
		for q := 0; q < eb.lens[n]; q++ {
			b.Mask[n*T+q] = 1
		}
	}
	eb.b = b
	return eb
}

// compressed gathers each sequence's k memory-token hidden states: N×k×C.
func (eb *encBatch) compressed(a *decoder.Acts, k, C int) []float32 {
	T := eb.b.T
	out := make([]float32, eb.b.N*k*C)
	for n, L := range eb.lens {
		copy(out[n*k*C:(n+1)*k*C], a.Hidden[(n*T+L-k)*C:(n*T+L)*C])
	}
	return out
}

// backward runs the encoder's backward from dE (N×k×C, the gradient of its
// compressed vectors): memory rows to the memory tokens, token rows to the
// embedding table.
func (t *Technique) encoderBackward(eb *encBatch, a *decoder.Acts, dE []float32) error {
	k, C, T := t.k, t.C, eb.b.T
	dh := make([]float32, eb.b.N*T*C)
	for n, L := range eb.lens {
		copy(dh[(n*T+L-k)*C:(n*T+L)*C], dE[n*k*C:(n+1)*k*C])
	}
	if err := t.on(t.enc).Backward(a, dh); err != nil {
		return fmt.Errorf("autoregembed: encoder backward: %w", err)
	}
	g := t.mem.G
	for n, L := range eb.lens {
		for i, v := range a.DInputs[(n*T+L-k)*C : (n*T+L)*C] {
			g[i] += v
		}
	}
	t.enc.EmbedBackward(eb.ids, a.DInputs)
	return nil
}

// decBatch is a frozen-decoder input: k compressed vectors, then the
// target's tokens; targets are the next token at each row (the target's
// tokens and EOS from row k−1 on), −1 elsewhere.
type decBatch struct {
	b       *decoder.Batch
	targets []int32
}

// decoderBatch pairs sequence n's compressed vectors e[src[n]] (e is
// ·×k×C) with target tgts[n].
func (t *Technique) decoderBatch(e []float32, src []int, tgts [][]int32) *decBatch {
	N, k, C := len(tgts), t.k, t.C
	T := 0
	for _, d := range tgts {
		T = max(T, k+len(d))
	}
	b := &decoder.Batch{N: N, T: T, Mask: make([]float32, N*T), Inputs: make([]float32, N*T*C)}
	db := &decBatch{b: b, targets: make([]int32, N*T)}
	for i := range db.targets {
		db.targets[i] = -1
	}
	for n, d := range tgts {
		copy(b.Inputs[n*T*C:(n*T+k)*C], e[src[n]*k*C:(src[n]+1)*k*C])
		t.dec.EmbedTokens(b.Inputs[(n*T+k)*C:(n*T+k+len(d))*C], d)
		for q := 0; q < k+len(d); q++ {
			b.Mask[n*T+q] = 1
		}
		tg := db.targets[n*T+k-1:]
		copy(tg, d)
		tg[len(d)] = t.cfg.EOS
	}
	return db
}

// dInputs gathers the gradient of each decoder sequence's compressed
// vectors, adding sequence n's into dE[src[n]].
func (t *Technique) dInputs(dE []float32, a *decoder.Acts, db *decBatch, src []int) {
	k, C, T := t.k, t.C, db.b.T
	for n, s := range src {
		d := dE[s*k*C : (s+1)*k*C]
		for i, v := range a.DInputs[n*T*C : (n*T+k)*C] {
			d[i] += v
		}
	}
}

// logLikelihoods returns each decoder sequence's log p(target | e) (summed
// over its tokens and EOS) and number of target tokens, and leaves in dh
// (N×T×C, when not nil) ∂(−log p / count)/∂Hidden per sequence, to be
// scaled by the caller.
func (t *Technique) logLikelihoods(a *decoder.Acts, db *decBatch, dh []float32) (lp []float64, count []int) {
	N, T, C := db.b.N, db.b.T, t.C
	W := t.dec.LMHead().W
	V := t.dec.Cfg.VocabSize
	lp, count = make([]float64, N), make([]int, N)
	scratch := dh == nil
	if scratch {
		dh = make([]float32, T*C)
	}
	for n := 0; n < N; n++ {
		d := dh
		if !scratch {
			d = dh[n*T*C : (n+1)*T*C]
		}
		mean, c := ops.LMHeadCrossEntropy(d, nil, a.Hidden[n*T*C:(n+1)*T*C], W, db.targets[n*T:(n+1)*T], T, C, V, 1, t.threads())
		lp[n], count[n] = -mean*float64(c), c
	}
	return lp, count
}

func (t *Technique) threads() int {
	if t.enc.Threads > 0 {
		return t.enc.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// Grad adds scale × the gradient of the stage's loss to the params and
// returns the unscaled loss.
func (t *Technique) Grad(s *decoder.Step, cc objective.ContrastiveConfig, scale float32) (objective.Loss, error) {
	loss, _, err := t.run(s, cc, scale, true)
	return objective.Loss{Value: loss}, err
}

// Eval is Grad's forward only: the loss and, in stage 2, how many queries
// give their positive the highest per-token log-likelihood.
func (t *Technique) Eval(s *decoder.Step, cc objective.ContrastiveConfig) (objective.Loss, error) {
	loss, correct, err := t.run(s, cc, 0, false)
	return objective.Loss{Value: loss, Correct: correct}, err
}

func (t *Technique) run(s *decoder.Step, cc objective.ContrastiveConfig, scale float32, grad bool) (float64, int, error) {
	if s == nil {
		return 0, 0, errors.New("autoregembed: no step")
	}
	if s.Q < 1 || s.G < 1 {
		return 0, 0, fmt.Errorf("autoregembed: step of %d queries with groups of %d documents (want at least 1 and 1)", s.Q, s.G)
	}
	if t.cfg.Stage == Alignment && s.G < 2 {
		return 0, 0, fmt.Errorf("autoregembed: the alignment stage needs a negative per query: groups of %d documents (want at least 2)", s.G)
	}
	if cc.DistillWeight > 0 {
		return 0, 0, fmt.Errorf("autoregembed: distillation weight %g: AutoRegEmbed has no teacher term (want 0)", cc.DistillWeight)
	}
	texts, err := t.texts(s.Batch)
	if err != nil {
		return 0, 0, err
	}
	if len(texts) != s.Q+s.Q*s.G {
		return 0, 0, fmt.Errorf("autoregembed: step has %d sequences, want %d queries + %d documents", len(texts), s.Q, s.Q*s.G)
	}
	if t.cfg.Stage == Compression {
		loss, err := t.compression(texts, s.Q, s.G, scale, grad)
		return loss, 0, err
	}
	tau := t.cfg.Temperature
	if tau == 0 {
		tau = cc.Temperature
	}
	if tau == 0 {
		tau = 0.05
	}
	if tau < 0 || math.IsNaN(tau) {
		return 0, 0, fmt.Errorf("autoregembed: temperature %g (want a positive number)", tau)
	}
	return t.alignment(texts, s.Q, s.G, tau, scale, grad)
}

func repeat(x []int32, n int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// compression is stage 1: query i compressed, its group's first document
// reconstructed; the mean token cross-entropy.
func (t *Technique) compression(texts [][]int32, Q, G int, scale float32, grad bool) (float64, error) {
	eb := t.encoderBatch(t.enc, t.mem.W, texts[:Q], repeat(t.cfg.QueryInstruction, Q))
	ea, err := t.on(t.enc).Forward(eb.b)
	if err != nil {
		return 0, fmt.Errorf("autoregembed: encoder: %w", err)
	}
	e := eb.compressed(ea, t.k, t.C)
	src, tgts := make([]int, Q), make([][]int32, Q)
	for i := range src {
		src[i], tgts[i] = i, texts[Q+i*G]
	}
	db := t.decoderBatch(e, src, tgts)
	da, err := t.on(t.dec).Forward(db.b)
	if err != nil {
		return 0, fmt.Errorf("autoregembed: frozen decoder: %w", err)
	}
	dh := make([]float32, len(da.Hidden))
	loss, _ := ops.LMHeadCrossEntropy(dh, nil, da.Hidden, t.dec.LMHead().W, db.targets, db.b.N*db.b.T, t.C, t.dec.Cfg.VocabSize, scale, t.threads())
	if !grad || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, nil
	}
	if err := t.on(t.dec).Backward(da, dh); err != nil {
		return 0, fmt.Errorf("autoregembed: frozen decoder backward: %w", err)
	}
	dE := make([]float32, len(e))
	t.dInputs(dE, da, db, src)
	return loss, t.encoderBackward(eb, ea, dE)
}

// alignment is stage 2 (Eq. 2).
func (t *Technique) alignment(texts [][]int32, Q, G int, tau float64, scale float32, grad bool) (float64, int, error) {
	queries, docs := texts[:Q], texts[Q:]
	// Decoder sequences: query i with each of its group's documents, then
	// each positive from its own compression.
	src, tgts := make([]int, Q*G+Q), make([][]int32, Q*G+Q)
	for i := 0; i < Q; i++ {
		for j := 0; j < G; j++ {
			src[i*G+j], tgts[i*G+j] = i, docs[i*G+j]
		}
		src[Q*G+i], tgts[Q*G+i] = Q+i, docs[i*G]
	}

	// The reference: log p_ref(d | e_ref(q, I_next)), before E's forward
	// and D's main forward (their workspaces).
	t.ref.Causal = t.enc.Causal
	rb := t.encoderBatch(t.ref, t.refMem, queries, repeat(t.cfg.QueryInstruction, Q))
	ra, err := t.on(t.ref).Forward(rb.b)
	if err != nil {
		return 0, 0, fmt.Errorf("autoregembed: reference encoder: %w", err)
	}
	rdb := t.decoderBatch(rb.compressed(ra, t.k, t.C), src[:Q*G], tgts[:Q*G])
	rda, err := t.on(t.dec).Forward(rdb.b)
	if err != nil {
		return 0, 0, fmt.Errorf("autoregembed: frozen decoder: %w", err)
	}
	ref, _ := t.logLikelihoods(rda, rdb, nil)

	// E over the queries (I_next) and the positives (I_self).
	in := make([][]int32, 2*Q)
	instrs := make([][]int32, 2*Q)
	for i := 0; i < Q; i++ {
		in[i], instrs[i] = queries[i], t.cfg.QueryInstruction
		in[Q+i], instrs[Q+i] = docs[i*G], t.cfg.DocInstruction
	}
	eb := t.encoderBatch(t.enc, t.mem.W, in, instrs)
	ea, err := t.on(t.enc).Forward(eb.b)
	if err != nil {
		return 0, 0, fmt.Errorf("autoregembed: encoder: %w", err)
	}
	e := eb.compressed(ea, t.k, t.C)
	db := t.decoderBatch(e, src, tgts)
	da, err := t.on(t.dec).Forward(db.b)
	if err != nil {
		return 0, 0, fmt.Errorf("autoregembed: frozen decoder: %w", err)
	}
	var dh []float32
	if grad {
		dh = make([]float32, len(da.Hidden))
	}
	lp, count := t.logLikelihoods(da, db, dh)

	correct := 0
	for i := 0; i < Q; i++ {
		best := true
		pos := lp[i*G] / float64(count[i*G])
		for j := 1; j < G; j++ {
			best = best && pos > lp[i*G+j]/float64(count[i*G+j])
		}
		if best {
			correct++
		}
	}
	loss, dq, ds := alignmentLoss(lp[:Q*G], lp[Q*G:], ref, Q, G, t.cfg.Beta, tau)
	if !grad || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, correct, nil
	}
	// ∂loss/∂Hidden of sequence n is ∂loss/∂lp_n · (−count_n) · dh_n.
	T, C := db.b.T, t.C
	for n := range lp {
		g := dq
		m := n
		if n >= Q*G {
			g, m = ds, n-Q*G
		}
		f := float32(-g[m] * float64(count[n]) * float64(scale))
		for i := range dh[n*T*C : (n+1)*T*C] {
			dh[n*T*C+i] *= f
		}
	}
	if err := t.on(t.dec).Backward(da, dh); err != nil {
		return 0, 0, fmt.Errorf("autoregembed: frozen decoder backward: %w", err)
	}
	dE := make([]float32, len(e))
	t.dInputs(dE, da, db, src)
	return loss, correct, t.encoderBackward(eb, ea, dE)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// alignmentLoss is Eq. 2 over lpq (Q×G: log p(d_ij | e_q_i), the positive
// first), lps (Q: log p(d+_i | e_d+_i)) and ref (Q×G: log p_ref(d_ij |
// e_q_i)): the mean loss and its gradients with respect to lpq and lps.
func alignmentLoss(lpq, lps, ref []float64, Q, G int, beta, tau float64) (loss float64, dq, ds []float64) {
	dq, ds = make([]float64, Q*G), make([]float64, Q)
	z := make([]float64, G)
	for i := 0; i < Q; i++ {
		// z_0 = S1/τ, z_j = S2_j/τ; loss_i = logsumexp(z) − z_0.
		x := lpq[i*G] - lps[i]
		s1 := sigmoid(beta * math.Abs(x))
		z[0] = -s1 / tau
		s2 := make([]float64, G)
		for j := 1; j < G; j++ {
			y := (lpq[i*G] - ref[i*G]) - (lpq[i*G+j] - ref[i*G+j])
			s2[j] = sigmoid(beta * y)
			z[j] = -s2[j] / tau
		}
		mx := z[0]
		for _, v := range z {
			mx = math.Max(mx, v)
		}
		var sum float64
		for _, v := range z {
			sum += math.Exp(v - mx)
		}
		loss += mx + math.Log(sum) - z[0]
		// ∂loss_i/∂z_j = softmax_j − [j = 0]; then through S1 and S2.
		inv := 1 / float64(Q)
		p0 := math.Exp(z[0]-mx) / sum
		sign := 1.0
		if x < 0 {
			sign = -1
		}
		dz0 := (p0 - 1) * inv
		dx := dz0 * (-1 / tau) * s1 * (1 - s1) * beta * sign
		dq[i*G] += dx
		ds[i] -= dx
		for j := 1; j < G; j++ {
			pj := math.Exp(z[j]-mx) / sum
			dy := pj * inv * (-1 / tau) * s2[j] * (1 - s2[j]) * beta
			dq[i*G] += dy
			dq[i*G+j] -= dy
		}
	}
	return loss / float64(Q), dq, ds
}
