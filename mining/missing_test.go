package mining

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingPositiveSkipped: a positive the corpus does not hold (published
// BEIR sets judge such documents) is skipped and counted, named in the
// summary, and the query's other positives are still mined; Strict fails
// on it instead.
func TestMissingPositiveSkipped(t *testing.T) {
	c, _ := synth(t, 50, 1, 3)
	lines := []string{
		`{"query":"w1 w2","pos_ids":["d0","gone1"]}`, // one of two positives missing
		`{"query":"w3 w4","pos_ids":["gone2"]}`,      // its only positive missing
		`{"query":"w6","pos_ids":["d1"]}`,
	}
	pairs := writeFile(t, "pairs.jsonl", strings.Join(lines, "\n")+"\n")
	opt := DefaultOptions()
	opt.Margin = 0
	out, st, err := mine(t, c, overlapTeacher, pairs, opt)
	if err != nil {
		t.Fatalf("a missing positive stopped the run: %v", err)
	}
	if st.MissingPositives != 2 || st.Pairs != 2 || st.Examples != 2 || len(readFlag(t, out)) != 2 {
		t.Errorf("missing %d pairs %d examples %d; want 2, 2, 2", st.MissingPositives, st.Pairs, st.Examples)
	}
	if st.QueriesDropped != 1 || st.QueriesDroppedMissing != 1 || st.BadUnits != 0 {
		t.Errorf("queries dropped %d (missing %d), bad %d; want 1 (1), 0", st.QueriesDropped, st.QueriesDroppedMissing, st.BadUnits)
	}
	var b bytes.Buffer
	st.Write(&b)
	for _, want := range []string{"positives not in corpus: 2 skipped", "pairs.jsonl:1 → gone1", "pairs.jsonl:2 → gone2",
		"queries dropped:         1 of 3 wrote no example: 1 no positive in the corpus"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	opt.Strict = true
	if _, _, err := mine(t, c, overlapTeacher, pairs, opt); err == nil || !strings.Contains(err.Error(), "pairs.jsonl:1:") || !strings.Contains(err.Error(), `"gone1" is not in the corpus`) {
		t.Errorf("Strict: want an error naming pairs.jsonl:1 and gone1, got %v", err)
	}
}

// TestBEIRMissingPositiveNamedByQuery: from a BEIR split, the summary names a
// missing positive by query ID, and the rest of the run is written.
func TestBEIRMissingPositiveNamedByQuery(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	os.WriteFile(filepath.Join(dir, "corpus.jsonl"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(`{"_id":"1","text":"alpha beta"}`+"\n"+`{"_id":"2","text":"gamma delta"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels", "train.tsv"), []byte("query-id\tcorpus-id\tscore\n1\td1\t1\n2\tmissing\t1\n"), 0o644)
	c := &memCorpus{ids: []string{"d1", "d2", "d3"}, texts: map[string]string{"d1": "alpha beta one", "d2": "alpha two", "d3": "gamma three"}}
	st, out := mineBEIR(t, c, dir, "train")
	if st.MissingPositives != 1 || len(st.MissingFirst) != 1 || st.MissingFirst[0] != "2 → missing" || st.Examples != 1 {
		t.Errorf("missing %d %q, examples %d", st.MissingPositives, st.MissingFirst, st.Examples)
	}
	if recs := readFlag(t, out); len(recs) != 1 || recs[0].Query != "alpha beta" {
		t.Errorf("records %+v", recs)
	}
}

// TestQueryItselfNotACandidate: on a collection whose queries are also
// documents (the query's text stored under its ID), the document that is the
// query is neither a negative nor counted against the teacher's quality
// (evaluation's identical-ID rule); a document that only shares the ID
// (another numbering, another text) stays a candidate.
func TestQueryItselfNotACandidate(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	os.WriteFile(filepath.Join(dir, "corpus.jsonl"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(`{"_id":"a","text":"Red apples grow"}`+"\n"+`{"_id":"b","text":"blue sky clouds"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels", "train.tsv"), []byte("query-id\tcorpus-id\tscore\na\tp1\t1\nb\tp2\t1\n"), 0o644)
	c := &memCorpus{ids: []string{"a", "b", "p1", "p2", "n1", "n2", "n3"}, texts: map[string]string{
		"a":  "Title. red  apples grow on trees in autumn", // query a itself, in a longer text
		"b":  "blue whales are large",                      // shares query b's ID only
		"p1": "red apples grow",
		"p2": "blue sky clouds today",
		"n1": "red apples",
		"n2": "blue sky",
		"n3": "apples grow",
	}}
	st, out := mineBEIR(t, c, dir, "train")
	if st.ExcludedQueryID != 1 {
		t.Errorf("excluded as the query itself: %d, want 1 (a only)", st.ExcludedQueryID)
	}
	if st.Quality.Units != 2 || st.Quality.Top1 != 2 {
		t.Errorf("teacher quality: positive on top in %d of %d queries, want 2 of 2", st.Quality.Top1, st.Quality.Units)
	}
	for _, r := range readFlag(t, out) {
		for _, n := range r.Neg {
			if strings.Contains(n, "autumn") {
				t.Errorf("query %q has itself as a negative", r.Query)
			}
		}
	}
	var b bytes.Buffer
	st.Write(&b)
	if !strings.Contains(b.String(), "the query itself:      1") || !strings.Contains(b.String(), "in 100.0% of 2 queries") {
		t.Errorf("summary:\n%s", b.String())
	}
}

// TestDroppedQueriesExplained: queries whose every candidate the margin
// drops write nothing, and the summary says how many and why.
func TestDroppedQueriesExplained(t *testing.T) {
	c, pairs := synth(t, 200, 30, 5)
	opt := DefaultOptions()
	opt.Margin = 0.999999 // nearly nothing may score close to its positive
	opt.AbsMargin = 0     // nothing may score above it
	opt.MaxScore = -5.9   // and nothing but the lowest scores survive
	_, st, err := mine(t, c, overlapTeacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if st.QueriesDropped == 0 || st.QueriesDroppedFiltered != st.QueriesDropped || st.DroppedByFilters != st.DroppedExamples || st.DroppedExamples == 0 {
		t.Fatalf("dropped queries %d (filtered %d), examples %d (filtered %d)", st.QueriesDropped, st.QueriesDroppedFiltered, st.DroppedExamples, st.DroppedByFilters)
	}
	if st.Examples+st.DroppedExamples != st.Pairs {
		t.Errorf("examples %d + not written %d != pairs %d", st.Examples, st.DroppedExamples, st.Pairs)
	}
	var b bytes.Buffer
	st.Write(&b)
	for _, want := range []string{"queries dropped:", "too few negatives left after the margin and score filters", "examples not written:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// mineBEIR mines split of the BEIR folder dir from c with the word-overlap
// teacher and no margin.
func mineBEIR(t *testing.T, c *memCorpus, dir, split string) (*Stats, string) {
	t.Helper()
	opt := DefaultOptions()
	opt.Margin = 0
	opt.Negatives = 2
	m, err := New(c, overlapTeacher, c, opt)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenBEIR(context.Background(), dir, split, PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := filepath.Join(t.TempDir(), "mined.jsonl")
	st, err := m.Run(context.Background(), src, out)
	if err != nil {
		t.Fatal(err)
	}
	return st, out
}

// TestCheckBEIR: a missing split is named with the splits that exist,
// before anything is read.
func TestCheckBEIR(t *testing.T) {
	dir := t.TempDir()
	if err := CheckBEIR(dir, "train"); err == nil || !strings.Contains(err.Error(), "no corpus.jsonl") {
		t.Errorf("empty folder: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	for _, f := range []string{"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/dev.tsv"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	err := CheckBEIR(dir, "train")
	if err == nil || !strings.Contains(err.Error(), `split "train"`) || !strings.Contains(err.Error(), "its splits: dev, test") {
		t.Errorf("missing split: %v", err)
	}
	if err := CheckBEIR(dir, "test"); err != nil {
		t.Errorf("split test: %v", err)
	}
	if err := CheckBEIR(dir, ""); err != nil {
		t.Errorf("corpus only: %v", err)
	}
}
