package eval

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Run is a ranked result list per query: query ID -> hits, best first.
type Run map[string][]Hit

// Hit is one ranked document of a Run.
type Hit struct {
	ID    string
	Score float64
}

// IDs returns the ranked document IDs of every query, the form Evaluate
// takes.
func (r Run) IDs() map[string][]string {
	out := make(map[string][]string, len(r))
	for q, hits := range r {
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.ID
		}
		out[q] = ids
	}
	return out
}

// DropIdentical removes, from each query's hits, the hit whose document ID
// equals the query's ID when isQuery says that document is the query
// itself — the rule BEIR's EvaluateRetrieval.evaluate applies by default
// (ignore_identical_ids) and MTEB after it: on collections whose queries
// are also documents (ArguAna, Quora, SCIDOCS) a query would otherwise find
// itself. BEIR drops such hits on the ID alone; isQuery lets a caller keep
// collections whose query and document IDs are independent numberings (a
// query "5" and an unrelated document "5") from losing a relevant document.
// The list is not refilled. It returns how many hits were dropped, and how
// many were kept because isQuery said the document is another one.
func (r Run) DropIdentical(isQuery func(qid string) bool) (dropped, kept int) {
	for q, hits := range r {
		out := hits[:0]
		for _, h := range hits {
			if h.ID == q {
				if isQuery == nil || isQuery(q) {
					dropped++
					continue
				}
				kept++
			}
			out = append(out, h)
		}
		r[q] = out
	}
	return dropped, kept
}

// WriteTREC writes r in the TREC run format trec_eval and pytrec_eval read,
// one line per hit: "qid Q0 docid rank score tag", queries in ID order,
// ranks from 1. IDs must not contain white space.
func WriteTREC(w io.Writer, r Run, tag string) error {
	if tag == "" || strings.ContainsAny(tag, " \t\n") {
		return fmt.Errorf("eval: TREC run tag %q: must be one non-empty word", tag)
	}
	qids := make([]string, 0, len(r))
	for q := range r {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	bw := bufio.NewWriter(w)
	for _, q := range qids {
		if q == "" || strings.ContainsAny(q, " \t\n") {
			return fmt.Errorf("eval: query ID %q cannot be written to a TREC run", q)
		}
		for i, h := range r[q] {
			if h.ID == "" || strings.ContainsAny(h.ID, " \t\n") {
				return fmt.Errorf("eval: document ID %q (query %s) cannot be written to a TREC run", h.ID, q)
			}
			fmt.Fprintf(bw, "%s Q0 %s %d %s %s\n", q, h.ID, i+1, strconv.FormatFloat(h.Score, 'g', -1, 64), tag)
		}
	}
	return bw.Flush()
}

// ReadTREC reads a TREC run ("qid Q0 docid rank score tag", white-space
// separated). Each query's hits are ordered by score, highest first, ties
// by the rank column, then document ID; a
// document repeated for a query is an error naming the line.
func ReadTREC(r io.Reader, name string) (Run, error) {
	type row struct {
		hit  Hit
		rank int
	}
	rows := map[string][]row{}
	seen := map[[2]string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 6 {
			return nil, fmt.Errorf("eval: %s:%d: want 6 fields (qid Q0 docid rank score tag), got %d", name, line, len(f))
		}
		rank, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("eval: %s:%d: rank %q is not an integer", name, line, f[3])
		}
		score, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("eval: %s:%d: score %q is not a number", name, line, f[4])
		}
		key := [2]string{f[0], f[2]}
		if prev, ok := seen[key]; ok {
			return nil, fmt.Errorf("eval: %s:%d: document %s appears twice for query %s (first on line %d)", name, line, f[2], f[0], prev)
		}
		seen[key] = line
		rows[f[0]] = append(rows[f[0]], row{Hit{f[2], score}, rank})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: %s:%d: %w", name, line+1, err)
	}
	run := make(Run, len(rows))
	for q, rs := range rows {
		sort.SliceStable(rs, func(i, j int) bool {
			if rs[i].hit.Score != rs[j].hit.Score {
				return rs[i].hit.Score > rs[j].hit.Score
			}
			if rs[i].rank != rs[j].rank {
				return rs[i].rank < rs[j].rank
			}
			return rs[i].hit.ID < rs[j].hit.ID
		})
		hits := make([]Hit, len(rs))
		for i, x := range rs {
			hits[i] = x.hit
		}
		run[q] = hits
	}
	return run, nil
}
