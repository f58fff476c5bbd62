package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestAveragePrecision(t *testing.T) {
	// Positives at ranks 1, 3, 4 of 5: (1/1 + 2/3 + 3/4) / 3.
	got := AveragePrecision([]float64{0.9, 0.8, 0.7, 0.6, 0.1}, []bool{true, false, true, true, false})
	if want := (1 + 2.0/3 + 3.0/4) / 3; math.Abs(got-want) > 1e-12 {
		t.Fatalf("AP %v, want %v", got, want)
	}
	// Distinct scores: AP is the mean over positives of precision at their
	// rank, whatever the order of the input.
	r := rand.New(rand.NewPCG(1, 2))
	scores, pos := make([]float64, 200), make([]bool, 200)
	for i := range scores {
		scores[i], pos[i] = r.Float64(), r.IntN(3) == 0
	}
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	// Brute force: rank of each positive = 1 + how many score higher.
	var sum float64
	n := 0
	for i := range scores {
		if !pos[i] {
			continue
		}
		rank, above := 1, 0
		for j := range scores {
			if scores[j] > scores[i] {
				rank++
				if pos[j] {
					above++
				}
			}
		}
		sum += float64(above+1) / float64(rank)
		n++
	}
	if got, want := AveragePrecision(scores, pos), sum/float64(n); math.Abs(got-want) > 1e-12 {
		t.Fatalf("AP %v, brute force %v", got, want)
	}
	// Ties form one threshold: a positive and a negative tied at the top
	// give precision 1/2 for that step, in either input order.
	a := AveragePrecision([]float64{1, 1}, []bool{true, false})
	b := AveragePrecision([]float64{1, 1}, []bool{false, true})
	if a != 0.5 || b != 0.5 {
		t.Fatalf("tied AP %v, %v, want 0.5", a, b)
	}
	if !math.IsNaN(AveragePrecision([]float64{1}, []bool{false})) {
		t.Fatal("AP without positives is not NaN")
	}
}

func TestReadNLIPairs(t *testing.T) {
	in := `{"premise": "A man.", "hypothesis": "A person.", "label": "entailment"}

{"premise": "A man.", "hypothesis": "A cat.", "label": "contradiction"}
`
	ps, err := ReadNLIPairs(strings.NewReader(in), "snli.jsonl")
	if err != nil || len(ps) != 2 || ps[1].Label != "contradiction" || ps[0].Hypothesis != "A person." {
		t.Fatalf("%+v %v", ps, err)
	}
	for bad, want := range map[string]string{
		`{"premise": "a", "hypothesis": "b", "label": "maybe"}`: `snli.jsonl:1: label "maybe"`,
		`{"premise": "a", "label": "neutral"}`:                  `snli.jsonl:1: no "hypothesis"`,
		"\n{\"premise\": ":                                      "snli.jsonl:2:",
	} {
		if _, err := ReadNLIPairs(strings.NewReader(bad), "snli.jsonl"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to name %q", bad, err, want)
		}
	}
}
