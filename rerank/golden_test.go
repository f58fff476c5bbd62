package rerank

import (
	"context"
	"math"
	"testing"

	"github.com/anna-search/anna/internal/inference/inferencetest"
)

// testdata/golden.json holds scores and logits recorded with the reranker
// as it was before its session, run and batching moved to internal/inference
// (commit 2ed49f5), so that refactors can be checked for bit-identical
// output (go test -run Golden -golden.exact; see inferencetest.Golden).

// goldenHead is a fixed, arbitrary classifier head with labels rows.
func goldenHead(H, labels int) (w, b []float32) {
	w = make([]float32, labels*H)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)*0.7)) * 0.2
	}
	b = make([]float32, labels)
	for i := range b {
		b[i] = 0.5 - float32(i)
	}
	return w, b
}

func TestGoldenScores(t *testing.T) {
	H := minilm(t).cfg.HiddenSize
	docs := append(scoreDocs(),
		"Ünïcödé text — with dashes and emoji 🙂",
		"Translation happens on ribosomes, in the cytoplasm or on the rough endoplasmic reticulum.")
	runs := []struct {
		name   string
		labels int
		opts   Options
	}{
		{"1 label, 2 intra-op threads, batches of 3", 1, Options{IntraOpThreads: 2, BatchSize: 3}},
		{"2 labels, defaults", 2, Options{}},
		{"3 labels, label 1, max length 32, batches of 4", 3, Options{Label: 1, MaxLength: 32, BatchSize: 4}},
	}
	ctx := context.Background()
	var got []inferencetest.Case
	for _, r := range runs {
		w, b := goldenHead(H, r.labels)
		rr := export(t, w, b, r.opts)
		scores, err := rr.Score(ctx, scoreQuery, docs)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		logits, err := rr.Logits(ctx, scoreQuery, docs)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		rows := make([][]float32, len(docs))
		for i := range rows {
			rows[i] = logits[i*r.labels : (i+1)*r.labels]
		}
		got = append(got, inferencetest.Case{Name: r.name + ": scores", Rows: [][]float32{scores}},
			inferencetest.Case{Name: r.name + ": logits", Rows: rows})
	}
	inferencetest.Golden(t, "testdata/golden.json", got, 1e-4)
}
