package mining

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/safe"
)

// The pipeline as teacher (LG-ANNA, paper 003 §4): candidates from BM25 and
// one or more dense models fused by reciprocal rank fusion, and soft labels
// from the strongest scorer available — a cross-encoder that helps, or else
// FusionTeacher, a calibrated fusion of the lexical and dense scores. RRF
// scores exist only for retrieved documents, so they cannot label a positive
// that retrieval missed; FusionTeacher's signals are defined for any
// (query, document) pair, which keeps the positive-aware margin meaningful.

// rrfK is the reciprocal rank fusion constant, the engine's.
const rrfK = 60

// FusedRetriever fuses the lists of several retrievers by reciprocal rank
// fusion (k = 60): the candidates of the pipeline teacher.
type FusedRetriever struct {
	Lists []Retriever
	// Depth is how many candidates each list contributes (default
	// max(100, k)).
	Depth int
}

// Name identifies the pipeline in the resume check.
func (r *FusedRetriever) Name() string {
	names := make([]string, len(r.Lists))
	for i, l := range r.Lists {
		names[i] = "retriever"
		if n, ok := l.(interface{ Name() string }); ok {
			names[i] = n.Name()
		}
	}
	return "rrf(" + strings.Join(names, ",") + ")"
}

func (r *FusedRetriever) Retrieve(ctx context.Context, q Query, k int) ([]Candidate, error) {
	ctx = safe.Ctx(ctx)
	depth := max(r.Depth, 100, k)
	lists := make([]fusion.List, len(r.Lists))
	byID := map[string]Candidate{}
	for i, l := range r.Lists {
		cs, err := l.Retrieve(ctx, q, depth)
		if err != nil {
			return nil, fmt.Errorf("list %d: %w", i, err)
		}
		lists[i].Name = fmt.Sprint(i)
		for _, c := range cs {
			if c.ID == "" {
				return nil, fmt.Errorf("list %d returned a candidate without an ID: fusion needs IDs", i)
			}
			lists[i].Hits = append(lists[i].Hits, fusion.Hit{ID: c.ID, Score: c.Score})
			if _, ok := byID[c.ID]; !ok {
				byID[c.ID] = c
			}
		}
	}
	fused := fusion.RRF(lists, rrfK)
	out := make([]Candidate, 0, min(k, len(fused)))
	for i, f := range fused {
		if i == k {
			break
		}
		c := byID[f.ID]
		c.Score, c.Rank = f.Score, i
		out = append(out, c)
	}
	return out, nil
}

// MaxNormalized divides a teacher's scores in each call by their largest
// value (scores ≤ 0 stay as they are when none is positive), so that BM25,
// whose scale grows with the query's length and rarity, becomes a fraction
// of the best-matching document's score in the call: positives and
// candidates of one query are scored in one call, so they share the scale.
type MaxNormalized struct{ Teacher }

func (t MaxNormalized) Name() string { return t.Teacher.Name() + "/max" }

func (t MaxNormalized) Score(ctx context.Context, q Query, docs []Doc) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	s, err := t.Teacher.Score(ctx, q, docs)
	if err != nil || len(s) == 0 {
		return s, err
	}
	if m := slices.Max(s); m > 0 {
		for i := range s {
			s[i] /= m
		}
	}
	return s, nil
}

// Calibration is a FusionTeacher's logistic model: the probability that a
// document is relevant is σ(b + Σ w_i·(s_i − mean_i)/std_i) over the
// signals' scores s_i. It is fitted on labelled units (Miner.Calibrate) and
// saved beside the output, so a resumed run labels with the same model.
type Calibration struct {
	Signals []string  `json:"signals"`
	Mean    []float64 `json:"mean"`
	Std     []float64 `json:"std"`
	Bias    float64   `json:"bias"`
	Weights []float64 `json:"weights"`
	// What it was fitted on, and how well it separates them there.
	Units     int     `json:"units"`
	Positives int     `json:"positives"`
	Negatives int     `json:"negatives"`
	LogLoss   float64 `json:"log_loss"`
	// AUC of each signal alone and of the fused score on the fitting rows.
	SignalAUC []float64 `json:"signal_auc"`
	AUC       float64   `json:"auc"`
}

