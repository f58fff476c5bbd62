package adapt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// TestChooseFusion: the default (DBSF) unless another fusion beats it by
// FusionMargin; the best of those that do.
func TestChooseFusion(t *testing.T) {
	for _, c := range []struct {
		rrf, minmax, dbsf float64
		want              engine.Fusion
	}{
		{0.50, 0.50, 0.50, engine.FusionDBSF},
		{0.5049, 0.5049, 0.50, engine.FusionDBSF},
		{0.506, 0.505, 0.50, engine.FusionRRF},
		{0.506, 0.52, 0.50, engine.FusionMinMax},
		{0.40, 0.51, 0.50, engine.FusionMinMax},
		{0.40, 0.504, 0.50, engine.FusionDBSF},
		{0.60, 0.50, 0.40, engine.FusionRRF},
	} {
		got := chooseFusion(map[engine.Fusion]float64{engine.FusionRRF: c.rrf, engine.FusionMinMax: c.minmax, engine.FusionDBSF: c.dbsf})
		if got != c.want {
			t.Errorf("rrf %.4f, minmax %.4f, dbsf %.4f: chose %s, want %s", c.rrf, c.minmax, c.dbsf, got, c.want)
		}
	}
}

// TestFusionStage: the fusion stage scores each fusion on the held-out
// queries (pseudo-judged by BM25 and the teacher model: the default model
// stands in) and records nothing (pseudo-judgments favour RRF, which made
// them); with judged queries it records its choice in the index, for the
// index's model; KeepFusion leaves the index alone; with no teacher model
// it chooses nothing.
func TestFusionStage(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 40)
	c := tinyConfig(t, index, filepath.Join(tmp, "work"), "")
	c.TeacherModels = []string{home.DefaultModel()}
	// No held-out queries: the stage adds the extractive queries of every
	// tenth document.
	rep := fusionStage(t, c).st.Report
	if rep.FusionQueries != 4 || len(rep.FusionScores) != 3 || rep.Fusion == "" {
		t.Fatalf("fusion stage: %d queries, scores %v, chose %q; want the 4 extractive queries of every tenth of 40 documents, 3 scores", rep.FusionQueries, rep.FusionScores, rep.Fusion)
	}
	for f, s := range rep.FusionScores {
		if !(s > 0 && s <= 1) {
			t.Errorf("%s: nDCG@10 %v", f, s)
		}
	}
	if rep.Fusion != string(engine.DefaultFusion) {
		t.Fatalf("pseudo-judged scores %v chose %s: pseudo-judgments report, they do not choose (the index keeps %s)", rep.FusionScores, rep.Fusion, engine.DefaultFusion)
	}
	eng, err := engine.Open(ctx, index, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Stats()
	eng.Close()
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Fusion) != rep.Fusion || st.FusionChoice.Fusion != "" {
		t.Fatalf("the index fuses by %s (choice %+v), the stage reported %s and should have recorded nothing", st.Fusion, st.FusionChoice, rep.Fusion)
	}

	// Judged queries choose, and the choice is recorded.
	eng, err = engine.Open(ctx, index, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := eng.Get(ctx, "d00", "d03", "d07", "d11", "d19", "d25")
	eng.Close()
	if err != nil {
		t.Fatal(err)
	}
	jc := c
	jc.Work, jc.Judged = filepath.Join(tmp, "wj"), filepath.Join(tmp, "judged.jsonl")
	if err := os.WriteFile(jc.Judged, firstSentenceQueries(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	jrep := fusionStage(t, jc).st.Report
	want := chooseFusion(map[engine.Fusion]float64{engine.FusionRRF: jrep.FusionScores["rrf"], engine.FusionMinMax: jrep.FusionScores["minmax"], engine.FusionDBSF: jrep.FusionScores["dbsf"]})
	if jrep.FusionQueries != len(docs) || jrep.Fusion != string(want) {
		t.Fatalf("judged: %d queries, scores %v, chose %s; want %d queries choosing %s", jrep.FusionQueries, jrep.FusionScores, jrep.Fusion, len(docs), want)
	}
	if eng, err = engine.Open(ctx, index, engine.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	st, err = eng.Stats()
	eng.Close()
	if err != nil || st.FusionChoice.Fusion != want || !strings.Contains(st.FusionChoice.Why, "judged") {
		t.Fatalf("judged: the index's choice %+v (%v), want %s recorded", st.FusionChoice, err, want)
	}

	// A choice recorded by hand stays with KeepFusion; without a teacher
	// model nothing is chosen.
	eng, err = engine.Open(ctx, index, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.SetFusion(engine.FusionChoice{Fusion: engine.FusionMinMax}); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	for i, change := range []func(*Config){func(c *Config) { c.KeepFusion = true }, func(c *Config) { c.TeacherModels = nil }} {
		cc := c
		cc.Work = filepath.Join(tmp, fmt.Sprint("w", i))
		change(&cc)
		r := fusionStage(t, cc)
		if r.st.Report.Fusion != "" || r.st.Report.FusionScores != nil {
			t.Fatalf("case %d: chose %q (%v)", i, r.st.Report.Fusion, r.st.Report.FusionScores)
		}
		eng, err := engine.Open(ctx, index, engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := eng.Stats()
		eng.Close()
		if st.Fusion != engine.FusionMinMax {
			t.Fatalf("case %d: the index's recorded fusion became %s", i, st.Fusion)
		}
	}
}

// fusionStage runs the fusion stage alone with c and returns its run.
func fusionStage(t *testing.T, c Config) *run {
	t.Helper()
	r := &run{cfg: c}
	if err := r.cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if err := r.open(); err != nil {
		t.Fatal(err)
	}
	if err := r.fusion(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// firstSentenceQueries are JSON lines of judged queries, one per document:
// the second half of its first sentence, the document relevant.
func firstSentenceQueries(docs []engine.Document) []byte {
	var out []byte
	for _, d := range docs {
		w := strings.Fields(strings.SplitN(d.Text, ".", 2)[0])
		line, _ := json.Marshal(map[string]any{"query": strings.Join(w[4:], " "), "pos_ids": []string{d.ID}})
		out = append(append(out, line...), '\n')
	}
	return out
}
