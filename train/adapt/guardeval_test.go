package adapt

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/internal/home"
)

// gEx is a held-out mined example with the teacher's scores.
type gEx struct {
	Query     string    `json:"query"`
	Pos       []string  `json:"pos"`
	Neg       []string  `json:"neg"`
	PosScores []float64 `json:"pos_scores"`
	NegScores []float64 `json:"neg_scores"`
}

// TestGuardMeasures is a measurement, not a check (skipped unless
// GUARD_RUNS is set): for each adapt work folder's parent in GUARD_RUNS
// (comma-separated; scripts/adapt.sh's DIR, holding work/student/model and
// work/heldout-mined.jsonl), three candidate guards on its held-out queries
// (at most GUARD_MAXQ), for the default model (the base) and the student:
// the check's nDCG@10 of the teacher's one document, nDCG@10 with the
// teacher's calibrated probabilities as graded gains, and Spearman's rank
// correlation with the teacher's scores. docs/results/adapt.md compares
// them with the judged outcome of four SciFact runs.
//
//	GUARD_MAXQ=150 GUARD_RUNS=DIR1,DIR2 go test -v -run TestGuardMeasures -timeout 60m ./train/adapt
func TestGuardMeasures(t *testing.T) {
	runs := os.Getenv("GUARD_RUNS")
	if runs == "" {
		t.Skip("a measurement: set GUARD_RUNS")
	}
	ctx := context.Background()
	base, err := encoder.Load(ctx, home.DefaultModel(), encoder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	maxQ, _ := strconv.Atoi(os.Getenv("GUARD_MAXQ"))
	for _, w := range strings.Split(runs, ",") {
		stu, err := encoder.Load(ctx, w+"/work/student/model", encoder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(w + "/work/heldout-mined.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<26)
		var exs []gEx
		for sc.Scan() {
			var e gEx
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if len(e.Pos) > 0 && len(e.Neg) > 0 {
				exs = append(exs, e)
			}
		}
		f.Close()
		if maxQ > 0 && len(exs) > maxQ {
			exs = exs[:maxQ]
		}
		var a [2][3]float64
		for _, e := range exs {
			texts := append([]string{e.Pos[0]}, e.Neg...)
			gains := []float64{sig(e.PosScores[0])}
			for _, s := range e.NegScores {
				gains = append(gains, sig(s))
			}
			for m, enc := range []encoder.Encoder{base, stu} {
				q, err := enc.EmbedQueries(ctx, []string{e.Query}, encoder.Prompt{})
				if err != nil {
					t.Fatal(err)
				}
				d, err := enc.EmbedDocuments(ctx, texts)
				if err != nil {
					t.Fatal(err)
				}
				cos := make([]float64, len(d))
				for i := range d {
					for j := range d[i] {
						cos[i] += float64(q[0][j] * d[i][j])
					}
				}
				ord := make([]int, len(cos))
				for i := range ord {
					ord[i] = i
				}
				sort.SliceStable(ord, func(x, y int) bool { return cos[ord[x]] > cos[ord[y]] })
				// A: single positive nDCG
				for r, i := range ord {
					if i == 0 {
						a[m][0] += 1 / math.Log2(float64(r)+2)
					}
				}
				// B: graded nDCG with teacher probabilities
				var dcg, idcg float64
				ig := append([]float64(nil), gains...)
				sort.Sort(sort.Reverse(sort.Float64Slice(ig)))
				for r, i := range ord {
					dcg += gains[i] / math.Log2(float64(r)+2)
					idcg += ig[r] / math.Log2(float64(r)+2)
				}
				a[m][1] += dcg / idcg
				// C: Spearman between cos and teacher scores
				a[m][2] += eval.Spearman(cos, append([]float64{e.PosScores[0]}, e.NegScores...))
			}
		}
		n := float64(len(exs))
		t.Logf("%s (%d q): single-pos nDCG base %.4f student %.4f | graded nDCG base %.4f student %.4f | spearman base %.4f student %.4f",
			w, len(exs), a[0][0]/n, a[1][0]/n, a[0][1]/n, a[1][1]/n, a[0][2]/n, a[1][2]/n)
		stu.Close()
	}
}

// sig is the logistic function: calibrated log-odds to a probability.
func sig(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