// id is a short hash of the model, part of the teacher's name (and so of
// the resume check).
func (c *Calibration) id() string {
	b, _ := json.Marshal([]any{c.Signals, c.Mean, c.Std, c.Bias, c.Weights})
	h := sha256.Sum256(b)
	return fmt.Sprintf("%x", h[:4])
}

// FusionTeacher labels with a calibrated fusion of several teachers'
// scores, each defined for any (query, document) pair: typically BM25
// (MaxNormalized) and the cosines of one or more embedding models. Its
// score is the calibrated log-odds of relevance, b + Σ w_i·z_i
// (Calibration) — the same kind of number as a cross-encoder's logit, so a
// trainer's softmax over a query's scores (the distillation target) weighs
// each document by its odds of being relevant. It must be calibrated before
// it scores.
type FusionTeacher struct {
	Signals []Teacher
	Cal     *Calibration
}

func (t *FusionTeacher) signalNames() []string {
	n := make([]string, len(t.Signals))
	for i, s := range t.Signals {
		n[i] = s.Name()
	}
	return n
}

func (t *FusionTeacher) Name() string {
	s := "fusion(" + strings.Join(t.signalNames(), "+") + ")"
	if t.Cal != nil {
		s += "#" + t.Cal.id()
	}
	return s
}

// features returns each document's signal scores, docs × signals.
func (t *FusionTeacher) features(ctx context.Context, q Query, docs []Doc) ([][]float64, error) {
	out := make([][]float64, len(docs))
	for i := range out {
		out[i] = make([]float64, len(t.Signals))
	}
	for j, s := range t.Signals {
		v, err := s.Score(ctx, q, docs)
		if err != nil {
			return nil, fmt.Errorf("signal %s: %w", s.Name(), err)
		}
		if len(v) != len(docs) {
			return nil, fmt.Errorf("signal %s returned %d scores for %d documents", s.Name(), len(v), len(docs))
		}
		for i, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("signal %s returned %v for document %d", s.Name(), x, i)
			}
			out[i][j] = x
		}
	}
	return out, nil
}

// Score is the calibrated log-odds of relevance of each document.
func (t *FusionTeacher) Score(ctx context.Context, q Query, docs []Doc) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	if t.Cal == nil {
		return nil, errors.New("fusion teacher: not calibrated (Miner.Calibrate, or load a saved Calibration)")
	}
	if !slices.Equal(t.Cal.Signals, t.signalNames()) {
		return nil, fmt.Errorf("fusion teacher: calibrated for signals %v, has %v", t.Cal.Signals, t.signalNames())
	}
	f, err := t.features(ctx, q, docs)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(docs))
	for i, x := range f {
		out[i] = t.Cal.logit(x)
	}
	return out, nil
}

func (c *Calibration) logit(x []float64) float64 {
	z := c.Bias
	for j, v := range x {
		z += c.Weights[j] * (v - c.Mean[j]) / c.Std[j]
	}
	return z
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// featureRecorder stands in for the teacher while calibrating: it records
// the fusion teacher's features of every call and scores nothing.
type featureRecorder struct {
	t    *FusionTeacher
	rows [][]float64
}

func (r *featureRecorder) Name() string { return r.t.Name() }

func (r *featureRecorder) Score(ctx context.Context, q Query, docs []Doc) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	f, err := r.t.features(ctx, q, docs)
	if err != nil {
		return nil, err
	}
	r.rows = f
	return make([]float64, len(docs)), nil
}

