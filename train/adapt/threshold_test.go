package adapt

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/mining"
)

// fakeTeacher scores a (query, document) pair from a table (0.5 when
// absent); fakeCorpus retrieves every document, in ID order.
type fakeTeacher map[[2]string]float64

func (fakeTeacher) Name() string { return "fake" }

func (t fakeTeacher) Score(_ context.Context, q mining.Query, docs []mining.Doc) ([]float64, error) {
	out := make([]float64, len(docs))
	for i, d := range docs {
		s, ok := t[[2]string{q.Text, d.ID}]
		if !ok {
			s = 0.5
		}
		out[i] = s
	}
	return out, nil
}

type fakeCorpus []string

func (c fakeCorpus) Text(_ context.Context, id string) (string, bool, error) {
	return "the text of " + id, slices.Contains(c, id), nil
}

func (c fakeCorpus) Retrieve(_ context.Context, _ mining.Query, k int) ([]mining.Candidate, error) {
	var out []mining.Candidate
	for i, id := range c[:min(k, len(c))] {
		out = append(out, mining.Candidate{ID: id, Text: "the text of " + id, Score: 1 / float64(i+1), Rank: i})
	}
	return out, nil
}

func writePairs(t *testing.T, path string, ps []pair) {
	t.Helper()
	var b strings.Builder
	for _, p := range ps {
		bs, _ := json.Marshal(p)
		b.Write(append(bs, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func minedQueries(t *testing.T, path string) []string {
	t.Helper()
	var qs []string
	if err := eachRecord(path, func(_ []byte, r flagembedding.Record) error { qs = append(qs, r.Query); return nil }); err != nil {
		t.Fatal(err)
	}
	return qs
}

// TestLogThreshold: a logged query's top document is kept only when the
// (fake) teacher ranks it first and scores it at least the tenth
// percentile of its scores of the extractive queries' confirmed
// positives; those the teacher does not confirm are filtered as before;
// the threshold, the kept and the dropped are reported, for training and
// held-out queries alike; too few reference scores fall back to even odds.
func TestLogThreshold(t *testing.T) {
	work := t.TempDir()
	var docs fakeCorpus
	for i := range 40 {
		docs = append(docs, fmt.Sprintf("d%02d", i))
	}
	teacher := fakeTeacher{}
	var made, held []pair
	// 24 extractive training queries, their documents scored 10 … 33 (one,
	// "unconfirmed", below another document: filtered, not a reference).
	for i := range 24 {
		q := fmt.Sprintf("made %d", i)
		made = append(made, pair{Query: q, PosIDs: []string{docs[i]}})
		teacher[[2]string{q, docs[i]}] = float64(10 + i)
	}
	made = append(made, pair{Query: "unconfirmed", PosIDs: []string{docs[30]}})
	teacher[[2]string{"unconfirmed", docs[30]}], teacher[[2]string{"unconfirmed", docs[31]}] = 40, 41
	held = append(held, pair{Query: "made held", PosIDs: []string{docs[35]}})
	teacher[[2]string{"made held", docs[35]}] = 3 // below the threshold, but not a logged query: kept
	// Logged queries: the threshold is the 3rd lowest of 24 (⌈0.1·24⌉), 12.
	logged := map[string]float64{"log low": 11.9, "log at": 12, "log high": 30, "log held high": 25, "log held low": 2}
	var tl, hl []pair
	for q, s := range logged {
		p := pair{Query: q, PosIDs: []string{docs[36]}, log: true}
		teacher[[2]string{q, docs[36]}] = s
		if strings.Contains(q, "held") {
			hl = append(hl, p)
		} else {
			tl = append(tl, p)
		}
	}
	tl = append(tl, pair{Query: "log unconfirmed", PosIDs: []string{docs[37]}, log: true})
	teacher[[2]string{"log unconfirmed", docs[37]}], teacher[[2]string{"log unconfirmed", docs[38]}] = 50, 60
	slices.SortFunc(tl, func(a, b pair) int { return strings.Compare(a.Query, b.Query) })
	slices.SortFunc(hl, func(a, b pair) int { return strings.Compare(a.Query, b.Query) })
	writePairs(t, filepath.Join(work, trainFile), made)
	writePairs(t, filepath.Join(work, trainLogFile), tl)
	writePairs(t, filepath.Join(work, heldoutFile), held)
	writePairs(t, filepath.Join(work, heldoutLogFile), hl)

	c := Defaults()
	c.Work, c.Group = work, 4
	r := &run{cfg: c, st: &state{}}
	err := r.mineAll(context.Background(), func(progress func(done, total int)) (*mining.Miner, error) {
		return mining.New(docs, teacher, docs, r.minerOptions(progress))
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.st.Report
	if rep.LogThreshold != 12 || rep.LogReference != 24 || rep.LogKept != 2 || rep.LogDropped != 1 || rep.Filtered != 2 || rep.Examples != 24+2 {
		t.Fatalf("report %+v: want threshold 12 from 24 scores, 2 logged kept, 1 dropped, 2 unconfirmed filtered, 26 examples", rep)
	}
	got := minedQueries(t, filepath.Join(work, "mined.jsonl"))
	if len(got) != 26 || !slices.Contains(got, "log at") || !slices.Contains(got, "log high") || slices.Contains(got, "log low") || slices.Contains(got, "log unconfirmed") {
		t.Fatalf("mined.jsonl's queries: %q", got)
	}
	if got := minedQueries(t, filepath.Join(work, "heldout-mined.jsonl")); !slices.Equal(got, []string{"made held", "log held high"}) {
		t.Fatalf("heldout-mined.jsonl's queries: %q", got)
	}

	// A given threshold replaces the calibrated one: none (-Inf) keeps
	// every logged query the teacher ranks first, unconfirmed ones still
	// filtered; the report stays JSON.
	none := math.Inf(-1)
	r2 := &run{cfg: c, st: &state{}}
	r2.cfg.LogThreshold = &none
	err = r2.mineAll(context.Background(), func(progress func(done, total int)) (*mining.Miner, error) {
		return mining.New(docs, teacher, docs, r2.minerOptions(progress))
	})
	if err != nil {
		t.Fatal(err)
	}
	rep = r2.st.Report
	if rep.LogReference != -1 || rep.LogKept != 3 || rep.LogDropped != 0 || rep.Examples != 24+3 {
		t.Fatalf("--log-threshold none: report %+v, want 3 logged kept, 0 dropped, 27 examples", rep)
	}
	if got := minedQueries(t, filepath.Join(work, "heldout-mined.jsonl")); !slices.Equal(got, []string{"made held", "log held high", "log held low"}) {
		t.Fatalf("--log-threshold none: heldout-mined.jsonl's queries: %q", got)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("the report with no threshold: %v", err)
	}

	if thr := logThreshold([]float64{5, 6, 7}); thr != 0 {
		t.Fatalf("threshold from 3 scores: %g, want 0 (even odds)", thr)
	}
	if thr := logThreshold([]float64{-1, 4, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}); thr != 2 {
		t.Fatalf("threshold from 20 scores: %g, want the 2nd lowest", thr)
	}
}
