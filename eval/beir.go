// Package eval reads retrieval collections in the BEIR layout and computes
// the ranking metrics BEIR reports (nDCG@10, Recall@100, MRR@10, MAP) with
// pytrec_eval's (trec_eval's) semantics.
package eval

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/anna-search/anna/storage"
)

// Dataset is one BEIR collection with the queries and judgments of a split.
type Dataset struct {
	Corpus  []storage.Doc
	Queries map[string]string         // query ID -> text, only queries judged in the split
	Qrels   map[string]map[string]int // query ID -> doc ID -> relevance grade
}

// LoadBEIR reads dir/corpus.jsonl, dir/queries.jsonl and dir/qrels/<split>.tsv.
// Queries without judgments in the split are dropped, as BEIR does; a judged
// query missing from queries.jsonl is an error.
func LoadBEIR(dir, split string) (*Dataset, error) {
	ds := &Dataset{Queries: map[string]string{}}
	qrelsPath := filepath.Join(dir, "qrels", split+".tsv")
	var err error
	if ds.Qrels, err = readQrelsFile(qrelsPath); err != nil {
		return nil, err
	}
	corpusPath := filepath.Join(dir, "corpus.jsonl")
	err = readFile(corpusPath, func(r io.Reader) error {
		return ReadCorpus(r, corpusPath, func(_ int, d storage.Doc) error {
			ds.Corpus = append(ds.Corpus, d)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	queriesPath := filepath.Join(dir, "queries.jsonl")
	all := map[string]string{}
	err = readFile(queriesPath, func(r io.Reader) error {
		return ReadCorpus(r, queriesPath, func(_ int, d storage.Doc) error {
			all[d.ID] = d.Text
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for qid := range ds.Qrels {
		text, ok := all[qid]
		if !ok {
			return nil, fmt.Errorf("eval: %s judges query %q, which %s lacks", qrelsPath, qid, queriesPath)
		}
		ds.Queries[qid] = text
	}
	return ds, nil
}

func readFile(path string, fn func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return fn(f)
}

// maxLine bounds one JSON line (a whole document).
const maxLine = 64 << 20

// ReadCorpus streams JSON lines from r, calling fn with the 1-based line
// number and the doc of every non-blank line. It accepts BEIR lines
// {"_id","title","text","metadata"} and plain {"id","title","text"}; IDs may
// be JSON strings or numbers. metadata, when it is an object, becomes
// Doc.Meta (strings kept, other values as compact JSON). A malformed line, a
// missing or empty ID is an error naming name:line. An error from fn stops
// the read and is returned as is.
func ReadCorpus(r io.Reader, name string, fn func(line int, d storage.Doc) error) error {
	return ReadCorpusSkipping(r, name, nil, fn)
}

// ReadCorpusSkipping is ReadCorpus that hands malformed lines (bad JSON, a
// missing or empty ID) to onBad instead of stopping; reading goes on when
// onBad returns nil. With onBad nil it is ReadCorpus. Read errors and lines
// over the size limit still stop the read.
func ReadCorpusSkipping(r io.Reader, name string, onBad func(line int, err error) error, fn func(line int, d storage.Doc) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		raw, err := readLine(br)
		if err == io.EOF && len(raw) == 0 {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("eval: %s:%d: %w", name, line, err)
		}
		if len(strings.TrimSpace(string(raw))) == 0 {
			if err == io.EOF {
				return nil
			}
			continue
		}
		d, perr := parseDocLine(raw)
		if perr != nil {
			perr = fmt.Errorf("eval: %s:%d: %w", name, line, perr)
			if onBad == nil {
				return perr
			}
			if berr := onBad(line, perr); berr != nil {
				return berr
			}
			if err == io.EOF {
				return nil
			}
			continue
		}
		if ferr := fn(line, d); ferr != nil {
			return ferr
		}
		if err == io.EOF {
			return nil
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, err
	}
}

func parseDocLine(raw []byte) (storage.Doc, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return storage.Doc{}, fmt.Errorf("not a JSON object: %w", err)
	}
	id, err := idField(fields)
	if err != nil {
		return storage.Doc{}, err
	}
	d := storage.Doc{ID: id}
	for _, f := range []struct {
		key string
		dst *string
	}{{"title", &d.Title}, {"text", &d.Text}} {
		if v, ok := fields[f.key]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return storage.Doc{}, fmt.Errorf("field %q: want a string: %w", f.key, err)
			}
		}
	}
	if v, ok := fields["metadata"]; ok && string(v) != "null" {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(v, &meta); err != nil {
			return storage.Doc{}, fmt.Errorf("field \"metadata\": want an object: %w", err)
		}
		if len(meta) > 0 {
			d.Meta = make(map[string]string, len(meta))
			for k, mv := range meta {
				var s string
				if json.Unmarshal(mv, &s) == nil {
					d.Meta[k] = s
				} else {
					d.Meta[k] = string(mv)
				}
			}
		}
	}
	return d, nil
}

func idField(fields map[string]json.RawMessage) (string, error) {
	key := "_id"
	v, ok := fields[key]
	if !ok {
		key = "id"
		if v, ok = fields[key]; !ok {
			return "", errors.New(`missing "_id" (or "id") field`)
		}
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return "", fmt.Errorf("field %q: want a string or number, got %s", key, v)
		}
		s = n.String()
	}
	if s == "" {
		return "", fmt.Errorf("field %q is empty", key)
	}
	return s, nil
}

func readQrelsFile(path string) (map[string]map[string]int, error) {
	var q map[string]map[string]int
	err := readFile(path, func(r io.Reader) error {
		var err error
		q, err = ReadQrels(r, path)
		return err
	})
	return q, err
}

// ReadQrels reads a BEIR qrels TSV: a header line
// "query-id<TAB>corpus-id<TAB>score", then one judgment per line. Grades of
// 0 or less are kept (they mean judged non-relevant).
func ReadQrels(r io.Reader, name string) (map[string]map[string]int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	out := map[string]map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		cols := strings.Split(text, "\t")
		if line == 1 {
			if len(cols) != 3 || cols[0] != "query-id" {
				return nil, fmt.Errorf("eval: %s:1: want header \"query-id\\tcorpus-id\\tscore\", got %q", name, text)
			}
			continue
		}
		if len(cols) != 3 {
			return nil, fmt.Errorf("eval: %s:%d: want 3 tab-separated columns, got %d", name, line, len(cols))
		}
		if cols[0] == "" || cols[1] == "" {
			return nil, fmt.Errorf("eval: %s:%d: empty query or corpus id", name, line)
		}
		score, err := strconv.Atoi(strings.TrimSpace(cols[2]))
		if err != nil {
			return nil, fmt.Errorf("eval: %s:%d: score %q is not an integer", name, line, cols[2])
		}
		if out[cols[0]] == nil {
			out[cols[0]] = map[string]int{}
		}
		out[cols[0]][cols[1]] = score
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: %s:%d: %w", name, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("eval: %s: empty qrels file", name)
	}
	return out, nil
}