// Calibrate fits t (which must be the miner's teacher) on the first n units
// of src: each unit's positives are the relevant rows, its top-k candidates
// after removing the positives the others — the documents the teacher will
// label — and a logistic regression (L2 0.01 on the standardised weights)
// is fitted to them. Units with bad input are skipped. It returns the
// calibration, also set as t.Cal. Fitting reads the same units the run
// then mines; with a handful of weights this is calibration, not learning
// the labels by heart.
func (m *Miner) Calibrate(ctx context.Context, src Source, n int, t *FusionTeacher) (*Calibration, error) {
	ctx = safe.Ctx(ctx)
	if m.teacher != Teacher(t) {
		return nil, errors.New("calibrate: t is not the miner's teacher")
	}
	rec := &featureRecorder{t: t}
	cm := *m
	cm.teacher = rec
	// Every positive is a relevant row, whatever the uncalibrated teacher
	// would rank it (RequireTop filters with the calibrated one).
	cm.opt.RequireTop = 0
	var x [][]float64
	var y []float64
	units := 0
	for units < n {
		u, err := src.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		if u.Err != nil || len(u.Positives) == 0 {
			continue
		}
		rec.rows = nil
		p, err := cm.prepare(ctx, &u)
		if err != nil {
			var bad errBadInput
			if errors.As(err, &bad) {
				continue
			}
			return nil, fmt.Errorf("calibrate: %s: %w", u.Where, err)
		}
		units++
		for i, row := range rec.rows {
			x = append(x, row)
			y = append(y, b2f(i < len(p.posTexts)))
		}
	}
	c, err := fitLogistic(x, y, 0.01)
	if err != nil {
		return nil, fmt.Errorf("calibrate on %d units: %w", units, err)
	}
	c.Signals = t.signalNames()
	c.Units = units
	t.Cal = c
	return c, nil
}

