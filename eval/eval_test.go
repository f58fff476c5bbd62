package eval

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anna-search/anna/storage"
)

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("%s = %.15f, want %.15f", name, got, want)
	}
}

// A hand-worked example: graded judgments, one judged-irrelevant doc at rank
// 1, a duplicate, and a relevant doc (d9) never retrieved.
//
//	rels   d2:2 d4:1 d9:3 d1:0
//	ranked d1 d2 d3 d4 d2 d5
//	DCG@5  = 2/log2(3) + 1/log2(5)
//	IDCG@5 = 3/log2(2) + 2/log2(3) + 1/log2(4)
//	AP     = (1/2 + 2/4) / 3
func TestMetricsHandWorked(t *testing.T) {
	rels := map[string]int{"d2": 2, "d4": 1, "d9": 3, "d1": 0}
	ranked := []string{"d1", "d2", "d3", "d4", "d2", "d5"}
	near(t, "nDCG@5", NDCG(ranked, rels, 5), 0.35543595158098623)
	near(t, "nDCG@2", NDCG(ranked, rels, 2), 0.2960819109658652)
	near(t, "nDCG@1", NDCG(ranked, rels, 1), 0)
	near(t, "Recall@3", Recall(ranked, rels, 3), 1.0/3)
	near(t, "Recall@5", Recall(ranked, rels, 5), 2.0/3)
	near(t, "Recall@100", Recall(ranked, rels, 100), 2.0/3)
	near(t, "MRR@10", MRR(ranked, rels, 10), 0.5)
	near(t, "MRR@1", MRR(ranked, rels, 1), 0)
	near(t, "AP", AP(ranked, rels), 1.0/3)

	perfect := []string{"d9", "d2", "d4"}
	near(t, "perfect nDCG", NDCG(perfect, rels, 10), 1)
	near(t, "perfect AP", AP(perfect, rels), 1)
	// Swapping grades 3 and 2 costs exactly what the formula says.
	swapped := []string{"d2", "d9", "d4"}
	want := (2 + 3/math.Log2(3) + 1/math.Log2(4)) / (3 + 2/math.Log2(3) + 1/math.Log2(4))
	near(t, "swapped nDCG", NDCG(swapped, rels, 10), want)

	none := map[string]int{"x": 0}
	for name, v := range map[string]float64{
		"ndcg": NDCG(ranked, none, 10), "recall": Recall(ranked, none, 10), "ap": AP(ranked, none), "empty": NDCG(nil, rels, 10),
	} {
		if v != 0 {
			t.Errorf("%s with nothing relevant = %v", name, v)
		}
	}
}

func TestEvaluate(t *testing.T) {
	qrels := map[string]map[string]int{
		"q1": {"a": 1},
		"q2": {"b": 1, "c": 1},
		"q3": {"z": 1}, // not in the run: counts as 0
		"q4": {"n": 0}, // nothing relevant: skipped
	}
	run := map[string][]string{
		"q1":    {"a", "x"},
		"q2":    {"x", "c"},
		"extra": {"a"}, // unjudged: ignored
	}
	s := Evaluate(run, qrels)
	if s.Queries != 3 {
		t.Fatalf("queries = %d, want 3", s.Queries)
	}
	ndcgQ2 := (1 / math.Log2(3)) / (1 + 1/math.Log2(3))
	near(t, "NDCG10", s.NDCG10, (1+ndcgQ2+0)/3)
	near(t, "Recall100", s.Recall100, (1+0.5+0)/3)
	near(t, "MRR10", s.MRR10, (1+0.5+0)/3)
	near(t, "MAP", s.MAP, (1+0.25+0)/3)
}

