package mining

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// namedList returns a fixed list of IDs.
type namedList struct {
	name string
	ids  []string
}

func (r namedList) Name() string { return r.name }
func (r namedList) Retrieve(_ context.Context, _ Query, k int) ([]Candidate, error) {
	var out []Candidate
	for i, id := range r.ids {
		if i == k {
			break
		}
		out = append(out, Candidate{ID: id, Text: "text of " + id, Rank: i})
	}
	return out, nil
}

func TestFusedRetrieverRRF(t *testing.T) {
	r := &FusedRetriever{Lists: []Retriever{
		namedList{"a", []string{"x", "y", "z"}},
		namedList{"b", []string{"y", "w"}},
	}}
	got, err := r.Retrieve(context.Background(), Query{Text: "q"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	// y: 1/62 + 1/61; x: 1/61; w: 1/62; z: 1/63.
	want := []struct {
		id string
		s  float64
	}{{"y", 1.0/62 + 1.0/61}, {"x", 1.0 / 61}, {"w", 1.0 / 62}}
	if len(got) != len(want) {
		t.Fatalf("got %d candidates, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].ID != w.id || math.Abs(got[i].Score-w.s) > 1e-12 || got[i].Rank != i || got[i].Text != "text of "+w.id {
			t.Fatalf("candidate %d = %+v, want %s with %v", i, got[i], w.id, w.s)
		}
	}
	if n := r.Name(); n != "rrf(a,b)" {
		t.Fatalf("name %q", n)
	}
	if _, err := (&FusedRetriever{Lists: []Retriever{namedList{"c", []string{""}}}}).Retrieve(context.Background(), Query{}, 1); err == nil {
		t.Fatal("a candidate without an ID: no error")
	}
}

func TestQualityHandComputed(t *testing.T) {
	var q Quality
	// Positives 0.9 and 0.5 among candidates 0.95, 0.5, 0.1: ranks 2 and 4
	// (the tie at 0.5 puts the candidate first).
	q.observe([]float64{0.9, 0.5}, []float64{0.95, 0.5, 0.1})
	dcg := 1/math.Log2(3) + 1/math.Log2(5)
	idcg := 1 + 1/math.Log2(3)
	if q.Units != 1 || math.Abs(q.NDCG10Sum-dcg/idcg) > 1e-12 || q.Top1 != 0 {
		t.Fatalf("%+v, want nDCG %v and no top-1", q, dcg/idcg)
	}
	q.observe([]float64{2}, []float64{1, 0})
	if q.Units != 2 || q.Top1 != 1 || math.Abs(q.NDCG10()-(dcg/idcg+1)/2) > 1e-12 {
		t.Fatalf("%+v", q)
	}
	q.observe(nil, []float64{1})
	q.observe([]float64{1}, nil)
	if q.Units != 2 {
		t.Fatalf("units without positive or candidate counted: %+v", q)
	}
}

func TestAUCMatchesPairCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := make([]float64, 300)
	y := make([]float64, 300)
	for i := range s {
		s[i] = float64(rng.IntN(20)) // many ties
		y[i] = b2f(rng.Float64() < 0.2+0.03*s[i])
	}
	var wins, pairs float64
	for i := range s {
		for j := range s {
			if y[i] == 1 && y[j] == 0 {
				pairs++
				switch {
				case s[i] > s[j]:
					wins++
				case s[i] == s[j]:
					wins += 0.5
				}
			}
		}
	}
	if got, want := auc(s, y), wins/pairs; math.Abs(got-want) > 1e-12 {
		t.Fatalf("auc %v, pair count %v", got, want)
	}
}

// TestFitLogisticOptimal checks the fit by its optimality condition: at
// the penalised maximum likelihood the gradient is zero.
func TestFitLogisticOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var x [][]float64
	var y []float64
	for range 2000 {
		a, b := rng.NormFloat64(), 10+3*rng.NormFloat64() // different scales
		c := a                                            // an exact copy of the first signal
		p := sigmoid(-2 + 1.5*a + 0.4*(b-10))
		x = append(x, []float64{a, b, c + 1e-3*rng.NormFloat64()})
		y = append(y, b2f(rng.Float64() < p))
	}
	const lambda = 0.01
	c, err := fitLogistic(x, y, lambda)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(len(x))
	g := make([]float64, 4)
	for i, r := range x {
		p := sigmoid(c.logit(r))
		g[0] += (p - y[i]) / n
		for j, v := range r {
			g[j+1] += (p - y[i]) * (v - c.Mean[j]) / c.Std[j] / n
		}
	}
	for j := range c.Weights {
		g[j+1] += lambda * c.Weights[j]
	}
	for j, v := range g {
		if math.Abs(v) > 1e-8 {
			t.Fatalf("gradient %d = %v at the fit %+v", j, v, c)
		}
	}
	if c.AUC < c.SignalAUC[0] || c.AUC < c.SignalAUC[1] {
		t.Fatalf("fused AUC %.4f below a single signal's %v", c.AUC, c.SignalAUC)
	}
	if _, err := fitLogistic(x[:5], []float64{0, 0, 0, 0, 0}, lambda); err == nil {
		t.Fatal("no positive rows: no error")
	}
}

