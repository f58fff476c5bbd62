package mining

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// OpenBEIR reads qrels by package beir's rules: a repeated judgment's last
// grade wins, positives keep the order of their first judgment, and a
// judged query missing from queries.jsonl or without a positive is bad
// input of its unit, named by the qrels line that first judges it.
func TestOpenBEIRRules(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(`{"_id":"q1","text":"first"}`+"\n"+`{"_id":"q3","text":"third"}`+"\n"), 0o644)
	qrels := "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1.0\nq2\td3\t1\nq1\td1\t0\nq3\td4\t0\nq1\td5\t2\n"
	os.WriteFile(filepath.Join(dir, "qrels", "train.tsv"), []byte(qrels), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels", "half.tsv"), []byte("query-id\tcorpus-id\tscore\nq1\td1\t0.5\n"), 0o644)
	ctx := context.Background()
	src, err := OpenBEIR(ctx, dir, "train", PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got []string
	for {
		u, err := src.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s := u.Where + " "
		if u.Err != nil {
			s += "error: " + u.Err.Error()
		} else {
			s += u.Query.Text
			for _, p := range u.Positives {
				s += " " + p.ID
			}
		}
		got = append(got, s)
	}
	p := filepath.Join(dir, "qrels", "train.tsv")
	want := []string{
		p + ":2 (query q1) first d2 d5",
		p + `:4 (query q2) error: query "q2" not in queries.jsonl`,
		p + ":6 (query q3) error: no positive (no judgment with score > 0)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := OpenBEIR(ctx, dir, "half", PromptDefaults{}); err == nil || !strings.Contains(err.Error(), `half.tsv:2: score "0.5": not an integer grade`) {
		t.Fatalf("half grade: %v", err)
	}
}

// Found by FuzzPairs' seeds: encoding/json's Decoder accepted a line with
// "]" or "}" after the object (its More() stops at a closing bracket), and
// struct decoding matched keys case-insensitively, so {"Query": ...} was a
// query and {"query":"a","Query":"b"} meant "b".
func TestParsePairLineStrict(t *testing.T) {
	for line, want := range map[string]string{
		`{"query":"q","pos":"p"}]`:           "malformed JSON",
		`{"query":"q","pos":"p"}}`:           "malformed JSON",
		`{"Query":"q","pos":"p"}`:            `missing field "query"`,
		`{"query":"q","POS":"p"}`:            "no positive",
		`{"query":5,"pos":"p"}`:              `field "query" must be a string`,
		`{"query":"q","pos_ids":"d"}`:        `field "pos_ids" must be a list of strings`,
		`{"query":"q","pos":"p","prompt":1}`: `field "prompt" must be a string`,
		`null`:                               "malformed JSON",
	} {
		if _, _, _, _, err := parsePairLine([]byte(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", line, err, want)
		}
	}
	q, pos, _, _, err := parsePairLine([]byte(`{"query":"a","Query":"b","pos":"p"}`))
	if err != nil || q != "a" || !reflect.DeepEqual(pos, []string{"p"}) {
		t.Errorf("got %q %v %v", q, pos, err)
	}
}
