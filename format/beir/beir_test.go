package beir

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/filter"
)

func TestReadCorpus(t *testing.T) {
	in := "\xEF\xBB\xBF" + `{"_id": "d1", "title": "T", "text": "beir", "metadata": {"url": "u", "n": 3, "l": [1, 2], "z": null}}

{"id": 42, "text": "plain, numeric id"}
{"id": "p2", "title": null, "text": "x"}` + "\r\n" + `{"_id": 1.50, "id": "ignored", "text": "y", "extra": [1]}` + "\r\n  \n" + `{"_id":"a","text":"x","text":"last"}`
	var got []Doc
	var lines []int
	err := ReadCorpus(strings.NewReader(in), "c.jsonl", func(line int, d Doc) error {
		got = append(got, d)
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Doc{
		{ID: "d1", Title: "T", Text: "beir", Meta: map[string]string{"url": "u"},
			MetaValues: map[string]filter.Value{"n": filter.NumberValue(3), "l": filter.ListValue(filter.NumberValue(1), filter.NumberValue(2))}},
		{ID: "42", Text: "plain, numeric id"},
		{ID: "p2", Text: "x"},
		{ID: "1.50", Text: "y"},
		{ID: "a", Text: "last"},
	}
	if !docsEqual(got, want) || !reflect.DeepEqual(lines, []int{1, 3, 4, 5, 7}) {
		t.Fatalf("got %+v lines %v", got, lines)
	}

	for name, tc := range map[string]struct{ in, want string }{
		"malformed":    {"{\"_id\":\"a\"}\n{\"_id\": \"b\", \n", "beir: c.jsonl:2: not a JSON object"},
		"trailing":     {"{\"_id\":\"a\"} {\"_id\":\"b\"}\n", "c.jsonl:1: not a JSON object"},
		"null line":    {"null\n", "c.jsonl:1: not a JSON object"},
		"empty id":     {"{\"_id\":\"a\"}\n{\"_id\":\"b\"}\n{\"_id\":\"\"}\n", `c.jsonl:3: field "_id" is empty`},
		"null id":      {"{\"_id\":null,\"id\":\"x\"}\n", `c.jsonl:1: field "_id" is null`},
		"bool id":      {"{\"id\":true}\n", `c.jsonl:1: field "id": want a string or number, got a boolean`},
		"no id":        {"{\"title\":\"a\"}\n", `c.jsonl:1: missing "_id"`},
		"bad text":     {"{\"_id\":\"a\",\"text\":5}\n", `c.jsonl:1: field "text": want a string, got a number`},
		"bad title":    {"{\"_id\":\"a\",\"title\":[\"x\"]}\n", `c.jsonl:1: field "title": want a string, got an array`},
		"bad metadata": {"{\"_id\":\"a\",\"metadata\":\"m\"}\n", `c.jsonl:1: field "metadata": want an object, got a string`},
		"bad meta":     {"{\"_id\":\"a\",\"meta\":[1]}\n", `c.jsonl:1: field "meta": want an object, got an array`},
		"both metas":   {"{\"_id\":\"a\",\"meta\":{},\"metadata\":{}}\n", `c.jsonl:1: both "metadata" and "meta" fields`},
		"array":        {"[1]\n", "c.jsonl:1: not a JSON object"},
		"raw NUL":      {"{\"_id\":\"a\x00\"}\n", "c.jsonl:1: not a JSON object"},
	} {
		err := ReadCorpus(strings.NewReader(tc.in), "c.jsonl", func(int, Doc) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestReadCorpusSkipping(t *testing.T) {
	in := "{\"_id\":\"a\",\"text\":\"x\"}\nnot json\n{\"text\":\"no id\"}\n{\"_id\":\"b\",\"text\":\"y\"}"
	var got []string
	var bad []int
	err := ReadCorpusSkipping(strings.NewReader(in), "c.jsonl", func(line int, err error) error {
		if !strings.Contains(err.Error(), "c.jsonl:") {
			t.Errorf("error does not name the file: %v", err)
		}
		bad = append(bad, line)
		return nil
	}, func(line int, d Doc) error {
		got = append(got, d.ID)
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a,b" || len(bad) != 2 || bad[0] != 2 || bad[1] != 3 {
		t.Fatalf("got %v bad %v err %v", got, bad, err)
	}
	// Without a handler the first bad line stops the read and is named.
	err = ReadCorpus(strings.NewReader(in), "c.jsonl", func(int, Doc) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "c.jsonl:2") {
		t.Fatalf("want error naming c.jsonl:2, got %v", err)
	}
}

func TestReadQrels(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want Qrels
	}{
		"beir header":  {"query-id\tcorpus-id\tscore\nq1\td1\t1\n", Qrels{"q1": {"d1": 1}}},
		"other header": {"qid\tdocid\trelevance\r\nq1\td1\t2\r\n", Qrels{"q1": {"d1": 2}}},
		"no header":    {"q1\td1\t1\nq1\td2\t0\n", Qrels{"q1": {"d1": 1, "d2": 0}}},
		"bom header":   {"\xEF\xBB\xBFquery-id\tcorpus-id\tscore\nq1\td1\t1", Qrels{"q1": {"d1": 1}}},
		"float ints":   {"q1\td1\t1.0\nq1\td2\t2.\nq2\td1\t 0.00 \nq2\td2\t-1\nq2\td3\t+3\n", Qrels{"q1": {"d1": 1, "d2": 2}, "q2": {"d1": 0, "d2": -1, "d3": 3}}},
		"blank lines":  {"\nq1\td1\t1\n\n \t \nq2\td1\t1\n\n", Qrels{"q1": {"d1": 1}, "q2": {"d1": 1}}},
		"last wins":    {"q1\td1\t1\nq1\td1\t0\nq1\td2\t0\nq1\td2\t3\n", Qrels{"q1": {"d1": 0, "d2": 3}}},
		"verbatim ids": {"q 1\t d1 \t1\n", Qrels{"q 1": {" d1 ": 1}}},
	} {
		got, err := ReadQrels(strings.NewReader(tc.in), "t.tsv")
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, %v; want %v", name, got, err, tc.want)
		}
	}
	for name, tc := range map[string]struct{ in, want string }{
		"half grade":    {"query-id\tcorpus-id\tscore\nq1\td1\t0.5\n", `beir: t.tsv:2: score "0.5": not an integer grade`},
		"exponent":      {"q1\td1\t1e0\n", `t.tsv:1: score "1e0": not an integer grade`},
		"word grade":    {"query-id\tcorpus-id\tscore\nq1\td1\tx\n", `t.tsv:2: score "x": not an integer grade`},
		"double sign":   {"q1\td1\t--1\n", `t.tsv:1: score "--1"`},
		"huge":          {"q1\td1\t99999999999999999999\n", `t.tsv:1: score "99999999999999999999": grade out of range`},
		"header twice":  {"query-id\tcorpus-id\tscore\nquery-id\tcorpus-id\tscore\nq\td\t1\n", `t.tsv:2: score "score"`},
		"spaces":        {"q1 d1 1\n", "t.tsv:1: want 3 tab-separated columns (query-id, corpus-id, score), got 1"},
		"trec":          {"q1\t0\td1\t1\n", "t.tsv:1: want 3 tab-separated columns"},
		"empty query":   {"\td1\t1\n", "t.tsv:1: empty query-id"},
		"empty doc":     {"q1\t\t1\n", "t.tsv:1: empty corpus-id"},
		"empty file":    {"", "t.tsv: no judgments"},
		"header only":   {"query-id\tcorpus-id\tscore\n", "t.tsv: no judgments"},
		"late bad line": {"q1\td1\t1\n\nq2\td2\n", "t.tsv:3: want 3"},
	} {
		_, err := ReadQrels(strings.NewReader(tc.in), "t.tsv")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestReadQueries(t *testing.T) {
	in := `{"_id":"q1","text":"first","title":"dropped"}` + "\n" + `{"id":7,"text":"seven"}` + "\n" + `{"_id":"q1","text":"again"}` + "\n"
	got, err := ReadQueries(strings.NewReader(in), "q.jsonl")
	if err != nil || !reflect.DeepEqual(got, map[string]string{"q1": "again", "7": "seven"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ReadQueries(strings.NewReader("{\"_id\":\"q\"}\n{\"text\":\"x\"}\n"), "q.jsonl"); err == nil || !strings.Contains(err.Error(), `q.jsonl:2: missing "_id"`) {
		t.Fatalf("err = %v", err)
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

func TestLoad(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"corpus.jsonl":    "{\"_id\":\"d1\",\"title\":\"A\",\"text\":\"one\"}\n{\"_id\":\"d2\",\"title\":\"\",\"text\":\"two\"}\n{\"_id\":\"d1\",\"title\":\"A2\",\"text\":\"one again\"}\n",
		"queries.jsonl":   "{\"_id\":\"q1\",\"text\":\"first?\"}\n{\"_id\":\"q2\",\"text\":\"unjudged\"}\n",
		"qrels/test.tsv":  "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq1\tgone\t1\n",
		"qrels/bad.tsv":   "query-id\tcorpus-id\tscore\nq1\td1\tx\n",
		"qrels/nohdr.tsv": "q1\td1\t1\n",
		"qrels/ghost.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\n\nq9\td1\t1\nq9\td2\t1\n",
		"qrels/none.tsv":  "query-id\tcorpus-id\tscore\n",
	})
	ds, err := Load(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	// A repeated document ID: the last line, at the place of the first.
	if !reflect.DeepEqual(ds.Corpus, []Doc{{ID: "d1", Title: "A2", Text: "one again"}, {ID: "d2", Text: "two"}}) {
		t.Fatalf("corpus = %+v", ds.Corpus)
	}
	if !reflect.DeepEqual(ds.Queries, map[string]string{"q1": "first?"}) {
		t.Fatalf("queries = %v", ds.Queries)
	}
	if !reflect.DeepEqual(ds.Qrels, Qrels{"q1": {"d1": 2, "d2": 0, "gone": 1}}) {
		t.Fatalf("qrels = %v", ds.Qrels)
	}
	if ds, err := Load(dir, "nohdr"); err != nil || !reflect.DeepEqual(ds.Qrels, Qrels{"q1": {"d1": 1}}) {
		t.Fatalf("no header: %v %v", ds, err)
	}
	for split, want := range map[string]string{
		"bad":     "bad.tsv:2: score \"x\"",
		"ghost":   `ghost.tsv:4: judges query "q9", which`,
		"none":    "none.tsv: no judgments",
		"missing": "missing.tsv",
	} {
		if _, err := Load(dir, split); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("split %s: err = %v, want %q", split, err, want)
		}
	}
}

// Engine and storage documents are plain conversions of Doc; this breaks
// at compile time if the field order ever differs (checked here on a local
// twin of their shape, since beir must not import them).
func TestDocShape(t *testing.T) {
	type twin struct {
		ID, Title, Text string
		Meta            map[string]string
		MetaValues      map[string]filter.Value
		Language        string
	}
	_ = twin(Doc{})
}

// TestLanguageField: a corpus line's "language" or "lang" is the
// document's language; both at once, or a number, is an error.
func TestLanguageField(t *testing.T) {
	for line, want := range map[string]string{
		`{"_id":"a","text":"Hallo Welt","language":"de"}`: "de",
		`{"_id":"a","text":"你好","lang":"zh"}`:             "zh",
		`{"_id":"a","text":"hi"}`:                         "",
	} {
		d, err := parseDocLine([]byte(line), true, nil)
		if err != nil || d.Language != want {
			t.Errorf("%s: language %q, %v; want %q", line, d.Language, err, want)
		}
	}
	for _, bad := range []string{`{"_id":"a","text":"x","lang":"de","language":"de"}`, `{"_id":"a","text":"x","lang":3}`} {
		if _, err := parseDocLine([]byte(bad), true, nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// docsEqual compares docs, their values by Value.Equal.
func docsEqual(a, b []Doc) bool {
	return slices.EqualFunc(a, b, func(x, y Doc) bool {
		return x.ID == y.ID && x.Title == y.Title && x.Text == y.Text && maps.Equal(x.Meta, y.Meta) &&
			maps.EqualFunc(x.MetaValues, y.MetaValues, filter.Value.Equal)
	})
}

// TestMetadataFieldNames: "meta" (what search --json printed before) reads
// as "metadata", arrays and numbers keep their type, and every unknown
// top-level field is reported once, at its first line (issue #41 item 7;
// before, "meta" and "tags" were dropped without a word and arrays became
// strings).
func TestMetadataFieldNames(t *testing.T) {
	in := `{"_id": "a", "text": "x", "meta": {"lang": "en", "tags": ["a", "b"], "year": 1960}, "rank": 1, "score": 0.5}
{"_id": "b", "text": "y", "metadata": {"lang": "de", "ok": true, "nested": {"x": 1}}, "tags": ["c"], "score": 0.25}
{"_id": "c", "text": "z", "tags": ["d"], "rank": 3}
`
	var docs []Doc
	type warning struct {
		line        int
		field, text string
	}
	var warnings []warning
	err := ReadCorpusWith(strings.NewReader(in), "c.jsonl", CorpusOptions{
		OnUnknownField: func(line int, field, text string) { warnings = append(warnings, warning{line, field, text}) },
	}, func(_ int, d Doc) error { docs = append(docs, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []Doc{
		{ID: "a", Text: "x", Meta: map[string]string{"lang": "en"},
			MetaValues: map[string]filter.Value{"tags": filter.StringsValue("a", "b"), "year": filter.NumberValue(1960)}},
		{ID: "b", Text: "y", Meta: map[string]string{"lang": "de", "ok": "true", "nested": `{"x":1}`}},
		{ID: "c", Text: "z"},
	}
	if !docsEqual(docs, want) {
		t.Fatalf("docs = %+v\nwant %+v", docs, want)
	}
	wantW := []warning{
		{1, "rank", `c.jsonl:1: unknown field "rank" ignored (metadata goes under "metadata")`},
		{1, "score", `c.jsonl:1: unknown field "score" ignored (metadata goes under "metadata")`},
		{2, "tags", `c.jsonl:2: unknown field "tags" ignored (metadata goes under "metadata")`},
	}
	if !reflect.DeepEqual(warnings, wantW) {
		t.Fatalf("warnings = %+v\nwant %+v", warnings, wantW)
	}
}
