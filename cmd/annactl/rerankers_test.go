package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/eval/retrieval"
	"github.com/anna-search/anna/internal/inference/inferencetest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
)

// TestRerankerUsedOnlyWhereMeasuredToHelp: `search --mode rerank` and
// mine-negatives' default teacher take an installed reranker unasked only
// when its manifest records that it helped; `eval --record` writes those
// measurements, and `models list` shows them.
func TestRerankerUsedOnlyWhereMeasuredToHelp(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	ce := filepath.Join(tmp, "ce")
	inferencetest.WriteCrossEncoder(t, ce, 0)
	h := ownHome(t)

	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 30, 6, 3)
	idx := filepath.Join(tmp, "idx")
	mustRun(t, "index", "--index", idx, filepath.Join(ds, "corpus.jsonl"))
	search := []string{"search", "--index", idx, "--mode", "rerank", "--explain", "--json", "alpha beta gamma"}

	r := annactl(t, "", search...)
	if r.code != 2 || !strings.Contains(r.stderr, "no reranker is installed") || !strings.Contains(r.stderr, "annactl rerankers build") {
		t.Fatalf("no reranker installed: %s", r)
	}
	mustRun(t, "models", "add", ce, "rr")
	rr := filepath.Join(h, "models", "rr")
	if r = annactl(t, "", search...); r.code != 2 || !strings.Contains(r.stderr, "rr (not measured)") {
		t.Fatalf("an unmeasured reranker was used, or not named: %s", r)
	}
	if r = mustRun(t, "models", "list"); !strings.Contains(r.stdout, "not measured") {
		t.Fatalf("models list: %s", r)
	}

	// --record needs each rerank mode's candidates evaluated too.
	if r = annactl(t, "", "eval", ds, "--split", "train", "--index", idx, "--reranker", "rr", "--modes", "lexical+rerank", "--record"); r.code != 2 || !strings.Contains(r.stderr, "add it to --modes") {
		t.Fatalf("--record without its baseline: %s", r)
	}
	r = mustRun(t, "eval", ds, "--split", "train", "--index", idx, "--reranker", "rr", "--modes", "lexical,lexical+rerank,lexical+rerank+rrf", "--record", "--json")
	var scores map[string]struct {
		NDCG float64 `json:"ndcg@10"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &scores); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, r.stdout)
	}
	man, err := model.LoadManifest(rr)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Measured) != 2 {
		t.Fatalf("measurements: %+v", man.Measured)
	}
	for i, key := range []string{"lexical+rerank", "lexical+rerank+rrf"} {
		x := man.Measured[i]
		if x.Dataset != "ds" || x.Split != "train" || x.Candidates != "lexical" || x.Depth != 100 || x.Queries != 6 || x.Embedder != "" ||
			x.Fusion != (i == 1) || x.Before != scores["lexical"].NDCG || x.After != scores[key].NDCG {
			t.Fatalf("measurement %+v, eval printed %+v", x, scores)
		}
	}

	// Whatever the random head did, replace those with measurements that
	// lower nDCG@10 in both uses; then let it help fused with the lists.
	set := func(fusion bool, before, after float64) {
		t.Helper()
		x := man.Measured[0]
		x.Fusion, x.Before, x.After = fusion, before, after
		y := x
		y.Candidates, y.Embedder = "hybrid", "f"
		if err := model.RecordMeasurements(rr, []model.Measurement{x, y}); err != nil {
			t.Fatal(err)
		}
	}
	set(false, 0.6, 0.5)
	set(true, 0.6, 0.59)
	if r = annactl(t, "", search...); r.code != 2 || !strings.Contains(r.stderr, "does not help") {
		t.Fatalf("a reranker that lowers nDCG@10 was used: %s", r)
	}
	set(true, 0.5, 0.575)
	r = mustRun(t, search...)
	var first struct {
		Score   float64 `json:"score"`
		Explain []struct {
			List  string  `json:"list"`
			Score float64 `json:"score"`
		} `json:"explain"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	last := first.Explain[len(first.Explain)-1]
	if !strings.Contains(r.stderr, "reranking with "+rr) || last.List != "rerank" || last.Score == first.Score {
		t.Fatalf("the helpful reranker was not used fused by RRF (the way it helped): %s", r)
	}
	if r = mustRun(t, "models", "list"); !strings.Contains(r.stdout, "helps (used unasked, fused by RRF)") ||
		!strings.Contains(r.stdout, "fused with the candidates' lists by RRF nDCG@10 +0.0750 over 2") {
		t.Fatalf("models list: %s", r)
	}
	// Told otherwise, it replaces the order.
	r = mustRun(t, append(search, "--rerank-fusion=false")...)
	if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	if last = first.Explain[len(first.Explain)-1]; last.List != "rerank" || last.Score != first.Score {
		t.Fatalf("--rerank-fusion=false: %s", r)
	}

	// mine-negatives' default teacher labels with the reranker's scores
	// alone: one that helped only fused with the lists is not taken.
	mine := func(out string) (result, string) {
		t.Helper()
		r := mustRun(t, "mine-negatives", "--dataset", ds, "--split", "train", "--index", idx, "--output", out, "--negatives", "3", "--top-k", "10")
		var st struct {
			Teacher string `json:"teacher"`
		}
		if b, err := os.ReadFile(out + ".stats.json"); err != nil || json.Unmarshal(b, &st) != nil || st.Teacher == "" {
			t.Fatalf("stats: %v", err)
		}
		return r, st.Teacher
	}
	r, teacher := mine(filepath.Join(tmp, "mined-fused.jsonl"))
	if !strings.HasPrefix(teacher, "fusion(") || !strings.Contains(r.stderr, "measured to help on its own") {
		t.Fatalf("teacher %q with a reranker that helped only fused: %s", teacher, r)
	}
	set(false, 0.5, 0.51)
	r, teacher = mine(filepath.Join(tmp, "mined-alone.jsonl"))
	if strings.HasPrefix(teacher, "fusion") || !strings.Contains(r.stderr, "an installed reranker measured to help on its own") {
		t.Fatalf("teacher %q with a reranker that helps alone: %s", teacher, r)
	}
}

