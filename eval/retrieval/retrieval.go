// Package retrieval evaluates an engine on a BEIR collection: every judged
// query searched in each mode (lexical, dense, hybrid, the rerank modes),
// scored by package eval (nDCG@10, Recall@100, MRR@10, MAP). It also holds
// what eval records about an index or a reranker: the fusion choice
// (ChooseFusion) and the rerank modes' measurements (Measurements).
// `annactl eval` is a thin front for it.
//
// Invariants:
//   - Each mode searches the same judged queries (JudgedQueries: judged and
//     present in the queries, sorted), with K = Depth = 100.
//   - A run's scores do not depend on Options.Workers.
//   - Evaluate returns the rows in the order of the modes given; on an
//     error or an interrupt it returns the rows finished before it.
//
// Nothing here writes files or keeps state between calls.
package retrieval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Mode is one row of a retrieval evaluation.
type Mode struct {
	Key  string      // the row's name: "hybrid", "lexical+rerank+rrf", "hybrid/dbsf"
	Mode engine.Mode // the search mode
	Of   engine.Mode // the list a rerank mode rescores
	RRF  bool        // the reranked list fused with the retrieval lists (RerankFusion)
	// Fusion, when set, fuses the lists this way (FusionModes' rows)
	// instead of by Options.Search's fusion.
	Fusion engine.Fusion
}

// Modes are the retrieval report's rows, in print order.
func Modes() []Mode {
	return []Mode{
		{"lexical", engine.ModeLexical, "", false, ""},
		{"dense", engine.ModeDense, "", false, ""},
		{"hybrid", engine.ModeHybrid, "", false, ""},
		{"lexical+rerank", engine.ModeRerank, engine.ModeLexical, false, ""},
		{"hybrid+rerank", engine.ModeRerank, engine.ModeHybrid, false, ""},
		{"lexical+rerank+rrf", engine.ModeRerank, engine.ModeLexical, true, engine.FusionRRF},
		{"hybrid+rerank+rrf", engine.ModeRerank, engine.ModeHybrid, true, engine.FusionRRF},
	}
}

// FusionModes are ChooseFusion's rows: hybrid fused each way, equal
// weights (a tie keeps engine.DefaultFusion).
func FusionModes() []Mode {
	return []Mode{
		{"hybrid/rrf", engine.ModeHybrid, "", false, engine.FusionRRF},
		{"hybrid/minmax", engine.ModeHybrid, "", false, engine.FusionMinMax},
		{"hybrid/dbsf", engine.ModeHybrid, "", false, engine.FusionDBSF},
	}
}

// ErrNeedsReranker is SelectModes' error for a rerank mode asked for
// without a reranker.
var ErrNeedsReranker = errors.New("the mode needs a reranker")

// SelectModes parses a comma-separated list of Modes' keys ("": all that
// apply); the rerank modes apply with a reranker only.
func SelectModes(list string, haveReranker bool) ([]Mode, error) {
	var want []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			want = append(want, m)
		}
	}
	all := Modes()
	var out []Mode
	if len(want) == 0 {
		for _, m := range all {
			if m.Mode != engine.ModeRerank || haveReranker {
				out = append(out, m)
			}
		}
		return out, nil
	}
	for _, w := range want {
		found := false
		for _, m := range all {
			if m.Key == w {
				if m.Mode == engine.ModeRerank && !haveReranker {
					return nil, fmt.Errorf("%s: %w", w, ErrNeedsReranker)
				}
				out = append(out, m)
				found = true
			}
		}
		if !found {
			keys := make([]string, len(all))
			for i, m := range all {
				keys[i] = m.Key
			}
			return nil, fmt.Errorf("unknown mode %q (want %s)", w, strings.Join(keys, ", "))
		}
	}
	return out, nil
}

// ErrNoRerankMode is CheckRecordable's error for modes without a rerank
// mode.
var ErrNoRerankMode = errors.New("no rerank mode")

// MissingCandidatesError is CheckRecordable's error for a rerank mode
// whose candidates' mode is not evaluated.
type MissingCandidatesError struct{ Mode, Of string }

func (e *MissingCandidatesError) Error() string {
	return fmt.Sprintf("mode %s is measured against mode %s; add it to the modes", e.Mode, e.Of)
}

// CheckRecordable checks that modes hold a rerank mode and, for each, the
// mode of its candidates (Measurements compares the two).
func CheckRecordable(modes []Mode) error {
	have := map[string]bool{}
	for _, m := range modes {
		have[m.Key] = true
	}
	n := 0
	for _, m := range modes {
		if m.Mode == engine.ModeRerank {
			if !have[string(m.Of)] {
				return &MissingCandidatesError{Mode: m.Key, Of: string(m.Of)}
			}
			n++
		}
	}
	if n == 0 {
		return ErrNoRerankMode
	}
	return nil
}

