// Package beir reads retrieval collections in the BEIR layout:
//
//	<dir>/corpus.jsonl         {"_id", "title", "text", "metadata"} per line
//	<dir>/queries.jsonl        {"_id", "text"} per line
//	<dir>/qrels/<split>.tsv    query-id<TAB>corpus-id<TAB>score per line
//
// It is the one reader of that layout in anna: evaluation (eval, annactl
// eval), mining (mining.OpenBEIR), indexing (annactl index) and the tests all
// go through it. Besides the standard library it imports only package
// filter (for metadata values), which imports nothing of anna's, so any
// package, index/* included, can use it without an import cycle.
//
// The rules follow BEIR's GenericDataLoader and pytrec_eval where those are
// clear, and say what happens where they are not. Every error names the
// file and the 1-based line ("beir: corpus.jsonl:12: ...") and, for a field,
// the field.
//
// Lines (all three files): split on "\n"; a trailing "\r" is dropped (CRLF
// files read like LF files); a UTF-8 byte order mark at the start of the
// file is ignored; a blank (whitespace-only) line is skipped anywhere but
// still counted for line numbers; the last line needs no newline; a line
// longer than 64 MiB is an error.
//
// corpus.jsonl and queries.jsonl: each line is one JSON object (trailing
// data after it is an error).
//   - The ID is "_id", or "id" when "_id" is absent ("_id" wins when both
//     are present). It is a JSON string, or a JSON number taken as written
//     (42 → "42", 1.0 → "1.0"). A missing, null or empty ID is an error.
//   - "title" and "text" are strings; missing or null read as "". Any other
//     JSON type is an error naming the field.
//   - "metadata" (corpus only; "meta", the name older `annactl search
//     --json` output used, is read the same way, and a line with both is an
//     error) is an object or null. Its values, by filter.ValueFromJSON: a
//     string goes to Doc.Meta as it is; a number ("year": 1960) or an array
//     (["a", "b"], a multi-valued key) goes to Doc.MetaValues as a number or
//     a list; true and false become the strings "true" and "false", an
//     object its compact JSON text (a string), and a null value is no value
//     (the key is left out). Any other type is an error. Other top-level
//     fields are ignored; ReadCorpusWith reports each unknown name once
//     (CorpusOptions.OnUnknownField), since a field under the wrong name
//     (a "tags" beside "metadata" rather than in it) is otherwise lost
//     without a word.
//   - Invalid UTF-8 inside strings becomes U+FFFD (encoding/json's rule;
//     BEIR's Python loader would refuse the file). Where an object repeats a
//     key, the last one counts (as in Python's json).
//   - Queries use the same rules and keep "_id" and "text" only.
//   - Duplicate IDs: ReadCorpus hands every line to its callback, so the
//     caller decides (annactl index upserts: the last line wins). Load and
//     ReadQueries keep the last line of an ID, at the place of the first,
//     as BEIR's dicts do.
//
// qrels/<split>.tsv:
//   - Exactly three tab-separated columns: query-id, corpus-id, score. Tab
//     is the only separator (BEIR's csv reader uses tab); a space-separated
//     or 4-column TREC line is an error. IDs are taken verbatim (no
//     trimming, no quoting) and must not be empty.
//   - Header: the first line of the file, and only it, is a header when it
//     has three columns and its score column holds no digit (BEIR's own is
//     "query-id<TAB>corpus-id<TAB>score"). BEIR skips line 1 unconditionally;
//     here a file without a header loses no judgment, and a first line with
//     a malformed grade ("1.5", "--1") is an error, not a header.
//   - Score: an integer grade, surrounding spaces ignored (as Python's
//     int()): "2", "+1", "-1". An integer written with a zero fraction
//     ("1.0", "2.", "0.00") is that integer. Any other value ("0.5", "1e0",
//     "x", out of the int64 range) is an error. Grades of 0 or less are kept:
//     judged non-relevant, as trec_eval treats them.
//   - A repeated (query-id, corpus-id) pair: the last line wins (BEIR's and
//     pytrec_eval's dicts).
//   - A file with no judgment (empty, or a header only) is an error.
//
// Load (one split): queries without a judgment in the split are dropped (as
// BEIR does); a judged query missing from queries.jsonl is an error naming
// the qrels line that first judges it. Judged documents missing from the
// corpus are allowed (they count as relevant and never retrieved).
// mining.OpenBEIR reads the same way but reports a missing query per query,
// with the miner's other bad input (see mining).
package beir

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/anna-search/anna/filter"
)

