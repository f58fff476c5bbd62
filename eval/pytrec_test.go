package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
)

// TestAgainstPytrecEval compares every metric, per query, with pytrec_eval
// (trec_eval, what BEIR uses) on Cranfield's graded judgments (grades 1..5)
// and seeded pseudo-random runs that mix judged and unjudged docs.
func TestAgainstPytrecEval(t *testing.T) {
	dir := shareddata.Path(t, "datasets", "cranfield")
	python := filepath.Join(home.Dir(), "venv", "bin", "python")
	if err := exec.Command(python, "-c", "import pytrec_eval").Run(); err != nil {
		t.Skipf("pytrec_eval not available in %s (run `make pydeps`): %v", python, err)
	}
	ds, err := beir.Load(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, d := range ds.Corpus {
		all = append(all, d.ID)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	run := map[string][]string{}
	qids := make([]string, 0, len(ds.Qrels))
	for qid := range ds.Qrels {
		qids = append(qids, qid)
	}
	sort.Strings(qids)
	for i, qid := range qids {
		if i%7 == 6 {
			continue // some queries get no run at all
		}
		// Judged docs (every grade, some dropped) shuffled among a few
		// unjudged ones at the top, then random docs, up to 150 long.
		var judged []string
		for d := range ds.Qrels[qid] {
			judged = append(judged, d)
		}
		sort.Strings(judged)
		var pool []string
		for _, d := range judged {
			if rng.IntN(4) > 0 {
				pool = append(pool, d)
			}
		}
		for range 8 {
			pool = append(pool, all[rng.IntN(len(all))])
		}
		rng.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
		for range 150 {
			pool = append(pool, all[rng.IntN(len(all))])
		}
		seen := map[string]bool{}
		var ranked []string
		for _, d := range pool {
			if !seen[d] && len(ranked) < 150 {
				seen[d] = true
				ranked = append(ranked, d)
			}
		}
		run[qid] = ranked
	}

	in, err := json.Marshal(map[string]any{"qrels": ds.Qrels, "run": run})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("..", "tools", "pytrec_eval_ref.py")
	cmd := exec.Command(python, script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	var ref map[string]map[string]float64
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for qid, ranked := range run {
		r, ok := ref[qid]
		if !ok {
			t.Fatalf("pytrec_eval returned nothing for %s", qid)
		}
		rels := ds.Qrels[qid]
		for name, got := range map[string]float64{
			"ndcg10":    NDCG(ranked, rels, 10),
			"recall100": Recall(ranked, rels, 100),
			"map":       AP(ranked, rels),
			"mrr10":     MRR(ranked, rels, 10),
		} {
			// trec_eval prints through doubles computed the same way; allow
			// only rounding differences.
			if math.Abs(got-r[name]) > 1e-9 {
				t.Errorf("query %s %s = %.12f, pytrec_eval %.12f", qid, name, got, r[name])
			}
		}
		checked++
	}
	if checked < 150 {
		t.Fatalf("only %d queries compared", checked)
	}
	s := Evaluate(run, ds.Qrels)
	t.Logf("compared %d queries with pytrec_eval; run means (missing queries as 0): %s", checked, fmt.Sprintf("nDCG@10 %.4f Recall@100 %.4f MRR@10 %.4f MAP %.4f", s.NDCG10, s.Recall100, s.MRR10, s.MAP))
}