// countingReranker scores a document by its length and counts the pairs.
type countingReranker struct{ pairs int }

func (c *countingReranker) Score(_ context.Context, query string, docs []string) ([]float32, error) {
	c.pairs += len(docs)
	out := make([]float32, len(docs))
	for i, d := range docs {
		out[i] = float32(len(query) + len(d))
	}
	return out, nil
}

func TestPairCacheScoresEachPairOnce(t *testing.T) {
	rr := &countingReranker{}
	c := retrieval.NewPairCache(rr)
	ctx := context.Background()
	a, _ := c.Score(ctx, "q", []string{"a", "bb", "ccc"})
	b, _ := c.Score(ctx, "q", []string{"ccc", "dddd", "a"})
	o, _ := c.Score(ctx, "other", []string{"a"})
	if rr.pairs != 5 {
		t.Errorf("%d pairs scored, want 5 (3, then dddd, then the other query's)", rr.pairs)
	}
	if !slices.Equal(a, []float32{2, 3, 4}) || !slices.Equal(b, []float32{4, 5, 2}) || !slices.Equal(o, []float32{6}) {
		t.Errorf("scores %v %v %v", a, b, o)
	}
}

// TestRerankersBuild: `annactl rerankers build` on a tiny budget (a 2-layer
// random BERT as base, 2 steps, 30 documents) mines, trains, measures and
// installs a reranker that models list then shows; run again it finds the
// work done; without its collection it says what is needed.
func TestRerankersBuild(t *testing.T) {
	needModel(t)
	mc := testmodels.MiniLMVocab(testmodels.BERT())
	base := testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7)) // with the installed tokenizer
	h := ownHome(t)
	tmp := t.TempDir()
	if r := annactl(t, "", "rerankers", "build", "--data", filepath.Join(tmp, "none")); r.code != 2 ||
		!strings.Contains(r.stderr, "qrels/train.tsv") || !strings.Contains(r.stderr, "scifact.zip") {
		t.Fatalf("no collection: %s", r)
	}
	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 30, 12, 3)
	qrels, err := os.ReadFile(filepath.Join(ds, "qrels", "train.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ds, "qrels", "test.tsv"), qrels, 0o644); err != nil {
		t.Fatal(err)
	}
	build := []string{"rerankers", "build", "--data", ds, "--base", base, "--name", "rr-tiny", "--work", filepath.Join(tmp, "work"),
		"--steps", "2", "--batch-queries", "2", "--group", "3", "--max-length", "32", "--rerank-depth", "10"}
	r := mustRun(t, build...)
	installed := filepath.Join(h, "models", "rr-tiny")
	if !strings.Contains(r.stdout, "installed: "+installed) || strings.Count(r.stdout, "reranked") != 4 ||
		!strings.Contains(r.stderr, "train: 2/2 steps") || !strings.Contains(r.stderr, "pairs to score") {
		t.Fatalf("build: %s", r)
	}
	man, err := model.LoadManifest(installed)
	if err != nil {
		t.Fatal(err)
	}
	if man.Task != model.TaskRerank || len(man.Measured) != 4 || man.Measured[0].Dataset != "ds" || man.Measured[0].Depth != 10 {
		t.Fatalf("installed manifest: task %q, measurements %+v", man.Task, man.Measured)
	}
	if r := mustRun(t, "models", "list"); !strings.Contains(r.stdout, "rr-tiny") || !strings.Contains(r.stdout, "over 2") {
		t.Fatalf("models list: %s", r)
	}
	again := mustRun(t, build...)
	if strings.Contains(again.stderr, "/2 steps") || strings.Contains(again.stderr, "pairs to score") || strings.Count(again.stdout, "reranked") != 4 {
		t.Fatalf("the finished build ran a stage again: %s", again)
	}
}

