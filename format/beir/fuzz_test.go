package beir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anna-search/anna/filter"
)

// splitLines splits input the way the package documents it, independently
// of its reader: on "\n", without a trailing "\r", a leading byte order
// mark removed; no line after a final "\n".
func splitLines(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i := range lines {
		lines[i] = bytes.TrimSuffix(lines[i], []byte("\r"))
	}
	if len(lines) > 0 {
		lines[0] = bytes.TrimPrefix(lines[0], []byte("\xEF\xBB\xBF"))
	}
	return lines
}

// FuzzReadCorpus: every non-blank line is either a Doc or a bad line whose
// error names c.jsonl and that line; a Doc holds valid UTF-8, a non-empty
// ID, agrees with a generic JSON decoding of its line, and survives being
// written back as a BEIR line and read again. ReadCorpus stops at the first
// bad line that ReadCorpusSkipping reported.
func FuzzReadCorpus(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := splitLines(data)
		var seen []int
		var docs []Doc
		var firstBad error
		err := ReadCorpusSkipping(bytes.NewReader(data), "c.jsonl", func(line int, err error) error {
			if prefix := fmt.Sprintf("beir: c.jsonl:%d: ", line); !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("bad line %d: error %q does not start with %q", line, err, prefix)
			}
			if firstBad == nil {
				firstBad = err
			}
			seen = append(seen, line)
			return nil
		}, func(line int, d Doc) error {
			seen = append(seen, line)
			docs = append(docs, d)
			checkDoc(t, lines[line-1], d)
			return nil
		})
		if err != nil {
			t.Fatalf("ReadCorpusSkipping: %v", err)
		}
		var want []int
		for i, l := range lines {
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(want, i+1)
			}
		}
		if !reflect.DeepEqual(seen, want) {
			t.Fatalf("reported lines %v, want the non-blank lines %v", seen, want)
		}
		err = ReadCorpus(bytes.NewReader(data), "c.jsonl", func(int, Doc) error { return nil })
		if (err == nil) != (firstBad == nil) || (err != nil && err.Error() != firstBad.Error()) {
			t.Fatalf("ReadCorpus: %v; first bad line: %v", err, firstBad)
		}
		// Round trip: the docs written as BEIR lines read back the same.
		var buf bytes.Buffer
		for _, d := range docs {
			meta := map[string]any{}
			for k, v := range d.Meta {
				meta[k] = v
			}
			for k, v := range d.MetaValues {
				meta[k] = v
			}
			b, err := json.Marshal(map[string]any{"_id": d.ID, "title": d.Title, "text": d.Text, "metadata": meta})
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteString("\r\n")
		}
		var again []Doc
		if err := ReadCorpus(&buf, "again.jsonl", func(_ int, d Doc) error { again = append(again, d); return nil }); err != nil {
			t.Fatalf("re-reading written docs: %v", err)
		}
		if len(again) != len(docs) {
			t.Fatalf("re-read %d docs, wrote %d", len(again), len(docs))
		}
		for i := range docs {
			if !docsEqual(again[i:i+1], docs[i:i+1]) {
				t.Fatalf("doc %d: wrote %+v, read back %+v", i, docs[i], again[i])
			}
		}
	})
}

