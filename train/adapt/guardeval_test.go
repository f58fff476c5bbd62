package adapt

import (
	"context"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/internal/home"
)

// TestGuardMeasures is a measurement, not a check (skipped unless
// GUARD_RUNS is set): for each adapt work folder's parent in GUARD_RUNS
// (comma-separated; scripts/adapt.sh's DIR, holding work/student/model and
// work/heldout-mined.jsonl), three candidate guards on its held-out queries
// (at most GUARD_MAXQ), for the default model (the base) and the student:
// the check's nDCG@10 of the teacher's one document (positiveNDCG),
// nDCG@10 with the teacher's calibrated probabilities as graded gains, and
// Spearman's rank correlation with the teacher's scores.
// docs/results/adapt.md compares them with the judged outcome of four
// SciFact runs.
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
	defer base.Close()
	maxQ, _ := strconv.Atoi(os.Getenv("GUARD_MAXQ"))
	for _, w := range strings.Split(runs, ",") {
		stu, err := encoder.Load(ctx, w+"/work/student/model", encoder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var recs []flagembedding.Record
		err = eachRecord(w+"/work/heldout-mined.jsonl", func(_ []byte, r flagembedding.Record) error {
			if len(r.Pos) > 0 && len(r.Neg) > 0 && (maxQ <= 0 || len(recs) < maxQ) {
				recs = append(recs, r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var sum [2][3]float64 // base, student × the three measures
		for _, r := range recs {
			teacher := append([]float64{r.PosScores[0]}, r.NegScores...)
			for m, enc := range []encoder.Encoder{base, stu} {
				cos, err := cosines(ctx, enc, heldExample{Query: r.Query, Pos: r.Pos, Neg: r.Neg}, nil)
				if err != nil {
					t.Fatal(err)
				}
				sum[m][0] += positiveNDCG(cos)
				sum[m][1] += gradedNDCG(cos, teacher)
				sum[m][2] += eval.Spearman(cos, teacher)
			}
		}
		n := float64(len(recs))
		t.Logf("%s (%d q): single-pos nDCG base %.4f student %.4f | graded nDCG base %.4f student %.4f | spearman base %.4f student %.4f",
			w, len(recs), sum[0][0]/n, sum[1][0]/n, sum[0][1]/n, sum[1][1]/n, sum[0][2]/n, sum[1][2]/n)
		stu.Close()
	}
}

// gradedNDCG is nDCG of the ranking by cos with the teacher's calibrated
// log-odds, as probabilities, for gains.
func gradedNDCG(cos, teacher []float64) float64 {
	gains := make([]float64, len(teacher))
	for i, s := range teacher {
		gains[i] = 1 / (1 + math.Exp(-s))
	}
	ord := make([]int, len(cos))
	for i := range ord {
		ord[i] = i
	}
	sort.SliceStable(ord, func(x, y int) bool { return cos[ord[x]] > cos[ord[y]] })
	ideal := append([]float64(nil), gains...)
	sort.Sort(sort.Reverse(sort.Float64Slice(ideal)))
	var dcg, idcg float64
	for r, i := range ord {
		dcg += gains[i] / math.Log2(float64(r)+2)
		idcg += ideal[r] / math.Log2(float64(r)+2)
	}
	return dcg / idcg
}
