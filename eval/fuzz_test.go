package eval

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// FuzzReadTREC: the TREC run reader on any input: it fails naming the
// input, or gives each query's hits in order (score descending) with no
// document twice; a run it reads, written back, reads the same.
func FuzzReadTREC(f *testing.F) {
	f.Add([]byte("q1 Q0 d1 1 12.5 anna\nq1 Q0 d2 2 3 anna\nq2 Q0 d9 1 -1e3 anna\n"))
	f.Add([]byte("q1 Q0 d1 1 1 x\nq1 Q0 d1 2 1 x\n"))
	f.Add([]byte("q Q0 d x 1 t\n\n  \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		run, err := ReadTREC(bytes.NewReader(data), "run.txt")
		if err != nil {
			if !strings.Contains(err.Error(), "run.txt") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		for q, hits := range run {
			seen := map[string]bool{}
			for i, h := range hits {
				if seen[h.ID] {
					t.Fatalf("query %s: %s twice", q, h.ID)
				}
				seen[h.ID] = true
				if i > 0 && hits[i-1].Score < h.Score {
					t.Fatalf("query %s: hits out of order: %v", q, hits)
				}
			}
		}
		var b bytes.Buffer
		if err := WriteTREC(&b, run, "again"); err != nil {
			return // IDs a TREC run cannot hold (none read here should be)
		}
		again, err := ReadTREC(&b, "again")
		if err != nil {
			t.Fatalf("a run written back does not read: %v", err)
		}
		if !sameRun(run, again) {
			t.Fatalf("run %v written back reads as %v", run, again)
		}
	})
}

// sameRun compares runs by IDs and scores (NaN equal to NaN).
func sameRun(a, b Run) bool {
	if len(a) != len(b) {
		return false
	}
	for q, ha := range a {
		hb := b[q]
		if len(ha) != len(hb) {
			return false
		}
		for i := range ha {
			if ha[i].ID != hb[i].ID || ha[i].Score != hb[i].Score && !(math.IsNaN(ha[i].Score) && math.IsNaN(hb[i].Score)) {
				return false
			}
		}
	}
	return true
}

// FuzzReadPairs: the STS and NLI pair readers on any input: they fail
// naming the input, or every pair has what the reader promises (a finite
// score; a known label).
func FuzzReadPairs(f *testing.F) {
	f.Add([]byte(`{"sentence1": "a", "sentence2": "b", "score": 4.5}` + "\n" + `{"premise": "p", "hypothesis": "h", "label": "neutral"}`))
	f.Add([]byte(`{"sentence1": "a", "score": 1e999}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pairs, err := ReadPairs(bytes.NewReader(data), "sts.jsonl")
		if err != nil && !strings.Contains(err.Error(), "sts.jsonl") {
			t.Fatalf("error %q does not name the input", err)
		}
		for _, p := range pairs {
			if math.IsNaN(p.Score) || math.IsInf(p.Score, 0) {
				t.Fatalf("a pair without a finite score: %+v", p)
			}
		}
		nli, err := ReadNLIPairs(bytes.NewReader(data), "nli.jsonl")
		if err != nil && !strings.Contains(err.Error(), "nli.jsonl") {
			t.Fatalf("error %q does not name the input", err)
		}
		for _, p := range nli {
			if p.Label != "entailment" && p.Label != "neutral" && p.Label != "contradiction" {
				t.Fatalf("a pair with label %q", p.Label)
			}
		}
	})
}