// checkDoc compares d with a generic decoding of its line.
func checkDoc(t *testing.T, line []byte, d Doc) {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("accepted line %q is not a JSON object: %v", line, err)
	}
	for _, s := range []string{d.ID, d.Title, d.Text} {
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 in %+v", d)
		}
	}
	id, ok := m["_id"]
	if !ok {
		id = m["id"]
	}
	switch v := id.(type) {
	case string:
		if v != d.ID {
			t.Fatalf("ID %q, line has %q", d.ID, v)
		}
	case json.Number:
		if v.String() != d.ID {
			t.Fatalf("ID %q, line has number %s", d.ID, v)
		}
	default:
		t.Fatalf("accepted ID %T %v", id, id)
	}
	if d.ID == "" {
		t.Fatal("empty ID accepted")
	}
	for key, got := range map[string]string{"title": d.Title, "text": d.Text} {
		want, _ := m[key].(string)
		if m[key] != nil {
			if _, isString := m[key].(string); !isString {
				t.Fatalf("field %q of type %T accepted", key, m[key])
			}
		}
		if got != want {
			t.Fatalf("field %q = %q, line has %q", key, got, want)
		}
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta, _ = m["meta"].(map[string]any)
	}
	n := 0
	for k, v := range meta {
		_, inMeta := d.Meta[k]
		_, inValues := d.MetaValues[k]
		switch v := v.(type) {
		case nil:
			if inMeta || inValues {
				t.Fatalf("metadata[%q] is null in the line, read as a value", k)
			}
			continue
		case string:
			if d.Meta[k] != v {
				t.Fatalf("metadata[%q] = %q, line has %q", k, d.Meta[k], v)
			}
		case json.Number:
			x, _ := d.MetaValues[k].Number()
			if f, err := v.Float64(); err == nil && !math.IsInf(f, 0) && (!inValues || x != f) {
				t.Fatalf("metadata[%q] = %s, line has the number %s", k, d.MetaValues[k], v)
			}
		case []any:
			if !inValues || d.MetaValues[k].Kind() != filter.KindList {
				t.Fatalf("metadata[%q] = %v, line has an array", k, d.MetaValues[k])
			}
		}
		if inMeta == inValues {
			t.Fatalf("metadata[%q] is in Meta %v and MetaValues %v", k, inMeta, inValues)
		}
		n++
	}
	if n != len(d.Meta)+len(d.MetaValues) {
		t.Fatalf("metadata %v %v, line has %v", d.Meta, d.MetaValues, meta)
	}
}

// FuzzReadQrels: ScanQrels either fails with an error naming q.tsv (and the
// line, except for "no judgments"), or reports judgments whose line is
// exactly query-id TAB corpus-id TAB an integer-valued score equal to the
// grade; ReadQrels is their last-wins fold, and writing that back as a
// headed TSV reads back the same.
func FuzzReadQrels(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := splitLines(data)
		var js []Judgment
		var at []int
		err := ScanQrels(bytes.NewReader(data), "q.tsv", func(line int, j Judgment) error {
			js = append(js, j)
			at = append(at, line)
			return nil
		})
		q, rerr := ReadQrels(bytes.NewReader(data), "q.tsv")
		if (err == nil) != (rerr == nil) {
			t.Fatalf("ScanQrels: %v, ReadQrels: %v", err, rerr)
		}
		if err != nil {
			msg := err.Error()
			if msg == "beir: q.tsv: no judgments" {
				if len(js) != 0 {
					t.Fatalf("no judgments after %d", len(js))
				}
				return
			}
			var n int
			if _, serr := fmt.Sscanf(msg, "beir: q.tsv:%d: ", &n); serr != nil || n < 1 || n > len(lines) {
				t.Fatalf("error %q does not name a line of q.tsv (%d lines)", msg, len(lines))
			}
			if len(at) > 0 && at[len(at)-1] >= n {
				t.Fatalf("error at line %d after a judgment at line %d", n, at[len(at)-1])
			}
			return
		}
		fold := Qrels{}
		for i, j := range js {
			line := string(lines[at[i]-1])
			prefix := j.QueryID + "\t" + j.DocID + "\t"
			if j.QueryID == "" || j.DocID == "" || !strings.HasPrefix(line, prefix) || strings.Count(line, "\t") != 2 {
				t.Fatalf("judgment %+v from line %d %q", j, at[i], line)
			}
			score := strings.TrimSpace(line[len(prefix):])
			v, perr := strconv.ParseFloat(score, 64)
			if perr != nil || v != float64(j.Grade) || math.Trunc(v) != v {
				t.Fatalf("line %d: score %q read as grade %d", at[i], score, j.Grade)
			}
			if fold[j.QueryID] == nil {
				fold[j.QueryID] = map[string]int{}
			}
			fold[j.QueryID][j.DocID] = j.Grade
		}
		if !reflect.DeepEqual(q, fold) {
			t.Fatalf("ReadQrels %v, judgments fold to %v", q, fold)
		}
		var buf bytes.Buffer
		buf.WriteString("query-id\tcorpus-id\tscore\n")
		for qid, rels := range q {
			for did, g := range rels {
				fmt.Fprintf(&buf, "%s\t%s\t%d\n", qid, did, g)
			}
		}
		again, err := ReadQrels(&buf, "again.tsv")
		if err != nil || !reflect.DeepEqual(again, q) {
			t.Fatalf("re-read %v, %v; wrote %v", again, err, q)
		}
	})
}