// Row is one mode's result.
type Row struct {
	Mode   Mode
	Scores eval.Scores
	Took   time.Duration // searching (and reranking) every query
}

// Searcher is what is evaluated: *engine.Engine.
type Searcher interface {
	Search(ctx context.Context, query string, opts engine.SearchOptions) ([]engine.Result, error)
}

// Options shape Evaluate.
type Options struct {
	// Search is every mode's base options (fusion, weights); Evaluate sets
	// the mode, K, Depth, RerankDepth, RerankOf, RerankFusion and Prompt.
	Search      engine.SearchOptions
	RerankDepth int    // candidates a rerank mode rescores (0: 100)
	Instruction string // on every query, with the model's template
	Workers     int    // queries searched at once (0: 1)
	// Progress, when set, is called as each mode starts, with its key and
	// the number of queries; update (safe for concurrent use) gets the
	// queries done, end is called once the mode's searches are over.
	Progress func(mode string, total int) (update func(done int), end func())
	// Finish, when set, gets each mode's run before it is scored, and may
	// change it (drop hits) or write it; an error stops Evaluate.
	Finish func(m Mode, run eval.Run) error
}

// Evaluate searches the queries qids of ds in each mode and scores the
// runs against ds.Qrels.
func Evaluate(ctx context.Context, eng Searcher, ds *beir.Dataset, qids []string, modes []Mode, opt Options) ([]Row, error) {
	ctx = safe.Ctx(ctx)
	if eng == nil || ds == nil {
		return nil, errors.New("retrieval: no engine or no dataset")
	}
	depth := opt.RerankDepth
	if depth == 0 {
		depth = 100
	}
	var rows []Row
	for _, m := range modes {
		t0 := time.Now()
		so := opt.Search
		so.Mode, so.K, so.Depth, so.RerankDepth, so.RerankOf, so.RerankFusion = m.Mode, 100, 100, depth, m.Of, m.RRF
		so.Prompt = engine.Prompt{Instruction: opt.Instruction}
		if m.Fusion != "" {
			so.Fusion = m.Fusion
		}
		update, end := func(int) {}, func() {}
		if opt.Progress != nil {
			update, end = opt.Progress(m.Key, len(qids))
		}
		run, err := SearchAll(ctx, eng, ds.Queries, qids, so, opt.Workers, update)
		end()
		if err != nil {
			return rows, fmt.Errorf("mode %s: %w", m.Key, err)
		}
		took := time.Since(t0)
		if opt.Finish != nil {
			if err := opt.Finish(m, run); err != nil {
				return rows, err
			}
		}
		rows = append(rows, Row{m, eval.Evaluate(run.IDs(), ds.Qrels), took})
	}
	return rows, nil
}

// SearchAll searches every query ID of qids (its text in queries) with
// opts, workers at a time; progress (nil: none) gets the number done. On
// an error it stops and returns the first, naming the query.
func SearchAll(ctx context.Context, eng Searcher, queries map[string]string, qids []string, opts engine.SearchOptions, workers int, progress func(done int)) (eval.Run, error) {
	ctx = safe.Ctx(ctx)
	run := make(eval.Run, len(qids))
	var mu sync.Mutex
	var firstErr error
	ch := make(chan string)
	var wg sync.WaitGroup
	done := 0
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range ch {
				res, err := eng.Search(ctx, queries[q], opts)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("query %s: %w", q, err)
				}
				hits := make([]eval.Hit, len(res))
				for i, r := range res {
					hits[i] = eval.Hit{ID: r.ID, Score: r.Score}
				}
				run[q] = hits
				done++
				if progress != nil {
					progress(done)
				}
				mu.Unlock()
			}
		}()
	}
	for _, q := range qids {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		ch <- q
	}
	close(ch)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return run, firstErr
}

// JudgedQueries are the IDs of ds's queries that have judgments, sorted.
func JudgedQueries(ds *beir.Dataset) []string {
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		if _, ok := ds.Queries[q]; ok {
			qids = append(qids, q)
		}
	}
	sort.Strings(qids)
	return qids
}

// IsQueryDoc says whether the document with a query's ID is that query:
// its text (title and text joined) contains the query's, whitespace and
// case aside. On BEIR's sets whose queries are documents this holds (the
// query is the document, or its title); on sets numbered independently it
// does not, and a hit that only shares the query's ID is kept.
func IsQueryDoc(ds *beir.Dataset) func(qid string) bool {
	docs := make(map[string]string, len(ds.Corpus))
	for _, d := range ds.Corpus {
		docs[d.ID] = engine.EmbedText(engine.Document(d))
	}
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	return func(qid string) bool {
		d, ok := docs[qid]
		q := norm(ds.Queries[qid])
		return ok && q != "" && strings.Contains(norm(d), q)
	}
}

