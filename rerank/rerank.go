// Package rerank scores (query, document) pairs with a cross-encoder: a BERT
// sequence-classification model converted with `annactl models import
// --task rerank`, run by ONNX Runtime or anna's pure-Go forward (Model).
// Both texts go through the model
// together ([CLS] query [SEP] doc [SEP]), which is slower than comparing
// vectors but reads the pair jointly, so it reorders a short candidate list.
// A decoder LLM imported with --task rerank is the "yes/no logit" form
// (Qwen3-Reranker's): the pair is laid out through the manifest's
// PairPrompt and the score is the log-odds of the last label ("yes") over
// the first ("no") at the last token.
//
// Model's invariants: Load checks the model directory (refusing one
// converted for another task) and loads the tokenizer but creates no ONNX
// Runtime session; the first Score with a document creates it, once, and
// returns its error if that fails. A pair's score does not depend on
// Workers; the other documents of a call change it by rounding only (under
// 1e-4, TestScoreBehaviour). Scores are never NaN (Score fails instead).
// ScorePairs scores pairs of different queries in one call (one set of
// length-sorted batches, as Score's); Score(q, docs) is ScorePairs of the
// pairs (q, docs[i]), so a pair scores the same through either, up to the
// same rounding by its batch-mates (TestScorePairs). ScorePairs, the
// package function, serves any Reranker: through its ScorePairs where it
// is a PairScorer, else one Score call per distinct query.
// Loading, the session, the BERT run and the length-sorted batching are
// internal/inference's, shared with package encoder.
//
// A nil context.Context given to a function of this package is
// context.Background().
package rerank

