package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMineChecksSplitFirst: a split the dataset lacks is refused, naming the
// splits it has, before the corpus is indexed (which takes minutes on a
// real corpus).
func TestMineChecksSplitFirst(t *testing.T) {
	tmp := t.TempDir()
	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 10, 4, 1)
	idx := filepath.Join(tmp, "idx")
	r := annactl(t, "", "mine-negatives", "--dataset", ds, "--split", "test", "--index", idx, "--output", filepath.Join(tmp, "m.jsonl"))
	if r.code != 2 || !strings.Contains(r.stderr, `split "test": `+ds+` has no qrels/test.tsv; its splits: train`) {
		t.Errorf("missing split: %s", r)
	}
	if _, err := os.Stat(idx); err == nil {
		t.Error("the corpus was indexed before the split was checked")
	}
	r = annactl(t, "", "mine-negatives", "--dataset", filepath.Join(tmp, "none"), "--output", filepath.Join(tmp, "m.jsonl"))
	if r.code != 1 || !strings.Contains(r.stderr, "no such file or directory") {
		t.Errorf("missing dataset: %s", r)
	}
}

// TestMineMissingPositive: qrels rows whose document is not in the corpus
// (published BEIR sets have them) are skipped, counted and named, and the
// run writes the rest; --strict fails on them instead.
func TestMineMissingPositive(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 40, 12, 4)
	qrels := filepath.Join(ds, "qrels", "train.tsv")
	f, err := os.OpenFile(qrels, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("q03\tgone-a\t1\nq05\tgone-b\t1\n")
	f.Close()
	args := []string{"mine-negatives", "--dataset", ds, "--split", "train", "--index", filepath.Join(tmp, "idx"),
		"--negatives", "3", "--top-k", "20", "--teacher", "dense"}
	r := mustRun(t, append(args, "--output", filepath.Join(tmp, "m.jsonl"))...)
	if !strings.Contains(r.stderr, "positives not in corpus: 2 skipped (--strict fails instead): q03 → gone-a, q05 → gone-b") {
		t.Errorf("summary: %s", r)
	}
	if !strings.Contains(r.stderr, "from 12 (query, positive) pairs") {
		t.Errorf("pairs: %s", r)
	}
	r = annactl(t, "", append(args, "--output", filepath.Join(tmp, "s.jsonl"), "--strict")...)
	if r.code != 1 || !strings.Contains(r.stderr, `positive "gone-a" is not in the corpus`) {
		t.Errorf("--strict: %s", r)
	}
}