// TestRerankersBuildGeneral: without --data, a general reranker from the
// sets --datasets holds, one left out and measured on; bad combinations
// and an empty folder are usage errors that say what is needed.
func TestRerankersBuildGeneral(t *testing.T) {
	needModel(t)
	mc := testmodels.MiniLMVocab(testmodels.BERT())
	base := testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7))
	h := ownHome(t)
	tmp := t.TempDir()
	datasets := filepath.Join(tmp, "datasets")
	for _, n := range []string{"scifact", "cacm"} {
		ds := writeBEIR(t, filepath.Join(datasets, n), 30, 12, 3)
		qrels, err := os.ReadFile(filepath.Join(ds, "qrels", "train.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ds, "qrels", "test.tsv"), qrels, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := annactl(t, "", "rerankers", "build", "--datasets", filepath.Join(tmp, "none")); r.code != 2 || !strings.Contains(r.stderr, "none of the general sets (scifact, cranfield, cisi, cacm, squad2-dev-half)") {
		t.Fatalf("an empty datasets folder: %s", r)
	}
	if r := annactl(t, "", "rerankers", "build", "--data", filepath.Join(datasets, "scifact"), "--leave-out", "cacm"); r.code != 2 || !strings.Contains(r.stderr, "not with --datasets or --leave-out") {
		t.Fatalf("--data with --leave-out: %s", r)
	}
	r := mustRun(t, "rerankers", "build", "--datasets", datasets, "--leave-out", "cacm", "--base", base, "--name", "rr-general", "--work", filepath.Join(tmp, "work"),
		"--steps", "2", "--batch-queries", "2", "--group", "3", "--max-length", "32", "--rerank-depth", "10", "--teacher-model", "none", "--pseudo-queries", "8")
	if !strings.Contains(r.stderr, "a general reranker from scifact train, scifact pseudo-queries; left out, and measured on: cacm") ||
		!strings.Contains(r.stdout, "cacm test: hybrid top 10 reranked") || strings.Contains(r.stdout, "scifact test") {
		t.Fatalf("general build: %s", r)
	}
	man, err := model.LoadManifest(filepath.Join(h, "models", "rr-general"))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range man.Measured {
		if x.Dataset != "cacm" {
			t.Fatalf("measured on %s, a set it trained on: %+v", x.Dataset, man.Measured)
		}
	}
}

// TestSingular: the unit a progress line's rate is per.
func TestSingular(t *testing.T) {
	for unit, want := range map[string]string{"steps": "step", "held-out queries": "held-out query", "queries (train.jsonl)": "query (train.jsonl)",
		"documents (doc2query)": "document (doc2query)", "check documents": "check document", "MB": "MB"} {
		if got := singular(unit); got != want {
			t.Errorf("singular(%q) = %q, want %q", unit, got, want)
		}
	}
}