import (
	"context"
	"fmt"
	"math"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/inference"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Reranker scores documents for a query; higher is more relevant. Scores
// are comparable within one call (and across calls with the same model).
type Reranker interface {
	Score(ctx context.Context, query string, docs []string) ([]float32, error)
}

// Pair is one (query, document) pair to score.
type Pair struct {
	Query, Doc string
}

// PairScorer is a Reranker that also scores pairs with different queries
// in one call: one score per pair, in input order, each comparable with
// Score's for the same pair.
type PairScorer interface {
	Reranker
	ScorePairs(ctx context.Context, pairs []Pair) ([]float32, error)
}

// ScorePairs scores pairs with r: in one r.ScorePairs call where r is a
// PairScorer, else with one r.Score call per distinct query (in order of
// first appearance). It returns one score per pair, in input order, and
// fails if r returns another number of scores than it was given documents.
func ScorePairs(ctx context.Context, r Reranker, pairs []Pair) ([]float32, error) {
	ctx = safe.Ctx(ctx)
	if r == nil {
		return nil, fmt.Errorf("rerank: ScorePairs with a nil Reranker")
	}
	if ps, ok := r.(PairScorer); ok {
		out, err := ps.ScorePairs(ctx, pairs)
		if err == nil && len(out) != len(pairs) {
			err = fmt.Errorf("rerank: %d scores for %d pairs", len(out), len(pairs))
		}
		return out, err
	}
	rows := map[string][]int{}
	var order []string
	for i, p := range pairs {
		if _, ok := rows[p.Query]; !ok {
			order = append(order, p.Query)
		}
		rows[p.Query] = append(rows[p.Query], i)
	}
	out := make([]float32, len(pairs))
	for _, q := range order {
		docs := make([]string, len(rows[q]))
		for k, i := range rows[q] {
			docs[k] = pairs[i].Doc
		}
		s, err := r.Score(ctx, q, docs)
		if err != nil {
			return nil, err
		}
		if len(s) != len(docs) {
			return nil, fmt.Errorf("rerank: %d scores for %d documents", len(s), len(docs))
		}
		for k, i := range rows[q] {
			out[i] = s[k]
		}
	}
	return out, nil
}

// Options tune a Model. Zero values pick the defaults. Threads,
// Workers, BatchSize, BatchTokens and MaxLength mean what they mean for the
// encoder (both run through internal/inference); the defaults differ.
type Options struct {
	IntraOpThreads int // default: all cores
	InterOpThreads int // default 1
	BatchSize      int // pairs per ONNX Runtime call, at most (default 16)
	BatchTokens    int // padded tokens per call, at most (default 1024)
	// MaxLength caps query+document tokens (default: the manifest's);
	// longer pairs are truncated longest-first, so long documents lose
	// their tail and the query is kept.
	MaxLength int
	// Label picks the logit column used as the score for models with more
	// than two labels (default: the last). See Model.
	Label int
	// Workers is how many batches of one call run at once (default 1: one
	// after another, each on IntraOpThreads threads).
	Workers int
	// Backend runs the model: "onnxruntime" or "go" (pure Go: BERT
	// cross-encoders and float32 decoder rerankers), as
	// encoder.Options.Backend; "" is ONNX
	// Runtime where the build has it, else Go.
	Backend string
}

// Model is a cross-encoder from a converted model directory, run in this
// process by ONNX Runtime or by anna's pure-Go forward (Options.Backend).
// The score of a pair is the model's logit for num_labels 1 (the usual MS
// MARCO cross-encoders);
// for num_labels 2 it is logit[1] − logit[0], the log-odds of label 1
// ("relevant"), which orders pairs like its softmax probability; for more
// labels it is logit[Options.Label]. Its session is created by the first
// call with a document to score. Safe for concurrent use.
type Model struct {
	m     *inference.Model
	label int
	// prefix and suffix are a decoder reranker's PairPrompt parts,
	// tokenised (for PairTokens); nil for a BERT cross-encoder.
	prefix, suffix []int64
}

// ORTReranker is Model's old name.
//
// Deprecated: use Model; it also runs the pure-Go backend.
type ORTReranker = Model

var _ PairScorer = (*Model)(nil)

// spec is what the reranker serves from a model directory, with the
// defaults documented on Options.
var spec = inference.Spec{
	Task: model.TaskRerank, Name: "rerank",
	Want:     "a cross-encoder (convert one with the task rerank)",
	Hints:    []hint.Action{{Kind: hint.ImportModel, Option: "task", Value: "rerank"}},
	Defaults: inference.Options{Workers: 1, BatchSize: 16},
}

// Load opens the converted cross-encoder in modelDir: it checks the
// directory and loads the tokenizer. The ONNX Runtime session is created
// by the first Score that needs it, which also returns its error.
func Load(ctx context.Context, modelDir string, opts Options) (*Model, error) {
	ctx = safe.Ctx(ctx)
	m, err := inference.Open(ctx, modelDir, spec, inference.Options{
		IntraOpThreads: opts.IntraOpThreads, InterOpThreads: opts.InterOpThreads,
		Workers: opts.Workers, BatchSize: opts.BatchSize, BatchTokens: opts.BatchTokens, MaxLength: opts.MaxLength,
		Backend: opts.Backend,
	})
	if err != nil {
		return nil, err
	}
	labels := m.Manifest().NumLabels
	r := &Model{m: m, label: labels - 1}
	if pp := m.Manifest().PairPrompt; pp != nil {
		r.prefix, r.suffix = m.Tokenizer().IDs(pp.Prefix), m.Tokenizer().IDs(pp.Suffix)
	}
	if opts.Label != 0 {
		if labels <= 2 || opts.Label < 0 || opts.Label >= labels {
			m.Close()
			return nil, fmt.Errorf("rerank: label %d not usable with a %d-label model", opts.Label, labels)
		}
		r.label = opts.Label
	}
	return r, nil
}

// Close frees the session (if one was created) and the tokenizer, waiting
// for running calls.
func (r *Model) Close() error { return r.m.Close() }

// Manifest returns the model's manifest (do not modify it).
func (r *Model) Manifest() *model.Manifest { return r.m.Manifest() }

// Score returns one score per document, in input order. Pairs are sorted by
// length into batches to cut padding; ctx is checked between batches. It
// is ScorePairs of the pairs (query, docs[i]).
func (r *Model) Score(ctx context.Context, query string, docs []string) ([]float32, error) {
	ctx = safe.Ctx(ctx)
	logits, err := r.Logits(ctx, query, docs)
	if err != nil {
		return nil, err
	}
	return r.scores(logits, len(docs)), nil
}

// ScorePairs returns one score per pair, in input order: the pairs, their
// queries possibly different, are sorted by length into batches together
// as Score's documents are; ctx is checked between batches.
func (r *Model) ScorePairs(ctx context.Context, pairs []Pair) ([]float32, error) {
	ctx = safe.Ctx(ctx)
	docs := make([]string, len(pairs))
	for i, p := range pairs {
		docs[i] = p.Doc
	}
	logits, err := r.pairLogits(ctx, func(i int) string { return pairs[i].Query }, docs)
	if err != nil {
		return nil, err
	}
	return r.scores(logits, len(pairs)), nil
}

// PairTokens is how many model tokens the pair takes once laid out and
// truncated as ScorePairs does (special tokens included): what a caller
// bounding a batch by tokens counts.
func (r *Model) PairTokens(p Pair) int {
	tok, maxLen := r.m.Tokenizer(), r.m.MaxLength()
	if pp := r.Manifest().PairPrompt; pp != nil {
		return len(tok.EncodePrompt(r.prefix, pp.Fill(p.Query, p.Doc), r.suffix, maxLen).IDs)
	}
	return len(tok.EncodePair(p.Query, p.Doc, maxLen).IDs)
}

// scores reads n scores off logits [n × num_labels] (see Model).
func (r *Model) scores(logits []float32, n int) []float32 {
	L := r.Manifest().NumLabels
	out := make([]float32, n)
	for i := range out {
		row := logits[i*L : (i+1)*L]
		switch L {
		case 1:
			out[i] = row[0]
		case 2:
			out[i] = row[1] - row[0]
		default:
			out[i] = row[r.label]
		}
	}
	return out
}

// Logits returns the raw logits, [len(docs) × num_labels] row-major.
func (r *Model) Logits(ctx context.Context, query string, docs []string) ([]float32, error) {
	ctx = safe.Ctx(ctx)
	return r.pairLogits(ctx, func(i int) string { return query }, docs)
}

// pairLogits scores pairs (query(i), docs[i]), sorted by length into
// batches (see internal/inference).
func (r *Model) pairLogits(ctx context.Context, query func(int) string, docs []string) ([]float32, error) {
	L := r.Manifest().NumLabels
	out := make([]float32, len(docs)*L)
	err := r.m.Run(ctx, inference.Inputs{Texts: docs, First: query}, func(b inference.Batch) error {
		for j, i := range b.Rows {
			copy(out[i*L:(i+1)*L], b.Out[j*L:(j+1)*L])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, x := range out {
		if math.IsNaN(float64(x)) {
			return nil, fmt.Errorf("rerank: %s produced NaN logits", r.m.Path())
		}
	}
	return out, nil
}
