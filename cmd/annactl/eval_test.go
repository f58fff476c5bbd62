package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
)

// writeSelfRetrievalSet writes a BEIR set whose queries are corpus
// documents (as in ArguAna or Quora): each query's text is its own
// document's, and its relevant document shares most of its words. BM25
// ranks the query's own document first and the relevant one second; the
// other documents share no word with it.
func writeSelfRetrievalSet(t *testing.T, dir string) {
	t.Helper()
	docs := []struct{ id, text string }{
		{"a1", "alpha beta gamma delta"}, {"a2", "alpha beta gamma epsilon"},
		{"b1", "kappa lambda mu nu"}, {"b2", "kappa lambda mu xi"},
		{"c1", "rho sigma tau upsilon"}, {"c2", "rho sigma tau phi"},
		{"z1", "unrelated words here"}, {"z2", "nothing shared at all"},
		// A query numbered like a document it is not (independent
		// numberings): query "q7" shares "q7" with this document, whose
		// text is not the query's; it is relevant, and must stay.
		{"q7", "chi psi omega"},
	}
	var corpus, queries strings.Builder
	for _, d := range docs {
		b, _ := json.Marshal(map[string]string{"_id": d.id, "text": d.text})
		corpus.Write(b)
		corpus.WriteByte('\n')
		if strings.HasSuffix(d.id, "1") && d.id[0] != 'z' {
			queries.Write(b)
			queries.WriteByte('\n')
		}
	}
	queries.WriteString(`{"_id": "q7", "text": "omega chi"}` + "\n")
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	os.WriteFile(filepath.Join(dir, "corpus.jsonl"), []byte(corpus.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(queries.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels", "test.tsv"), []byte("query-id\tcorpus-id\tscore\na1\ta2\t1\nb1\tb2\t1\nc1\tc2\t1\nq7\tq7\t1\n"), 0o644)
}

// TestEvalDropsIdenticalIDs: on a set whose queries are corpus documents,
// eval drops a query's own document from its ranking as BEIR does, and the
// scores are the ones computed by hand. Three queries find themselves first
// and their relevant document second; a fourth (q7) is numbered like an
// unrelated document that is its relevant one, found first. With the rule,
// every relevant document is first (nDCG@10 = MRR@10 = MAP = 1: q7's hit
// shares its ID but is not the query, and stays); without it
// (--keep-identical-ids), three are second (nDCG@10 = (3/log2(3) + 1)/4,
// MRR@10 = MAP = (3 × 0.5 + 1)/4). pytrec_eval, run on the TREC runs eval
// writes, agrees.
func TestEvalDropsIdenticalIDs(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	ds := filepath.Join(tmp, "selfset")
	writeSelfRetrievalSet(t, ds)
	for _, tc := range []struct {
		flags           []string
		ndcg, mrr, mapv float64
	}{
		{nil, 1, 1, 1},
		{[]string{"--keep-identical-ids"}, (3/math.Log2(3) + 1) / 4, 0.625, 0.625},
	} {
		runFile := filepath.Join(tmp, "run"+strings.Join(tc.flags, "")+".trec")
		args := append([]string{"eval", ds, "--modes", "lexical", "--json", "--run-out", runFile, "--cache"}, tc.flags...)
		r := mustRun(t, args...)
		var got map[string]struct {
			NDCG float64 `json:"ndcg@10"`
			MRR  float64 `json:"mrr@10"`
			MAP  float64 `json:"map"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%s: %v", r.stdout, err)
		}
		s := got["lexical"]
		if math.Abs(s.NDCG-tc.ndcg) > 1e-9 || math.Abs(s.MRR-tc.mrr) > 1e-9 || math.Abs(s.MAP-tc.mapv) > 1e-9 {
			t.Errorf("eval %v: nDCG@10 %.6f MRR@10 %.6f MAP %.6f, want %.6f %.6f %.6f", tc.flags, s.NDCG, s.MRR, s.MAP, tc.ndcg, tc.mrr, tc.mapv)
		}
		ref := pytrecMeans(t, filepath.Join(ds, "qrels", "test.tsv"), runFile)
		if ref == nil {
			continue
		}
		if math.Abs(ref["ndcg10"]-s.NDCG) > 1e-9 || math.Abs(ref["map"]-s.MAP) > 1e-9 || math.Abs(ref["mrr10"]-s.MRR) > 1e-9 {
			t.Errorf("eval %v disagrees with pytrec_eval on its own run: %+v vs %+v", tc.flags, s, ref)
		}
	}
}

// pytrecMeans scores a TREC run with pytrec_eval (tools/pytrec_eval_ref.py)
// and returns the metrics' means over the judged queries; nil when
// pytrec_eval is not installed.
func pytrecMeans(t *testing.T, qrelsPath, runPath string) map[string]float64 {
	t.Helper()
	python := filepath.Join(home.Dir(), "venv", "bin", "python")
	if err := exec.Command(python, "-c", "import pytrec_eval").Run(); err != nil {
		t.Logf("pytrec_eval not available (make pydeps): %v", err)
		return nil
	}
	qf, err := os.Open(qrelsPath)
	if err != nil {
		t.Fatal(err)
	}
	qrels, err := beir.ReadQrels(qf, qrelsPath)
	qf.Close()
	if err != nil {
		t.Fatal(err)
	}
	rf, err := os.Open(runPath)
	if err != nil {
		t.Fatal(err)
	}
	run, err := eval.ReadTREC(rf, runPath)
	rf.Close()
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"qrels": qrels, "run": run.IDs()})
	cmd := exec.Command(python, filepath.Join("..", "..", "tools", "pytrec_eval_ref.py"))
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pytrec_eval_ref.py: %v", err)
	}
	var per map[string]map[string]float64
	if err := json.Unmarshal(out, &per); err != nil {
		t.Fatal(err)
	}
	means := map[string]float64{}
	for q := range qrels {
		for k, v := range per[q] {
			means[k] += v / float64(len(qrels))
		}
	}
	return means
}

// TestEvalPairTasks: --task sts and --task pairclass embed each distinct
// sentence once and report what the real model makes of pairs whose answer
// is plain: paraphrases score above unrelated sentences (Spearman 1 on
// three pairs ranked as their scores) and entailments above contradictions
// (average precision 1), neutral pairs left out; a bad label names its line.
func TestEvalPairTasks(t *testing.T) {
	needModel(t)
	dir := t.TempDir()
	sts := `{"sentence1": "A man is playing a guitar.", "sentence2": "A man plays the guitar.", "score": 5}
{"sentence1": "A man is playing a guitar.", "sentence2": "A person makes music.", "score": 3}
{"sentence1": "A man is playing a guitar.", "sentence2": "The stock market fell sharply today.", "score": 0}
`
	nli := `{"premise": "A dog runs across a green field.", "hypothesis": "A dog is running on grass.", "label": "entailment"}
{"premise": "A dog runs across a green field.", "hypothesis": "The dog is brown.", "label": "neutral"}
{"premise": "Two children are swimming in a pool.", "hypothesis": "Kids swim in the water.", "label": "entailment"}
{"premise": "A dog runs across a green field.", "hypothesis": "A chef cooks pasta in a restaurant kitchen.", "label": "contradiction"}
`
	os.WriteFile(filepath.Join(dir, "sts.jsonl"), []byte(sts), 0o644)
	os.WriteFile(filepath.Join(dir, "nli.jsonl"), []byte(nli), 0o644)
	var got struct {
		Pairs    int      `json:"pairs"`
		Spearman *float64 `json:"spearman"`
		AP       *float64 `json:"ap"`
	}
	r := mustRun(t, "eval", dir, "--task", "sts", "--split", "sts", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Pairs != 3 || got.Spearman == nil || *got.Spearman != 1 {
		t.Fatalf("sts: %s (%v)", r, err)
	}
	// With an instruction every sentence is embedded as a query under it:
	// one long enough to fill MiniLM's 256 tokens leaves every sentence
	// out, so every cosine is 1 and there is nothing to correlate.
	r = mustRun(t, "eval", dir, "--task", "sts", "--split", "sts", "--json", "--instruction", "Retrieve semantically similar text.")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Spearman == nil || *got.Spearman != 1 || !strings.Contains(r.stdout, `"instruction":"Retrieve semantically similar text."`) {
		t.Fatalf("sts with an instruction: %s (%v)", r, err)
	}
	if r := annactl(t, "", "eval", dir, "--task", "sts", "--split", "sts", "--instruction", strings.Repeat("word ", 300)); r.code == 0 || !strings.Contains(r.stderr, "every pair has the same cosine") {
		t.Fatalf("sts under an instruction that fills the window: %s", r)
	}
	r = mustRun(t, "eval", dir, "--task", "pairclass", "--split", "nli", "--json")
	got.AP = nil
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Pairs != 3 || got.AP == nil || *got.AP != 1 {
		t.Fatalf("pairclass: %s (%v)", r, err)
	}
	os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte(strings.Replace(nli, `"neutral"`, `"unsure"`, 1)), 0o644)
	if r := annactl(t, "", "eval", dir, "--task", "pairclass", "--split", "bad"); r.code == 0 || !strings.Contains(r.stderr, "bad.jsonl:2") {
		t.Fatalf("bad label: %s", r)
	}
}

// TestEvalChooseFusion: eval --choose-fusion on SciFact train (the default
// model, real queries) records the hybrid fusion with the best nDCG@10 of
// the three it prints; stats shows it; a later eval with no --fusion
// reproduces the chosen row exactly, --fusion rrf the RRF row; search
// --explain says the fusion is the index's choice. On these queries score
// fusion beats RRF by more than noise (measured: dbsf 0.7310, minmax 0.7292,
// rrf 0.7146), so the choice is not the default. (The flags' misuses are
// rows of TestFlagsValidated.)
func TestEvalChooseFusion(t *testing.T) {
	needModel(t)
	ds := shareddata.Path(t, "datasets", "scifact")
	idx := filepath.Join(t.TempDir(), "idx")
	type row struct {
		NDCG float64 `json:"ndcg@10"`
	}
	evalJSON := func(args ...string) (map[string]row, result) {
		t.Helper()
		r := mustRun(t, append([]string{"eval", ds, "--split", "train", "--index", idx, "--cache", "--json"}, args...)...)
		var got map[string]row
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		return got, r
	}
	rows, r := evalJSON("--choose-fusion")
	best, bestKey := "", ""
	for _, f := range []string{"rrf", "minmax", "dbsf"} {
		k := "hybrid/" + f
		if _, ok := rows[k]; !ok {
			t.Fatalf("no row %s: %s", k, r)
		}
		if bestKey == "" || rows[k].NDCG > rows[bestKey].NDCG {
			best, bestKey = f, k
		}
	}
	if best == "rrf" {
		t.Fatalf("RRF chosen on SciFact train (%v): score fusion was measured 0.015 above it", rows)
	}
	if !strings.Contains(r.stderr, "hybrid fuses by "+best) {
		t.Fatalf("eval did not say it recorded %s: %s", best, r)
	}
	var st struct {
		Fusion string `json:"fusion"`
		Choice *struct {
			Fusion string `json:"fusion"`
			Why    string `json:"why"`
			Active bool   `json:"active"`
		} `json:"fusion_choice"`
	}
	sr := mustRun(t, "stats", "--index", idx, "--json")
	if err := json.Unmarshal([]byte(sr.stdout), &st); err != nil || st.Fusion != best || st.Choice == nil || !st.Choice.Active || !strings.Contains(st.Choice.Why, "split train") {
		t.Fatalf("stats after choosing %s: %s (%v)", best, sr, err)
	}
	if got, r := evalJSON("--modes", "hybrid"); math.Abs(got["hybrid"].NDCG-rows[bestKey].NDCG) > 1e-12 || !strings.Contains(mustRun(t, "eval", ds, "--split", "train", "--index", idx, "--modes", "hybrid").stdout, "fused by "+best+" (the index's choice)") {
		t.Fatalf("hybrid with the index's choice: %v, want %v (%s)", got["hybrid"], rows[bestKey], r)
	}
	if got, _ := evalJSON("--modes", "hybrid", "--fusion", "rrf"); math.Abs(got["hybrid"].NDCG-rows["hybrid/rrf"].NDCG) > 1e-12 {
		t.Fatalf("hybrid --fusion rrf: %v, want %v", got["hybrid"], rows["hybrid/rrf"])
	}
	if r := mustRun(t, "search", "--index", idx, "--explain", "vitamin D deficiency"); !strings.Contains(r.stderr, "fused by "+best+", the index's choice") {
		t.Fatalf("search --explain does not say how it fused: %s", r)
	}
}

// TestEvalPrecision: eval indexes as annactl index does — the default
// model at int8 unless --precision float32 — and names the model.
func TestEvalPrecision(t *testing.T) {
	needModel(t)
	ownHome(t)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "with " + home.DefaultModelName + "-int8"},
		{[]string{"--precision", "float32"}, "with " + home.DefaultModelName + "\n"},
	} {
		r := mustRun(t, append([]string{"eval", "../../testdata/demo", "--modes", "dense"}, c.flags...)...)
		if first, _, _ := strings.Cut(r.stdout, "\n"); !strings.Contains(first+"\n", c.want) {
			t.Fatalf("eval %v: %q; want %q", c.flags, first, c.want)
		}
	}
	if r := annactl(t, "", "eval", "../../testdata/demo", "--precision", "int4"); r.code != 2 || !strings.Contains(r.stderr, "--precision") {
		t.Fatalf("--precision int4: %s", r)
	}
}