// ChooseFusion picks the best of FusionModes' rows by nDCG@10
// (engine.DefaultFusion on a tie) and says why: the choice an index records
// (engine.SetFusion). It returns an error when rows hold no fused mode.
func ChooseFusion(rows []Row, dataset, split string, queries int) (engine.FusionChoice, error) {
	best := -1
	var parts []string
	for i, r := range rows {
		if r.Mode.Fusion == "" {
			continue
		}
		if best < 0 || r.Scores.NDCG10 > rows[best].Scores.NDCG10 ||
			r.Scores.NDCG10 == rows[best].Scores.NDCG10 && r.Mode.Fusion == engine.DefaultFusion {
			best = i
		}
		parts = append(parts, fmt.Sprintf("%s %.4f", r.Mode.Fusion, r.Scores.NDCG10))
	}
	if best < 0 {
		return engine.FusionChoice{}, errors.New("retrieval: no fused mode to choose from")
	}
	return engine.FusionChoice{
		Fusion: rows[best].Mode.Fusion,
		Why:    fmt.Sprintf("chosen by evaluation on %s, split %s, %d judged queries: hybrid nDCG@10 %s", filepath.Base(filepath.Clean(dataset)), split, queries, strings.Join(parts, ", ")),
	}, nil
}

// Measurements are the rerank rows' nDCG@10 against their candidates'
// (what model.RecordMeasurements writes into a reranker's manifest);
// embedder is the fingerprint of the index's model, recorded for the
// modes whose candidates are dense.
func Measurements(dataset, split string, depth int, embedder string, rows []Row, queries int) []model.Measurement {
	by := map[string]eval.Scores{}
	for _, r := range rows {
		by[r.Mode.Key] = r.Scores
	}
	now := time.Now().UTC().Format(time.RFC3339)
	var out []model.Measurement
	for _, m := range Modes() {
		after, ok := by[m.Key]
		if m.Mode != engine.ModeRerank || !ok {
			continue
		}
		x := model.Measurement{Dataset: filepath.Base(filepath.Clean(dataset)), Split: split, Candidates: string(m.Of), Depth: depth, Fusion: m.RRF,
			Metric: "ndcg@10", Before: by[string(m.Of)].NDCG10, After: after.NDCG10, Queries: queries, Date: now}
		if m.Of != engine.ModeLexical {
			x.Embedder = embedder
		}
		out = append(out, x)
	}
	return out
}

// FusionGiven reports whether o says anything about fusion.
func FusionGiven(o engine.SearchOptions) bool {
	return o.Fusion != "" || o.RRFK != 0 || o.Weights != nil
}

// FusionLabel says how o fuses the lists, e.g. "rrf, dense×2"; "" for
// engine.DefaultFusion with equal weights, and for the index's fusion ("")
// with no other setting.
func FusionLabel(o engine.SearchOptions) string {
	f := o.NamedFusion()
	if f == "" {
		f = engine.DefaultFusion
	}
	if f == engine.DefaultFusion && o.RRFK == 0 && o.Weights == nil {
		return ""
	}
	s := string(f)
	if o.RRFK != 0 {
		s += fmt.Sprintf(" k=%d", o.RRFK)
	}
	for _, l := range []string{"lexical", "dense", "rerank"} {
		if w, ok := o.Weights[l]; ok {
			s += fmt.Sprintf(", %s×%g", l, w)
		}
	}
	return s
}

// PairCache scores each (query, document) pair once across an
// evaluation's rerank modes, whose candidate lists overlap. A pair's score
// can differ from a fresh one by rounding only (it was computed in another
// batch). It is safe for concurrent use.
type PairCache struct {
	rr     engine.Reranker
	mu     sync.Mutex
	scores map[[2]string]float32
}

// NewPairCache wraps rr.
func NewPairCache(rr engine.Reranker) *PairCache {
	return &PairCache{rr: rr, scores: map[[2]string]float32{}}
}

// Score is engine.Reranker's.
func (c *PairCache) Score(ctx context.Context, query string, docs []string) ([]float32, error) {
	ctx = safe.Ctx(ctx)
	if c == nil || c.rr == nil {
		return nil, errors.New("retrieval: PairCache without a reranker")
	}
	out := make([]float32, len(docs))
	var miss []int
	c.mu.Lock()
	for i, d := range docs {
		if v, ok := c.scores[[2]string{query, d}]; ok {
			out[i] = v
		} else {
			miss = append(miss, i)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	texts := make([]string, len(miss))
	for j, i := range miss {
		texts[j] = docs[i]
	}
	scores, err := c.rr.Score(ctx, query, texts)
	if err != nil {
		return nil, err
	}
	if len(scores) != len(texts) {
		return nil, fmt.Errorf("the reranker returned %d scores for %d documents", len(scores), len(texts))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, i := range miss {
		out[i] = scores[j]
		c.scores[[2]string{query, docs[i]}] = scores[j]
	}
	return out, nil
}
