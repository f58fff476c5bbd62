package mining

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/safe"
)

// Doc is a document by corpus ID, by text, or both (a positive given as
// text in a pairs file has no ID).
type Doc struct {
	ID   string
	Text string
}

// Unit is one piece of input: a JSON line or a BEIR query with its positives.
// Index is its place in the input (0-based line or query number), which
// seeds its sampling; blank lines are skipped, so indexes may jump.
type Unit struct {
	Index   int
	seq     int    // set by Run: consecutive over the units read
	Where   string // "file:line" for messages
	QueryID string
	Query   Query
	// Positives become examples (one each unless Grouped). Pairs already seen
	// earlier in the input are removed here and counted in DupPairs.
	Positives []Doc
	// Exclude holds keys (see keyID, keyText) of every known positive of the
	// query across the whole input; candidates matching any are never
	// negatives.
	Exclude  map[uint64]struct{}
	DupPairs int
	// Err is a problem with this unit's input (malformed JSON, no positive).
	// It travels with the unit so the failure is reported in input order.
	Err error
}

// Source yields units in input order; Next returns io.EOF at the end.
type Source interface {
	Next(ctx context.Context) (Unit, error)
	// Len is the number of units, or -1 when unknown (for progress/ETA).
	Len() int
	// Name describes the input for the resume check and messages.
	Name() string
	Close() error
}

// PromptDefaults apply to units whose input carries no prompt of its own.
type PromptDefaults struct {
	Instruction string
	Examples    []Shot
}

func hash64(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func keyID(id string) uint64     { return hash64("id", id) }
func keyText(text string) uint64 { return hash64("text", normText(text)) }

// parsePairLine reads one JSON line of (query, positives) input:
// {"query": string, "pos": string or list of strings, "pos_ids": list of
// corpus IDs, "prompt": string}; other fields are ignored. Keys match
// exactly, as Python's json (encoding/json alone would also take "Query"
// or "POS"), and the line must hold one JSON value and nothing after it.
func parsePairLine(b []byte) (q string, pos []string, ids []string, prompt string, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return "", nil, nil, "", fmt.Errorf("malformed JSON: %w", err)
	}
	if fields == nil {
		return "", nil, nil, "", errors.New("malformed JSON: not an object")
	}
	present := func(key string) bool { v, ok := fields[key]; return ok && string(v) != "null" }
	if !present("query") {
		return "", nil, nil, "", errors.New(`missing field "query"`)
	}
	if err := json.Unmarshal(fields["query"], &q); err != nil {
		return "", nil, nil, "", fmt.Errorf(`field "query" must be a string: %w`, err)
	}
	if strings.TrimSpace(q) == "" {
		return "", nil, nil, "", errors.New(`empty "query"`)
	}
	if present("pos") {
		p := fields["pos"]
		if p[0] == '"' {
			var s string
			if err := json.Unmarshal(p, &s); err != nil {
				return "", nil, nil, "", fmt.Errorf(`field "pos": %w`, err)
			}
			pos = []string{s}
		} else if err := json.Unmarshal(p, &pos); err != nil {
			return "", nil, nil, "", fmt.Errorf(`field "pos" must be a string or a list of strings: %w`, err)
		}
	}
	if present("pos_ids") {
		if err := json.Unmarshal(fields["pos_ids"], &ids); err != nil {
			return "", nil, nil, "", fmt.Errorf(`field "pos_ids" must be a list of strings: %w`, err)
		}
	}
	if present("prompt") {
		if err := json.Unmarshal(fields["prompt"], &prompt); err != nil {
			return "", nil, nil, "", fmt.Errorf(`field "prompt" must be a string: %w`, err)
		}
	}
	var kept []string
	for _, p := range pos {
		if strings.TrimSpace(p) != "" {
			kept = append(kept, p)
		}
	}
	for _, id := range ids {
		if id == "" {
			return "", nil, nil, "", errors.New(`empty ID in "pos_ids"`)
		}
	}
	if len(kept) == 0 && len(ids) == 0 {
		return "", nil, nil, "", errors.New(`no positive ("pos" and "pos_ids" empty or missing)`)
	}
	return q, kept, ids, prompt, nil
}

// pairsSource streams a JSON lines file of {"query", "pos": [...]} (or
// "pos_ids": corpus IDs), with an optional per-line "prompt".
//
// Opening it reads the file once to learn, for each query, every positive it
// has anywhere in the file (so that a positive given on another line is never
// mined as a negative) and the first line of each (query, positive) pair (so
// later duplicates are dropped). That index holds 8-byte hashes only, not
// texts: about 30 bytes per pair.
type pairsSource struct {
	path     string
	f        *os.File
	r        *bufio.Reader
	line     int // lines read by Next
	units    int // non-blank lines
	defaults PromptDefaults
	sum      uint64              // FNV-64a of the file, so resume notices edits
	known    map[uint64][]uint64 // query hash → keys of its positives
	first    map[uint64]int32    // (query, positive) hash → first line index
}

