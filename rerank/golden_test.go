package rerank

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
)

// The golden file holds scores recorded with the reranker as it was before
// its session, run and batching moved to internal/bert (commit 2ed49f5), so
// that refactors can be checked for bit-identical output. ONNX Runtime's
// kernels differ between CPUs, so on another machine the scores may differ
// in the last bits: the test then accepts 1e-4 and logs how many were not
// bit-identical, unless -golden.exact is given.
var (
	updateGolden = flag.Bool("golden.update", false, "rewrite testdata/golden.json from the current code")
	exactGolden  = flag.Bool("golden.exact", false, "require bit-identical scores against testdata/golden.json")
)

const goldenFile = "testdata/golden.json"

var (
	goldenQuery = "what do ribosomes do?"
	goldenDocs  = []string{
		"Ribosomes synthesise proteins by translating messenger RNA.",
		"",
		"The stock market fell sharply on Monday.",
		strings.Repeat("Ribosomes are molecular machines found in all living cells. ", 60),
		"short",
		"Mitochondria produce most of the cell's ATP.",
		"caf\xe9",
		"Ünïcödé text — with dashes and emoji 🙂",
		"Translation happens on ribosomes, in the cytoplasm or on the rough endoplasmic reticulum.",
	}
)

type goldenCase struct {
	Name   string   `json:"name"`
	Scores []uint32 `json:"scores"` // float32 bits
	Logits []uint32 `json:"logits"` // float32 bits, [docs × labels]
}

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

func goldenCases(t *testing.T) []goldenCase {
	H := minilm(t).cfg.HiddenSize
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
	out := make([]goldenCase, len(runs))
	for i, r := range runs {
		w, b := goldenHead(H, r.labels)
		rr := export(t, w, b, r.opts)
		scores, err := rr.Score(ctx, goldenQuery, goldenDocs)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		logits, err := rr.Logits(ctx, goldenQuery, goldenDocs)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		c := goldenCase{Name: r.name}
		for _, x := range scores {
			c.Scores = append(c.Scores, math.Float32bits(x))
		}
		for _, x := range logits {
			c.Logits = append(c.Logits, math.Float32bits(x))
		}
		out[i] = c
	}
	return out
}

func TestGoldenScores(t *testing.T) {
	got := goldenCases(t)
	if *updateGolden {
		b, err := json.MarshalIndent(got, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var want []goldenCase
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s has %d cases, the test runs %d", goldenFile, len(want), len(got))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || len(g.Scores) != len(w.Scores) || len(g.Logits) != len(w.Logits) {
			t.Errorf("case %d: got %q (%d scores, %d logits), golden %q (%d, %d)", i, g.Name, len(g.Scores), len(g.Logits), w.Name, len(w.Scores), len(w.Logits))
			continue
		}
		values, differ, worst := 0, 0, 0.0
		for _, pair := range [][2][]uint32{{g.Scores, w.Scores}, {g.Logits, w.Logits}} {
			for k := range pair[0] {
				values++
				if pair[0][k] != pair[1][k] {
					differ++
					worst = math.Max(worst, math.Abs(float64(math.Float32frombits(pair[0][k])-math.Float32frombits(pair[1][k]))))
				}
			}
		}
		t.Logf("%s: %d of %d scores and logits bit-identical to the golden file (max diff %.2g)", w.Name, values-differ, values, worst)
		if differ > 0 && (*exactGolden || worst > 1e-4) {
			t.Errorf("%s: %d of %d values differ from the golden file, max diff %.2g", w.Name, differ, values, worst)
		}
	}
}