// Doc is one corpus document. Its fields are in the order of engine.Document
// and storage.Doc, so a Doc converts to either by a plain conversion. Meta
// holds the metadata's strings, MetaValues its numbers and lists; a key is
// in one of them at most.
type Doc struct {
	ID         string
	Title      string
	Text       string
	Meta       map[string]string
	MetaValues map[string]filter.Value
	// Language is the line's "language" (or "lang") field: the language
	// the document is written in, as given ("" when none is).
	Language string
}

// Query is one line of queries.jsonl.
type Query struct {
	ID   string
	Text string
}

// Judgment is one line of a qrels file.
type Judgment struct {
	QueryID string
	DocID   string
	Grade   int
}

// Qrels maps query ID → document ID → relevance grade.
type Qrels map[string]map[string]int

// Dataset is one BEIR collection with the queries and judgments of a split.
type Dataset struct {
	Corpus  []Doc
	Queries map[string]string // query ID → text, only queries judged in the split
	Qrels   Qrels
}

// CorpusPath, QueriesPath and QrelsPath name the files of the layout.
func CorpusPath(dir string) string       { return filepath.Join(dir, "corpus.jsonl") }
func QueriesPath(dir string) string      { return filepath.Join(dir, "queries.jsonl") }
func QrelsPath(dir, split string) string { return filepath.Join(dir, "qrels", split+".tsv") }

func errorf(format string, a ...any) error { return fmt.Errorf("beir: "+format, a...) }