// OpenPairs opens a JSON lines file of (query, positives).
func OpenPairs(ctx context.Context, path string, d PromptDefaults) (Source, error) {
	ctx = safe.Ctx(ctx)
	s := &pairsSource{path: path, defaults: d, known: map[uint64][]uint64{}, first: map[uint64]int32{}}
	if err := s.index(ctx); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open pairs: %w", err)
	}
	s.f, s.r = f, bufio.NewReaderSize(f, 1<<20)
	return s, nil
}

func posKeys(pos, ids []string) []uint64 {
	keys := make([]uint64, 0, len(pos)+len(ids))
	for _, p := range pos {
		keys = append(keys, keyText(p))
	}
	for _, id := range ids {
		keys = append(keys, keyID(id))
	}
	return keys
}

func (s *pairsSource) index(ctx context.Context) error {
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("open pairs: %w", err)
	}
	defer f.Close()
	h := fnv.New64a()
	r := bufio.NewReaderSize(io.TeeReader(f, h), 1<<20)
	for i := 0; ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		b, err := readLine(r)
		if err == io.EOF {
			s.sum = h.Sum64()
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			s.units++
		}
		q, pos, ids, _, perr := parsePairLine(b)
		if perr != nil {
			continue // reported in order by Next
		}
		qh := hash64(normText(q))
		for _, k := range posKeys(pos, ids) {
			if !containsKey(s.known[qh], k) {
				s.known[qh] = append(s.known[qh], k)
			}
			ph := hash64(strconv.FormatUint(qh, 16), strconv.FormatUint(k, 16))
			if _, ok := s.first[ph]; !ok {
				s.first[ph] = int32(i)
			}
		}
	}
}

func containsKey(ks []uint64, k uint64) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// readLine returns the next line without its newline; a blank last line is
// not a line. Long lines are fine.
func readLine(r *bufio.Reader) ([]byte, error) {
	b, err := r.ReadBytes('\n')
	if err == io.EOF && len(b) == 0 {
		return nil, io.EOF
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	return bytes.TrimRight(b, "\r\n"), nil
}

func (s *pairsSource) Len() int { return s.units }
func (s *pairsSource) Name() string {
	return fmt.Sprintf("pairs:%s@%016x", filepath.Base(s.path), s.sum)
}
func (s *pairsSource) Close() error { return s.f.Close() }

func (s *pairsSource) Next(ctx context.Context) (Unit, error) {
	ctx = safe.Ctx(ctx)
	var b []byte
	var err error
	for {
		b, err = readLine(s.r)
		if err != nil {
			if err == io.EOF {
				return Unit{}, io.EOF
			}
			return Unit{}, fmt.Errorf("read %s: %w", s.path, err)
		}
		s.line++
		if len(bytes.TrimSpace(b)) > 0 {
			break
		}
	}
	i := s.line - 1
	u := Unit{Index: i, Where: fmt.Sprintf("%s:%d", s.path, i+1)}
	q, pos, ids, prompt, perr := parsePairLine(b)
	if perr != nil {
		u.Err = perr
		return u, nil
	}
	u.Query = s.query(q, prompt)
	qh := hash64(normText(q))
	u.Exclude = map[uint64]struct{}{}
	for _, k := range s.known[qh] {
		u.Exclude[k] = struct{}{}
	}
	seen := map[uint64]bool{}
	add := func(p Doc, k uint64) {
		ph := hash64(strconv.FormatUint(qh, 16), strconv.FormatUint(k, 16))
		if seen[k] || s.first[ph] != int32(i) {
			u.DupPairs++
			return
		}
		seen[k] = true
		u.Positives = append(u.Positives, p)
	}
	for _, p := range pos {
		add(Doc{Text: p}, keyText(p))
	}
	for _, id := range ids {
		add(Doc{ID: id}, keyID(id))
	}
	return u, nil
}

func (s *pairsSource) query(text, prompt string) Query {
	q := Query{Text: text, Instruction: s.defaults.Instruction, Examples: s.defaults.Examples}
	if prompt != "" {
		q.Instruction = prompt
	}
	return q
}

// beirSource yields one unit per judged query of a BEIR split, in the order
// the qrels file first mentions them. Positives are the documents with a
// score > 0; their texts come from the Corpus.
type beirSource struct {
	name     string
	queries  map[string]string
	order    []beirQuery
	next     int
	defaults PromptDefaults
}

type beirQuery struct {
	id    string
	where string // qrels file:line of its first judgment
	pos   []string
}

// Splits lists the qrels splits of a BEIR folder (the names of
// qrels/*.tsv), sorted; none when it has no qrels folder.
func Splits(dir string) []string {
	paths, _ := filepath.Glob(filepath.Join(dir, "qrels", "*.tsv"))
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".tsv"))
	}
	slices.Sort(out)
	return out
}