func TestReadCorpus(t *testing.T) {
	in := `{"_id": "d1", "title": "T", "text": "beir", "metadata": {"url": "u", "n": 3}}

{"id": 42, "text": "plain, numeric id"}
{"id": "p2", "title": null, "text": "x"}
`
	var got []storage.Doc
	var lines []int
	err := ReadCorpus(strings.NewReader(in), "c.jsonl", func(line int, d storage.Doc) error {
		got = append(got, d)
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.Doc{
		{ID: "d1", Title: "T", Text: "beir", Meta: map[string]string{"url": "u", "n": "3"}},
		{ID: "42", Text: "plain, numeric id"},
		{ID: "p2", Text: "x"},
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(lines, []int{1, 3, 4}) {
		t.Fatalf("got %+v lines %v", got, lines)
	}
	// No trailing newline on the last line.
	n := 0
	if err := ReadCorpus(strings.NewReader(`{"_id":"a"}`), "x", func(int, storage.Doc) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("last line without newline: n=%d err=%v", n, err)
	}

	for name, tc := range map[string]struct{ in, want string }{
		"malformed": {"{\"_id\":\"a\"}\n{\"_id\": \"b\", \n", "c.jsonl:2: not a JSON object"},
		"empty id":  {"{\"_id\":\"a\"}\n{\"_id\":\"b\"}\n{\"_id\":\"\"}\n", `c.jsonl:3: field "_id" is empty`},
		"no id":     {"{\"title\":\"a\"}\n", `c.jsonl:1: missing "_id"`},
		"bad text":  {"{\"_id\":\"a\",\"text\":5}\n", `c.jsonl:1: field "text"`},
		"array":     {"[1]\n", "c.jsonl:1:"},
	} {
		err := ReadCorpus(strings.NewReader(tc.in), "c.jsonl", func(int, storage.Doc) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadBEIR(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"corpus.jsonl":    "{\"_id\":\"d1\",\"title\":\"A\",\"text\":\"one\"}\n{\"_id\":\"d2\",\"title\":\"\",\"text\":\"two\"}\n",
		"queries.jsonl":   "{\"_id\":\"q1\",\"text\":\"first?\"}\n{\"_id\":\"q2\",\"text\":\"unjudged\"}\n",
		"qrels/test.tsv":  "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n",
		"qrels/bad.tsv":   "query-id\tcorpus-id\tscore\nq1\td1\tx\n",
		"qrels/nohdr.tsv": "q1\td1\t1\n",
		"qrels/ghost.tsv": "query-id\tcorpus-id\tscore\nq9\td1\t1\n",
	})
	ds, err := LoadBEIR(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Corpus) != 2 || ds.Corpus[0].Title != "A" {
		t.Fatalf("corpus = %+v", ds.Corpus)
	}
	if !reflect.DeepEqual(ds.Queries, map[string]string{"q1": "first?"}) {
		t.Fatalf("queries = %v", ds.Queries)
	}
	if !reflect.DeepEqual(ds.Qrels, map[string]map[string]int{"q1": {"d1": 2, "d2": 0}}) {
		t.Fatalf("qrels = %v", ds.Qrels)
	}
	for split, want := range map[string]string{
		"bad":     "bad.tsv:2: score \"x\"",
		"nohdr":   "nohdr.tsv:1: want header",
		"ghost":   `judges query "q9"`,
		"missing": "missing.tsv",
	} {
		if _, err := LoadBEIR(dir, split); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("split %s: err = %v, want %q", split, err, want)
		}
	}
}

// TestLoadSharedDatasets checks the real collections load with the counts
// their README states.
func TestLoadSharedDatasets(t *testing.T) {
	root, err := SharedDir()
	if err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		set, split    string
		docs, queries int
	}{
		{"scifact", "test", 5183, 300},
		{"cranfield", "test", 1400, 225},
		{"cisi", "test", 1460, 76},
		{"cacm", "test", 3204, 52},
	} {
		ds, err := LoadBEIR(filepath.Join(root, "datasets", tc.set), tc.split)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds.Corpus) != tc.docs || len(ds.Queries) != tc.queries {
			t.Errorf("%s: %d docs %d queries, want %d %d", tc.set, len(ds.Corpus), len(ds.Queries), tc.docs, tc.queries)
		}
	}
}