// Load reads dir/corpus.jsonl, dir/queries.jsonl and dir/qrels/<split>.tsv
// by the package's rules.
func Load(dir, split string) (*Dataset, error) {
	qrelsPath := QrelsPath(dir, split)
	ds := &Dataset{Queries: map[string]string{}, Qrels: Qrels{}}
	var order []string // judged queries, by first judgment
	firstLine := map[string]int{}
	err := readFile(qrelsPath, func(r io.Reader) error {
		return ScanQrels(r, qrelsPath, func(line int, j Judgment) error {
			if ds.Qrels[j.QueryID] == nil {
				ds.Qrels[j.QueryID] = map[string]int{}
				order = append(order, j.QueryID)
				firstLine[j.QueryID] = line
			}
			ds.Qrels[j.QueryID][j.DocID] = j.Grade
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	corpusPath := CorpusPath(dir)
	at := map[string]int{}
	err = readFile(corpusPath, func(r io.Reader) error {
		return ReadCorpus(r, corpusPath, func(_ int, d Doc) error {
			if i, ok := at[d.ID]; ok {
				ds.Corpus[i] = d
				return nil
			}
			at[d.ID] = len(ds.Corpus)
			ds.Corpus = append(ds.Corpus, d)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	queriesPath := QueriesPath(dir)
	all, err := ReadQueriesFile(queriesPath)
	if err != nil {
		return nil, err
	}
	for _, qid := range order {
		text, ok := all[qid]
		if !ok {
			return nil, errorf("%s:%d: judges query %q, which %s lacks", qrelsPath, firstLine[qid], qid, queriesPath)
		}
		ds.Queries[qid] = text
	}
	return ds, nil
}

func readFile(path string, fn func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return errorf("%w", err)
	}
	defer f.Close()
	return fn(f)
}

// maxLine bounds one line (a whole document).
const maxLine = 64 << 20

// eachLine calls fn with every line of r (1-based number, no "\n" or
// trailing "\r", a leading byte order mark removed from line 1), including
// blank ones. A read error or an over-long line stops it with an error
// naming name:line; an error from fn is returned as is.
func eachLine(r io.Reader, name string, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		raw, err := readLine(br)
		if err != nil && err != io.EOF {
			return errorf("%s:%d: %w", name, n, err)
		}
		if err == io.EOF && len(raw) == 0 {
			return nil
		}
		raw = bytes.TrimSuffix(raw, []byte("\n"))
		raw = bytes.TrimSuffix(raw, []byte("\r"))
		if n == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xEF\xBB\xBF"))
		}
		if ferr := fn(n, raw); ferr != nil {
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
		if len(buf)+len(chunk) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, err
	}
}

func blank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// ReadCorpus streams a corpus in JSON lines from r, calling fn with the
// 1-based line number and the Doc of every non-blank line, by the package's
// rules. A malformed line is an error naming name:line; an error from fn
// stops the read and is returned as is.
func ReadCorpus(r io.Reader, name string, fn func(line int, d Doc) error) error {
	return ReadCorpusSkipping(r, name, nil, fn)
}

// ReadCorpusSkipping is ReadCorpus that hands malformed lines (bad JSON, a
// bad or missing ID, a field of the wrong type) to onBad, with the error
// naming name:line, instead of stopping; reading goes on when onBad returns
// nil. With onBad nil it is ReadCorpus. Read errors and over-long lines
// still stop the read.
func ReadCorpusSkipping(r io.Reader, name string, onBad func(line int, err error) error, fn func(line int, d Doc) error) error {
	return ReadCorpusWith(r, name, CorpusOptions{OnBad: onBad}, fn)
}

// CorpusOptions are ReadCorpusWith's handlers; nil ones do nothing.
type CorpusOptions struct {
	// OnBad, when set, receives each malformed line's error (naming
	// name:line) instead of the read stopping on it; reading goes on when
	// it returns nil (see ReadCorpusSkipping).
	OnBad func(line int, err error) error
	// OnUnknownField, when set, is called once per top-level field name
	// that is not "_id", "id", "title", "text", "metadata" or "meta", at
	// the first line holding it, with the text of a warning:
	// `corpus.jsonl:3: unknown field "tags" ignored (metadata goes under
	// "metadata")`. Fields of the same line come in name order.
	OnUnknownField func(line int, field, warning string)
}

// ReadCorpusWith is ReadCorpus with the handlers of opts.
func ReadCorpusWith(r io.Reader, name string, opts CorpusOptions, fn func(line int, d Doc) error) error {
	seen := map[string]bool{}
	return eachLine(r, name, func(n int, raw []byte) error {
		if blank(raw) {
			return nil
		}
		var unknown func(string)
		if opts.OnUnknownField != nil {
			unknown = func(field string) {
				if !seen[field] {
					seen[field] = true
					opts.OnUnknownField(n, field, fmt.Sprintf("%s:%d: unknown field %q ignored (metadata goes under \"metadata\")", name, n, field))
				}
			}
		}
		d, err := parseDocLine(raw, true, unknown)
		if err != nil {
			err = errorf("%s:%d: %w", name, n, err)
			if opts.OnBad == nil {
				return err
			}
			return opts.OnBad(n, err)
		}
		return fn(n, d)
	})
}

// ScanQueries streams a queries.jsonl from r, calling fn with the 1-based
// line number and the Query of every non-blank line, by the package's
// rules. A malformed line is an error naming name:line; an error from fn
// stops the read and is returned as is.
func ScanQueries(r io.Reader, name string, fn func(line int, q Query) error) error {
	return eachLine(r, name, func(n int, raw []byte) error {
		if blank(raw) {
			return nil
		}
		d, err := parseDocLine(raw, false, nil)
		if err != nil {
			return errorf("%s:%d: %w", name, n, err)
		}
		return fn(n, Query{ID: d.ID, Text: d.Text})
	})
}

// ReadQueries reads a queries.jsonl into query ID → text (the last line of
// a repeated ID wins).
func ReadQueries(r io.Reader, name string) (map[string]string, error) {
	out := map[string]string{}
	err := ScanQueries(r, name, func(_ int, q Query) error {
		out[q.ID] = q.Text
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadQueriesFile is ReadQueries of the file at path.
func ReadQueriesFile(path string) (map[string]string, error) {
	var out map[string]string
	err := readFile(path, func(r io.Reader) error {
		var err error
		out, err = ReadQueries(r, path)
		return err
	})
	return out, err
}

// knownFields are the top-level fields of a corpus line that are read.
var knownFields = map[string]bool{"_id": true, "id": true, "title": true, "text": true, "metadata": true, "meta": true, "language": true, "lang": true}

// parseDocLine parses one JSON line of a corpus (withMeta) or queries file,
// calling unknown (when not nil) with the name of every field it does not
// read, in name order, once the line has parsed.
func parseDocLine(raw []byte, withMeta bool, unknown func(field string)) (Doc, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Doc{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if fields == nil { // the line is "null"
		return Doc{}, errors.New("not a JSON object: null")
	}
	id, err := idField(fields)
	if err != nil {
		return Doc{}, err
	}
	d := Doc{ID: id}
	for _, f := range []struct {
		key string
		dst *string
	}{{"title", &d.Title}, {"text", &d.Text}} {
		if v, ok := fields[f.key]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return Doc{}, fmt.Errorf("field %q: want a string, got %s", f.key, kind(v))
			}
		}
	}
	if !withMeta {
		d.Title = ""
		return d, nil
	}
	for _, key := range []string{"language", "lang"} {
		if v, ok := fields[key]; ok && string(v) != "null" {
			if d.Language != "" {
				return Doc{}, errors.New(`both "language" and "lang" fields: give the language once`)
			}
			if err := json.Unmarshal(v, &d.Language); err != nil {
				return Doc{}, fmt.Errorf("field %q: want a string (a language code such as \"de\"), got %s", key, kind(v))
			}
		}
	}
	field := "metadata"
	v, ok := fields[field]
	if old, has := fields["meta"]; has {
		if ok {
			return Doc{}, errors.New(`both "metadata" and "meta" fields: give the metadata once, under "metadata"`)
		}
		field, v, ok = "meta", old, true
	}
	if ok && string(v) != "null" {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(v, &meta); err != nil {
			return Doc{}, fmt.Errorf("field %q: want an object, got %s", field, kind(v))
		}
		for k, mv := range meta {
			val, present, err := filter.ValueFromJSON(mv)
			if err != nil {
				return Doc{}, fmt.Errorf("field %q: key %q: %w", field, k, err)
			}
			if !present {
				continue // null: no value
			}
			if s, isString := val.Str(); isString {
				if d.Meta == nil {
					d.Meta = map[string]string{}
				}
				d.Meta[k] = s
				continue
			}
			if d.MetaValues == nil {
				d.MetaValues = map[string]filter.Value{}
			}
			d.MetaValues[k] = val
		}
	}
	if unknown != nil {
		var names []string
		for k := range fields {
			if !knownFields[k] {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		for _, k := range names {
			unknown(k)
		}
	}
	return d, nil
}

// kind names the JSON type of a raw value for error messages.
func kind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
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
	switch {
	case string(v) == "null":
		return "", fmt.Errorf("field %q is null", key)
	case v[0] == '"':
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("field %q: %w", key, err)
		}
	case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
		s = string(v) // a JSON number, as written
	default:
		return "", fmt.Errorf("field %q: want a string or number, got %s", key, kind(v))
	}
	if s == "" {
		return "", fmt.Errorf("field %q is empty", key)
	}
	return s, nil
}

// ScanQrels streams a qrels TSV from r by the package's rules, calling fn
// with the 1-based line number of every judgment, in file order (repeated
// pairs included: the caller keeps the last). A malformed line, or a file
// with no judgment, is an error naming name (and the line); an error from fn
// is returned as is.
func ScanQrels(r io.Reader, name string, fn func(line int, j Judgment) error) error {
	judged := 0
	err := eachLine(r, name, func(n int, raw []byte) error {
		if blank(raw) {
			return nil
		}
		cols := strings.Split(string(raw), "\t")
		if n == 1 && len(cols) == 3 && !strings.ContainsAny(cols[2], "0123456789") {
			return nil // the header
		}
		if len(cols) != 3 {
			return errorf("%s:%d: want 3 tab-separated columns (query-id, corpus-id, score), got %d", name, n, len(cols))
		}
		if cols[0] == "" {
			return errorf("%s:%d: empty query-id", name, n)
		}
		if cols[1] == "" {
			return errorf("%s:%d: empty corpus-id", name, n)
		}
		grade, err := parseGrade(cols[2])
		if err != nil {
			return errorf("%s:%d: score %q: %w", name, n, cols[2], err)
		}
		judged++
		return fn(n, Judgment{QueryID: cols[0], DocID: cols[1], Grade: grade})
	})
	if err == nil && judged == 0 {
		err = errorf("%s: no judgments", name)
	}
	return err
}

// parseGrade reads an integer grade: "2", "+1", "-1", or an integer with a
// zero fraction ("1.0", "2.").
func parseGrade(s string) (int, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		if strings.Trim(s[i+1:], "0") != "" {
			return 0, errors.New("not an integer grade")
		}
		s = s[:i]
	}
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, errors.New("not an integer grade")
	}
	g, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("grade out of range")
	}
	return g, nil
}

// ReadQrels reads a qrels TSV into query ID → doc ID → grade (the last line
// of a repeated pair wins).
func ReadQrels(r io.Reader, name string) (Qrels, error) {
	out := Qrels{}
	err := ScanQrels(r, name, func(_ int, j Judgment) error {
		if out[j.QueryID] == nil {
			out[j.QueryID] = map[string]int{}
		}
		out[j.QueryID][j.DocID] = j.Grade
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadQrelsFile is ReadQrels of the file at path.
func ReadQrelsFile(path string) (Qrels, error) {
	var q Qrels
	err := readFile(path, func(r io.Reader) error {
		var err error
		q, err = ReadQrels(r, path)
		return err
	})
	return q, err
}