// CheckBEIR checks, reading none of them, that the files a run needs are
// in the BEIR folder dir: corpus.jsonl, and with split != "" queries.jsonl
// and the split's qrels. A missing split is named with the splits dir has
// (its error does not wrap fs.ErrNotExist; a missing folder's or file's
// does). Commands call it before they open or index anything.
func CheckBEIR(dir, split string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("dataset %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("dataset %s: not a folder (a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv)", dir)
	}
	need := []string{beir.CorpusPath(dir)}
	if split != "" {
		need = append(need, beir.QueriesPath(dir))
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("dataset %s: no %s (a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv): %w", dir, filepath.Base(p), err)
		}
	}
	if split == "" {
		return nil
	}
	if _, err := os.Stat(beir.QrelsPath(dir, split)); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("split %q: %w", split, err)
	}
	have := Splits(dir)
	if len(have) == 0 {
		return fmt.Errorf("split %q: %s has no qrels (no qrels/*.tsv)", split, dir)
	}
	return fmt.Errorf("split %q: %s has no qrels/%s.tsv; its splits: %s", split, dir, split, strings.Join(have, ", "))
}

// OpenBEIR reads a BEIR folder's queries.jsonl and qrels/<split>.tsv with
// package beir's rules (a repeated judgment: the last grade wins). Each
// judged query is one unit, its positives the documents whose grade is > 0
// in the order the file first judges them. A judged query missing from
// queries.jsonl, or one without a positive, is bad input of its unit, named
// by the qrels line that first judges it.
func OpenBEIR(ctx context.Context, dir, split string, d PromptDefaults) (Source, error) {
	ctx = safe.Ctx(ctx)
	queries, err := beir.ReadQueriesFile(beir.QueriesPath(dir))
	if err != nil {
		return nil, err
	}
	qrelsPath := beir.QrelsPath(dir, split)
	f, err := os.Open(qrelsPath)
	if err != nil {
		return nil, fmt.Errorf("open qrels for split %q: %w", split, err)
	}
	defer f.Close()
	s := &beirSource{queries: queries, defaults: d}
	at := map[string]int{}
	grades := beir.Qrels{}
	h := fnv.New64a()
	err = beir.ScanQrels(io.TeeReader(f, h), qrelsPath, func(line int, j beir.Judgment) error {
		i, ok := at[j.QueryID]
		if !ok {
			i = len(s.order)
			at[j.QueryID] = i
			s.order = append(s.order, beirQuery{id: j.QueryID, where: fmt.Sprintf("%s:%d", qrelsPath, line)})
			grades[j.QueryID] = map[string]int{}
		}
		if _, seen := grades[j.QueryID][j.DocID]; !seen {
			s.order[i].pos = append(s.order[i].pos, j.DocID)
		}
		grades[j.QueryID][j.DocID] = j.Grade
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range s.order {
		q := &s.order[i]
		q.pos = slices.DeleteFunc(q.pos, func(id string) bool { return grades[q.id][id] <= 0 })
	}
	s.name = fmt.Sprintf("beir:%s/%s@%016x", filepath.Base(dir), split, h.Sum64())
	return s, nil
}

func (s *beirSource) Len() int     { return len(s.order) }
func (s *beirSource) Name() string { return s.name }
func (s *beirSource) Close() error { return nil }

func (s *beirSource) Next(ctx context.Context) (Unit, error) {
	ctx = safe.Ctx(ctx)
	if s.next >= len(s.order) {
		return Unit{}, io.EOF
	}
	i := s.next
	s.next++
	bq := s.order[i]
	u := Unit{Index: i, Where: fmt.Sprintf("%s (query %s)", bq.where, bq.id), QueryID: bq.id}
	text, ok := s.queries[bq.id]
	switch {
	case !ok:
		u.Err = fmt.Errorf("query %q not in queries.jsonl", bq.id)
	case len(bq.pos) == 0:
		u.Err = errors.New("no positive (no judgment with score > 0)")
	}
	if u.Err != nil {
		return u, nil
	}
	u.Query = Query{Text: text, Instruction: s.defaults.Instruction, Examples: s.defaults.Examples}
	u.Exclude = map[uint64]struct{}{}
	for _, id := range bq.pos {
		u.Positives = append(u.Positives, Doc{ID: id})
		u.Exclude[keyID(id)] = struct{}{}
	}
	return u, nil
}
