package encoder

import (
	"context"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/inference/inferencetest"
)

// testdata/golden.json holds vectors recorded with the encoder as it was
// before its session, run and batching moved to internal/bert, now internal/inference (commit
// 2ed49f5), so that refactors can be checked for bit-identical output
// (go test -run Golden -golden.exact; see inferencetest.Golden).

// goldenTexts cover the input handling: empty, whitespace, invalid UTF-8,
// non-ASCII, very long (truncated) and lengths that sort across batches.
var goldenTexts = []string{
	"",
	"   ",
	"short",
	"The cat sits outside",
	"A man is playing guitar.",
	"caf\xe9 au lait",
	"Ünïcödé text — with dashes and emoji 🙂",
	"Mid-length text on ribosomes and how they translate messenger RNA into protein.",
	"A considerably longer sentence about protein folding, with several clauses, commas and a number: 42.",
	strings.Repeat("very long input that will be truncated to the model's max length ", 40),
	"what do ribosomes do?",
	"Mitochondria produce most of the cell's ATP through oxidative phosphorylation.",
}

func TestGoldenVectors(t *testing.T) {
	ctx := context.Background()
	prompt := Prompt{Instruction: "Find abstracts that answer the question", Examples: []Example{{Query: "a", Response: "b"}}}
	runs := []struct {
		name  string
		opts  Options
		embed func(*Model) ([][]float32, error)
	}{
		{"documents, 2 intra-op threads", Options{IntraOpThreads: 2}, func(e *Model) ([][]float32, error) {
			return e.EmbedDocuments(ctx, goldenTexts)
		}},
		{"few-shot queries, batches of 3 on 2 workers, max length 64", Options{BatchSize: 3, Workers: 2, MaxLength: 64}, func(e *Model) ([][]float32, error) {
			return e.EmbedQueries(ctx, goldenTexts, prompt)
		}},
	}
	got := make([]inferencetest.Case, len(runs))
	for i, r := range runs {
		enc, err := Load(ctx, testModel(t), r.opts)
		if err != nil {
			t.Fatal(err)
		}
		vecs, err := r.embed(enc)
		enc.Close()
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		got[i] = inferencetest.Case{Name: r.name, Key: enc.Fingerprint(), Rows: vecs}
	}
	inferencetest.Golden(t, "testdata/golden.json", got, 1e-5)
}
