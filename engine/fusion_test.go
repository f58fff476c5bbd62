package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestHybridScoreFusion: with Fusion minmax or dbsf, a hybrid result's
// score is the weighted sum of its lexical and dense scores normalised as
// each method says, computed here by hand from the two lists alone; a
// document one list did not return gets nothing from it; what Explain says
// each list added sums to the score.
func TestHybridScoreFusion(t *testing.T) {
	ctx := context.Background()
	e, _ := rerankEngine(t, func(i int) engine.Document {
		text := "filler " + fmt.Sprint(i)
		if i%3 != 0 { // a third of the documents have no query word: dense only
			text = "common words " + strings.Repeat("pad ", (i*7)%30) + text
		}
		return engine.Document{ID: fmt.Sprintf("d%02d", i), Text: text}
	})
	const q = "common words pad"
	list := func(mode engine.Mode) map[string]float64 {
		res, err := e.Search(ctx, q, engine.SearchOptions{Mode: mode, K: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, r := range res {
			out[r.ID] = r.Score
		}
		return out
	}
	lex, dense := list(engine.ModeLexical), list(engine.ModeDense)
	if len(lex) == 0 || len(lex) == len(dense) {
		t.Fatalf("want a lexical list shorter than the dense one: %d, %d", len(lex), len(dense))
	}
	minmax := func(l map[string]float64) func(float64) float64 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range l {
			lo, hi = min(lo, s), max(hi, s)
		}
		return func(s float64) float64 { return (s - lo) / (hi - lo) }
	}
	dbsf := func(l map[string]float64) func(float64) float64 {
		var m, ss float64
		for _, s := range l {
			m += s
		}
		m /= float64(len(l))
		for _, s := range l {
			ss += (s - m) * (s - m)
		}
		sd := math.Sqrt(ss / float64(len(l)-1))
		return func(s float64) float64 { return (s - (m - 3*sd)) / (6 * sd) }
	}
	for _, c := range []struct {
		f    engine.Fusion
		norm func(map[string]float64) func(float64) float64
	}{{engine.FusionMinMax, minmax}, {engine.FusionDBSF, dbsf}} {
		for _, w := range []float64{1, 3} {
			res, err := e.Search(ctx, q, engine.SearchOptions{K: 100, Fusion: c.f, Weights: map[string]float64{"dense": w}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(dense) {
				t.Fatalf("%s: %d results, want %d", c.f, len(res), len(dense))
			}
			nl, nd := c.norm(lex), c.norm(dense)
			for i, r := range res {
				want := w * nd(dense[r.ID])
				if s, ok := lex[r.ID]; ok {
					want += nl(s)
				}
				if math.Abs(r.Score-want) > 1e-9 {
					t.Fatalf("%s weight %g: %s score %.9f, want %.9f (explain %+v)", c.f, w, r.ID, r.Score, want, r.Explain)
				}
				if i > 0 && r.Score > res[i-1].Score {
					t.Fatalf("%s weight %g: not sorted at %d", c.f, w, i)
				}
				sum := 0.0
				for _, x := range r.Explain {
					sum += x.Fused
				}
				if math.Abs(sum-r.Score) > 1e-9 {
					t.Fatalf("%s weight %g: %s explain adds up to %g, score %g", c.f, w, r.ID, sum, r.Score)
				}
			}
		}
	}
	// The default is DBSF: the same query with Fusion "dbsf" gives the same
	// list and scores; RRFK alone asks for RRF.
	a, err := e.Search(ctx, q, engine.SearchOptions{K: 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Search(ctx, q, engine.SearchOptions{K: 20, Fusion: engine.FusionDBSF})
	if err != nil {
		t.Fatal(err)
	}
	if engine.DefaultFusion != engine.FusionDBSF || fmt.Sprint(ids(a)) != fmt.Sprint(ids(b)) || a[0].Score != b[0].Score {
		t.Fatalf("default fusion is not DBSF: %v (%g) vs %v (%g)", ids(a), a[0].Score, ids(b), b[0].Score)
	}
	c, err := e.Search(ctx, q, engine.SearchOptions{K: 20, RRFK: 60})
	if err != nil {
		t.Fatal(err)
	}
	if c[0].Score > 2.0/61 {
		t.Fatalf("RRFK without Fusion: top score %g, not RRF's", c[0].Score)
	}
}

// TestFusionChoice: an index's recorded fusion is what SearchOptions.Fusion
// "" means, kept across Close and a read-only open, overridden by an
// explicit Fusion, dropped (back to the default, DBSF) by a reindex to
// another model, and cleared by recording the zero FusionChoice (the
// default, named, is kept as a choice); bad choices are refused with an
// OptionError.
func TestFusionChoice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	var docs []engine.Document
	for i := range 40 {
		docs = append(docs, engine.Document{ID: fmt.Sprintf("d%02d", i), Text: "common words " + strings.Repeat("pad ", (i*7)%30) + fmt.Sprint(i)})
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	const q = "common words pad"
	scores := func(e *engine.Engine, f engine.Fusion) []float64 {
		t.Helper()
		res, err := e.Search(ctx, q, engine.SearchOptions{K: 20, Fusion: f})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(res))
		for i, r := range res {
			out[i] = r.Score
		}
		return out
	}
	same := func(what string, got, want []float64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: scores %v, want %v", what, got, want)
		}
	}
	rrf, dbsf := scores(e, engine.FusionRRF), scores(e, engine.FusionDBSF)
	if fmt.Sprint(rrf) == fmt.Sprint(dbsf) {
		t.Fatal("RRF and DBSF gave the same scores: the test cannot tell them apart")
	}
	same("no choice recorded", scores(e, ""), dbsf)

	for _, c := range []engine.FusionChoice{{Fusion: "borda"}, {Fusion: engine.FusionDBSF, Model: "fp-other"}} {
		var oe *engine.OptionError
		if err := e.SetFusion(c); !errors.As(err, &oe) {
			t.Fatalf("SetFusion(%+v): %v, want an OptionError", c, err)
		}
	}
	if err := e.SetFusion(engine.FusionChoice{Fusion: engine.FusionRRF, Why: "measured"}); err != nil {
		t.Fatal(err)
	}
	same("RRF recorded", scores(e, ""), rrf)
	same("explicit DBSF over the choice", scores(e, engine.FusionDBSF), dbsf)
	st, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if want := (engine.FusionChoice{Fusion: engine.FusionRRF, Model: "fp-a", Why: "measured"}); st.Fusion != engine.FusionRRF || st.FusionChoice != want {
		t.Fatalf("Stats: fusion %q, choice %+v; want rrf, %+v", st.Fusion, st.FusionChoice, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a"), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	same("read-only reopen", scores(ro, ""), rrf)
	if err := ro.SetFusion(engine.FusionChoice{Fusion: engine.FusionMinMax}); !errors.Is(err, engine.ErrReadOnly) {
		t.Fatalf("read-only SetFusion: %v, want ErrReadOnly", err)
	}
	ro.Close()

	e = openT(t, dir, "fp-a")
	defer e.Close()
	same("reopen", scores(e, ""), rrf)
	if err := e.Reindex(ctx, engine.ReindexOptions{Encoder: hashEnc("fp-b")}); err != nil {
		t.Fatal(err)
	}
	if st, err = e.Stats(); err != nil {
		t.Fatal(err)
	}
	if st.Fusion != engine.FusionDBSF || st.FusionChoice.Fusion != engine.FusionRRF || st.FusionChoice.Active(st.Model.Fingerprint) {
		t.Fatalf("after a reindex to another model: fusion %q, choice %+v; want dbsf, the rrf choice kept but inactive", st.Fusion, st.FusionChoice)
	}
	same("after a reindex to another model", scores(e, ""), scores(e, engine.FusionDBSF))
	if err := e.SetFusion(engine.FusionChoice{Fusion: engine.FusionMinMax}); err != nil {
		t.Fatal(err)
	}
	same("minmax recorded for the new model", scores(e, ""), scores(e, engine.FusionMinMax))
	if err := e.SetFusion(engine.FusionChoice{Fusion: engine.DefaultFusion}); err != nil {
		t.Fatal(err)
	}
	if st, err = e.Stats(); err != nil {
		t.Fatal(err)
	}
	if st.Fusion != engine.DefaultFusion || !st.FusionChoice.Active(st.Model.Fingerprint) {
		t.Fatalf("after recording the default: fusion %q, choice %+v; want %s, recorded", st.Fusion, st.FusionChoice, engine.DefaultFusion)
	}
	if err := e.SetFusion(engine.FusionChoice{}); err != nil {
		t.Fatal(err)
	}
	if st, err = e.Stats(); err != nil {
		t.Fatal(err)
	}
	if st.Fusion != engine.DefaultFusion || st.FusionChoice != (engine.FusionChoice{}) {
		t.Fatalf("after clearing: fusion %q, choice %+v; want %s and no choice", st.Fusion, st.FusionChoice, engine.DefaultFusion)
	}
}

// TestNamedFusion: the fusion search options name — Fusion, else RRF for
// an RRF constant, else none (the index's own) — the one rule the engine,
// eval's labels and annactl's notes read.
func TestNamedFusion(t *testing.T) {
	for _, c := range []struct {
		o    engine.SearchOptions
		want engine.Fusion
	}{
		{engine.SearchOptions{}, ""},
		{engine.SearchOptions{RRFK: 10}, engine.FusionRRF},
		{engine.SearchOptions{Fusion: engine.FusionDBSF, RRFK: 10}, engine.FusionDBSF},
		{engine.SearchOptions{Weights: map[string]float64{"dense": 2}}, ""},
	} {
		if got := c.o.NamedFusion(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
}