// TestFusionTeacherMines calibrates a fusion of two weak signals on a
// synthetic corpus and mines with it: the fused teacher ranks positives
// better than either signal, and a resume is refused once the calibration
// (so the teacher's name) differs.
func TestFusionTeacherMines(t *testing.T) {
	c, pairs := synth(t, 400, 120, 9)
	half := func(name string, parity int) Teacher {
		return funcTeacher{name, func(q, d string) float64 {
			// Word overlap counted on every other query word only.
			qs := strings.Fields(q)
			var kept []string
			for i, w := range qs {
				if i%2 == parity {
					kept = append(kept, w)
				}
			}
			return overlap(strings.Join(kept, " "), d)
		}}
	}
	opt := DefaultOptions()
	opt.Seed = 1
	quality := func(teacher Teacher) Quality {
		_, st, err := mine(t, c, teacher, pairs, opt)
		if err != nil {
			t.Fatal(err)
		}
		return st.Quality
	}
	ft := &FusionTeacher{Signals: []Teacher{half("even", 0), MaxNormalized{half("odd", 1)}}}
	m, err := New(c, ft, c, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ft.Score(context.Background(), Query{Text: "q"}, []Doc{{Text: "d"}}); err == nil {
		t.Fatal("uncalibrated teacher scored")
	}
	src, err := OpenPairs(context.Background(), pairs, PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	cal, err := m.Calibrate(context.Background(), src, 60, ft)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	if cal.Units != 60 || cal.Positives < 60 || cal.Negatives < 60*10 || cal.Weights[0] <= 0 || cal.Weights[1] <= 0 {
		t.Fatalf("calibration %+v", cal)
	}
	// With RequireTop the same units calibrate the same: every positive is
	// a relevant row (it once labelled none, the filter run with no
	// calibration).
	ro := opt
	ro.RequireTop = 1
	rm, err := New(c, &FusionTeacher{Signals: ft.Signals}, c, ro)
	if err != nil {
		t.Fatal(err)
	}
	src, err = OpenPairs(context.Background(), pairs, PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	rcal, err := rm.Calibrate(context.Background(), src, 60, rm.teacher.(*FusionTeacher))
	src.Close()
	if err != nil || rcal.Positives != cal.Positives || rcal.Weights[0] != cal.Weights[0] {
		t.Fatalf("calibration with RequireTop: %+v (%v), without: %+v", rcal, err, cal)
	}
	if !strings.Contains(ft.Name(), "fusion(even+odd/max)#") {
		t.Fatalf("name %q", ft.Name())
	}
	qf, qe, qo := quality(ft), quality(half("even", 0)), quality(half("odd", 1))
	t.Logf("nDCG@10 fused %.4f, even %.4f, odd %.4f", qf.NDCG10(), qe.NDCG10(), qo.NDCG10())
	if qf.Units != 120 || qf.NDCG10() <= max(qe.NDCG10(), qo.NDCG10()) {
		t.Fatalf("fused teacher %.4f not above its signals %.4f / %.4f", qf.NDCG10(), qe.NDCG10(), qo.NDCG10())
	}

	// Resume with another calibration: refused (another teacher).
	out := filepath.Join(t.TempDir(), "mined.jsonl")
	run := func(resume bool) error {
		o := opt
		o.Resume = resume
		m, err := New(c, ft, c, o)
		if err != nil {
			t.Fatal(err)
		}
		src, err := OpenPairs(context.Background(), pairs, PromptDefaults{})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		_, err = m.Run(context.Background(), src, out)
		return err
	}
	if err := run(false); err != nil {
		t.Fatal(err)
	}
	if err := run(true); err != nil {
		t.Fatalf("resume with the same calibration: %v", err)
	}
	ft.Cal.Bias += 0.1
	if err := run(true); err == nil {
		t.Fatal("resume with another calibration: no error")
	}
}
