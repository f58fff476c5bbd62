package flagembedding

import (
	"strings"
	"testing"
)

func TestReadNamesLineAndField(t *testing.T) {
	good := `{"query": "q", "pos": ["p"], "neg": ["n"], "pos_scores": [0.9], "neg_scores": [0.1], "prompt": "", "type": "normal", "teacher": "t"}`
	recs, err := Read(strings.NewReader(good+"\n\n"+good+"\n"), "in", ReadOptions{Negatives: true, Scores: true})
	if err != nil || len(recs) != 2 || recs[1].Teacher != "t" || recs[0].NegScores[0] != 0.1 {
		t.Fatalf("good input: %+v %v", recs, err)
	}
	for _, tc := range []struct {
		in   string
		opts ReadOptions
		want string
	}{
		{good + "\n{oops", ReadOptions{}, "in:2: not a FlagEmbedding JSON object"},
		{`{"pos": ["p"]}`, ReadOptions{}, `in:1: field "query"`},
		{`{"query": "q", "pos": []}`, ReadOptions{}, `in:1: field "pos"`},
		{`{"query": "q", "pos": ["p"]}`, ReadOptions{Negatives: true}, `in:1: field "neg"`},
		{`{"query": "q", "pos": ["p"], "neg": ["n"], "pos_scores": [1]}`, ReadOptions{Scores: true}, `in:1: teacher scores needed`},
		{"\n\n", ReadOptions{}, "holds no examples"},
	} {
		_, err := Read(strings.NewReader(tc.in), "in", tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}