// penalisedLoss is fitLogistic's objective: the mean log-loss of σ(β·z)
// plus lambda·|w|²/2 (the bias β₀ not penalised).
func penalisedLoss(z [][]float64, y, beta []float64, lambda float64) float64 {
	var l float64
	for i, zi := range z {
		m := dotf(beta, zi)
		// log(1 + e^m) − y·m, computed without overflow.
		l += max(m, 0) + math.Log1p(math.Exp(-math.Abs(m))) - y[i]*m
	}
	l /= float64(len(z))
	for _, w := range beta[1:] {
		l += lambda * w * w / 2
	}
	return l
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// fitLogistic fits σ(b + w·z) to labels y ∈ {0, 1}, z the standardised
// rows of x, by Newton's method with an L2 penalty lambda·|w|²/2 averaged
// per row (the bias is not penalised).
func fitLogistic(x [][]float64, y []float64, lambda float64) (*Calibration, error) {
	n := len(x)
	if n == 0 {
		return nil, errors.New("no rows")
	}
	d := len(x[0])
	c := &Calibration{Mean: make([]float64, d), Std: make([]float64, d), Weights: make([]float64, d)}
	for _, v := range y {
		if v == 1 {
			c.Positives++
		}
	}
	c.Negatives = n - c.Positives
	if c.Positives == 0 || c.Negatives == 0 {
		return nil, fmt.Errorf("need relevant and non-relevant rows, have %d and %d", c.Positives, c.Negatives)
	}
	for _, r := range x {
		for j, v := range r {
			c.Mean[j] += v / float64(n)
		}
	}
	for _, r := range x {
		for j, v := range r {
			c.Std[j] += (v - c.Mean[j]) * (v - c.Mean[j]) / float64(n)
		}
	}
	for j := range c.Std {
		c.Std[j] = math.Sqrt(c.Std[j])
		if c.Std[j] < 1e-12 {
			c.Std[j] = 1 // a constant signal: its weight stays 0
		}
	}
	z := make([][]float64, n)
	for i, r := range x {
		z[i] = make([]float64, d+1)
		z[i][0] = 1
		for j, v := range r {
			z[i][j+1] = (v - c.Mean[j]) / c.Std[j]
		}
	}
	beta := make([]float64, d+1)
	beta[0] = math.Log(float64(c.Positives) / float64(c.Negatives))
	for iter := 0; iter < 50; iter++ {
		g := make([]float64, d+1)
		h := make([][]float64, d+1)
		for j := range h {
			h[j] = make([]float64, d+1)
		}
		for i, zi := range z {
			p := sigmoid(dotf(beta, zi))
			for a := range zi {
				g[a] += (p - y[i]) * zi[a] / float64(n)
				for b := range zi {
					h[a][b] += p * (1 - p) * zi[a] * zi[b] / float64(n)
				}
			}
		}
		for j := 1; j <= d; j++ {
			g[j] += lambda * beta[j]
			h[j][j] += lambda
		}
		h[0][0] += 1e-12
		step, err := solve(h, g)
		if err != nil {
			return nil, err
		}
		// Damped Newton: halve the step until the penalised loss does not
		// rise. A full step can overshoot when the classes are (nearly)
		// separable — a handful of queries whose positives all score the
		// best BM25 — and undamped iterations then run the unpenalised bias
		// off to logits in the thousands.
		before := penalisedLoss(z, y, beta, lambda)
		t := 1.0
		next := make([]float64, len(beta))
		for k := 0; k < 40; k++ {
			for j := range beta {
				next[j] = beta[j] - t*step[j]
			}
			if penalisedLoss(z, y, next, lambda) <= before {
				break
			}
			t /= 2
		}
		var size float64
		for j := range beta {
			size = max(size, math.Abs(beta[j]-next[j]))
			beta[j] = next[j]
		}
		if size < 1e-10 {
			break
		}
	}
	c.Bias = beta[0]
	copy(c.Weights, beta[1:])
	scores := make([]float64, n)
	for i, zi := range z {
		p := sigmoid(dotf(beta, zi))
		scores[i] = p
		if y[i] == 1 {
			c.LogLoss -= math.Log(max(p, 1e-300)) / float64(n)
		} else {
			c.LogLoss -= math.Log(max(1-p, 1e-300)) / float64(n)
		}
	}
	c.AUC = auc(scores, y)
	c.SignalAUC = make([]float64, d)
	for j := range d {
		col := make([]float64, n)
		for i, r := range x {
			col[i] = r[j]
		}
		c.SignalAUC[j] = auc(col, y)
	}
	return c, nil
}

func dotf(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// solve solves a·x = b by Gaussian elimination with partial pivoting (a is
// small: one row per signal plus the bias).
func solve(a [][]float64, b []float64) ([]float64, error) {
	n := len(b)
	m := make([][]float64, n)
	for i := range a {
		m[i] = append(slices.Clone(a[i]), b[i])
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		if math.Abs(m[p][col]) < 1e-300 {
			return nil, errors.New("singular system (signals that are exact copies of each other?)")
		}
		m[col], m[p] = m[p], m[col]
		for r := col + 1; r < n; r++ {
			f := m[r][col] / m[col][col]
			for c := col; c <= n; c++ {
				m[r][c] -= f * m[col][c]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := m[r][n]
		for c := r + 1; c < n; c++ {
			s -= m[r][c] * x[c]
		}
		x[r] = s / m[r][r]
	}
	return x, nil
}

// auc is the probability that a relevant row outscores a non-relevant one
// (ties count half).
func auc(s, y []float64) float64 {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case s[a] < s[b]:
			return -1
		case s[a] > s[b]:
			return 1
		}
		return 0
	})
	// Mann–Whitney U with average ranks for ties.
	var rankSum, pos float64
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && s[idx[j]] == s[idx[i]] {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if y[idx[k]] == 1 {
				rankSum += avg
				pos++
			}
		}
		i = j
	}
	neg := float64(len(s)) - pos
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return (rankSum - pos*(pos+1)/2) / (pos * neg)
}
