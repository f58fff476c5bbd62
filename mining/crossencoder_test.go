package mining

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/inference/inferencetest"
	"github.com/anna-search/anna/rerank"
)

// logitCrossEncoder builds a real ONNX cross-encoder from the MiniLM
// weights with a random one-logit head biased to −4, so that its scores are
// negative like many cross-encoders' logits. It is not a trained reranker:
// the test is about the teacher path and the margin's sign handling with a
// real model, not about quality.
func logitCrossEncoder(t *testing.T) *rerank.Model {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ce")
	inferencetest.WriteCrossEncoder(t, out, -4)
	r, err := rerank.Load(context.Background(), out, rerank.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Mine 24 SQuAD questions with a real cross-encoder teacher whose logits are
// negative: every kept negative must sit at or below pos − 5%·|pos| of its
// query's lowest positive (the naive 0.95·pos would be above the positive).
func TestMineCrossEncoderNegativeLogits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cross-encoder and indexes SQuAD paragraphs")
	}
	r := openReal(t, "squad2-dev-half", "dev")
	ce := logitCrossEncoder(t)
	// 24 questions as a pairs file with positives by ID.
	var b strings.Builder
	n := 0
	qids := slices.Sorted(maps.Keys(r.ds.Qrels))
	for _, qid := range qids {
		rels := r.ds.Qrels[qid]
		var ids []string
		for id := range rels {
			ids = append(ids, id)
		}
		j, _ := json.Marshal(map[string]any{"query": r.ds.Queries[qid], "pos_ids": ids})
		fmt.Fprintf(&b, "%s\n", j)
		if n++; n == 24 {
			break
		}
	}
	pairs := writeFile(t, "squad40.jsonl", b.String())
	opt := DefaultOptions()
	opt.TopK = 16
	teacher := &CrossEncoderTeacher{R: ce, Label: "cross-encoder:minilm-random-head"}
	out, st, err := mineWith(t, &EngineRetriever{E: r.eng}, EngineCorpus{r.eng}, teacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	st.Write(&sb)
	t.Logf("cross-encoder teacher on 24 SQuAD questions:\n%s", sb.String())
	if st.PosScores.Max >= 0 {
		t.Fatalf("test premise: positive logits should be negative, max %v", st.PosScores.Max)
	}
	anchor := map[string]float64{}
	recs := readFlag(t, out)
	for _, rec := range recs {
		if a, ok := anchor[rec.Query]; !ok || rec.PosScores[0] < a {
			anchor[rec.Query] = rec.PosScores[0]
		}
	}
	for i, rec := range recs {
		th := Threshold(anchor[rec.Query], opt.Margin)
		if !(th < anchor[rec.Query]) {
			t.Fatalf("line %d: threshold %v not below the negative anchor %v", i+1, th, anchor[rec.Query])
		}
		for j, s := range rec.NegScores {
			if s > th {
				t.Errorf("line %d: negative %d logit %v above threshold %v", i+1, j, s, th)
			}
		}
		if rec.Teacher != teacher.Label {
			t.Fatalf("line %d: teacher %q", i+1, rec.Teacher)
		}
	}
	if st.DroppedMargin == 0 || st.Negatives == 0 {
		t.Errorf("margin dropped %d, kept %d: expected both", st.DroppedMargin, st.Negatives)
	}
}
