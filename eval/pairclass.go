package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// NLIPair is one labelled pair of a natural-language-inference set (SNLI):
// a premise, a hypothesis and the relation between them.
type NLIPair struct {
	Premise, Hypothesis string
	Label               string // entailment, neutral or contradiction
}

// ReadNLIPairs reads NLI pairs as JSON lines {"premise", "hypothesis",
// "label"}, the layout of ../shared/datasets/snli. Blank lines are skipped;
// a line without both sentences, or whose label is not entailment, neutral
// or contradiction, is an error naming name:line.
func ReadNLIPairs(r io.Reader, name string) ([]NLIPair, error) {
	var out []NLIPair
	err := readJSONLines(r, name, func(raw []byte) error {
		var rec struct {
			P *string `json:"premise"`
			H *string `json:"hypothesis"`
			L string  `json:"label"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		switch {
		case rec.P == nil:
			return errors.New(`no "premise"`)
		case rec.H == nil:
			return errors.New(`no "hypothesis"`)
		case rec.L != "entailment" && rec.L != "neutral" && rec.L != "contradiction":
			return fmt.Errorf("label %q (want entailment, neutral or contradiction)", rec.L)
		}
		out = append(out, NLIPair{*rec.P, *rec.H, rec.L})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadNLIPairsFile is ReadNLIPairs on a file.
func ReadNLIPairsFile(path string) ([]NLIPair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return ReadNLIPairs(f, path)
}

// AveragePrecision is the average precision of ranking the positives first
// by score (higher first): Σₙ (Rₙ − Rₙ₋₁)·Pₙ over the distinct score
// thresholds, as scikit-learn's average_precision_score, which MTEB's pair
// classification reports — tied scores form one threshold, so their order
// does not matter. It is NaN without positives.
func AveragePrecision(scores []float64, positive []bool) float64 {
	idx := make([]int, len(scores))
	npos := 0
	for i := range idx {
		idx[i] = i
		if positive[i] {
			npos++
		}
	}
	if npos == 0 {
		return math.NaN()
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	var ap float64
	tp, seen, prevRecall := 0, 0, 0.0
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			if positive[idx[j]] {
				tp++
			}
			j++
		}
		seen = j
		recall := float64(tp) / float64(npos)
		ap += (recall - prevRecall) * float64(tp) / float64(seen)
		prevRecall = recall
		i = j
	}
	return ap
}
