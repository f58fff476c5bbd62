// Package mining turns (query, positive) data into training sets with hard
// negatives: candidates come from a retrieval pipeline, a teacher scores them
// (soft labels), a positive-aware margin drops likely false negatives, and a
// seeded sampler picks the negatives. Output is FlagEmbedding JSON lines by
// default, or sentence-transformers forms.
//
// The miner streams: units (one input line, or one BEIR query) are read,
// processed in parallel, and written back in input order through a bounded
// reorder buffer, so memory stays flat in the number of queries and the output
// does not depend on the number of workers. A small sidecar file records how
// far the output is complete, so an interrupted run can be resumed with no
// duplicates and no gaps.
//
// The miner depends only on the small interfaces below. Mine wires them to
// the engine, encoder and rerank packages for a run from files (a BEIR
// folder or a pairs file, the corpus's index, the teacher chosen by
// DefaultTeacher or named), as `annactl mine-negatives` runs it.
//
// A nil context.Context given to a function of this package is
// context.Background(), and a panic on a goroutine Miner.Run starts (a
// Source, Retriever or Teacher that panics) fails the run with an error.
package mining

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Candidate is one retrieved document.
type Candidate struct {
	ID   string
	Text string // may be empty: the miner then asks the Corpus
	// Body, if set, is another form of the same document (the text without
	// its title): a positive given in that form also excludes it.
	Body  string
	Score float64 // the retriever's own score (fused, BM25 or cosine)
	Rank  int     // 0-based rank in the retriever's list
}

// Query is what retrievers and teachers see: the text and the task prompt.
type Query struct {
	Text        string
	Instruction string // task instruction ("" = none)
	Examples    []Shot // few-shot examples for the query side
}

// Shot is one few-shot example for instruction-following embedders.
type Shot struct {
	Query    string `json:"query"`
	Response string `json:"response"`
}

// Retriever returns the top k candidates for a query, best first.
type Retriever interface {
	Retrieve(ctx context.Context, q Query, k int) ([]Candidate, error)
}

// Teacher scores (query, document) pairs; higher = more relevant. Scores may
// be any real numbers (cosines, cross-encoder logits). Docs always carry
// their text; the ID, when known, lets a teacher reuse stored vectors. Name
// identifies the teacher in the output.
type Teacher interface {
	Name() string
	Score(ctx context.Context, q Query, docs []Doc) ([]float64, error)
}

// Corpus resolves document IDs to the text that was indexed.
type Corpus interface {
	Text(ctx context.Context, id string) (text string, ok bool, err error)
}

// Sampling says how negatives are picked from the filtered candidates.
type Sampling string

const (
	SampleRandom Sampling = "random" // uniformly, seeded per example
	SampleTop    Sampling = "top"    // the highest teacher scores
)

// Format is the output layout.
type Format string

const (
	FormatFlag        Format = "flag"         // FlagEmbedding: query, pos, neg, pos_scores, neg_scores, prompt, type
	FormatTriplet     Format = "triplet"      // sentence-transformers: anchor, positive, negative (one line per negative)
	FormatNTuple      Format = "n-tuple"      // anchor, positive, negative_1..negative_n (examples short of n are skipped)
	FormatLabeledList Format = "labeled-list" // query, answer [pos, negs...], labels [1, 0...]
)

// Options configure a mining run. The zero value is not useful: start from
// DefaultOptions.
type Options struct {
	Negatives int      // negatives per example (7)
	TopK      int      // candidates considered after removing positives (50)
	Margin    float64  // relative margin (0.95); 0 turns it off. See Threshold.
	AbsMargin float64  // drop candidates scoring above anchor − AbsMargin; NaN = off
	MaxScore  float64  // ceiling: drop candidates scoring above; NaN = off
	MinScore  float64  // floor: drop candidates scoring below; NaN = off
	RangeMin  int      // skip the first RangeMin candidates (0-based rank window, after removing positives)
	RangeMax  int      // consider ranks < RangeMax; 0 = TopK
	Sampling  Sampling // random (default) or top
	Seed      uint64
	// MinNegatives: examples keeping fewer negatives are not written (and are
	// counted). Default 1: an example with no negative teaches nothing.
	MinNegatives int
	// RequireTop, when > 0, keeps a positive only where the teacher ranks
	// it within the top RequireTop of itself and the candidates it labels
	// (a tie counts against it); the others' examples are not written (and
	// are counted). For generated queries (doc2query): the consistency
	// filter of InPars and Promptagator, a query kept only if the teacher
	// finds the document it was written for.
	RequireTop int
	Format     Format
	// Grouped writes one example per unit with all its positives instead of
	// one example per (query, positive).
	Grouped bool
	Type    string // FlagEmbedding "type" field ("normal")
	Workers int    // parallel units (default 2)
	// CheckpointEvery: fsync the output and update the sidecar after this
	// many units (default 64).
	CheckpointEvery int
	SkipBad         bool // count and skip bad input units instead of failing
	// Strict makes a positive that the corpus does not hold bad input of
	// its unit (the run fails, or skips the unit with SkipBad). Without it
	// such a positive is skipped and counted (Stats.MissingPositives), as
	// evaluation treats a judged document missing from the corpus:
	// published BEIR sets have such judgments.
	Strict bool
	Resume bool // continue an interrupted run of the same output
	// Progress, if set, is called from the writer goroutine after each unit.
	Progress func(done, total int)
}

// DefaultOptions are the defaults.
func DefaultOptions() Options {
	return Options{
		Negatives:       7,
		TopK:            50,
		Margin:          0.95,
		AbsMargin:       math.NaN(),
		MaxScore:        math.NaN(),
		MinScore:        math.NaN(),
		Sampling:        SampleRandom,
		MinNegatives:    1,
		Format:          FormatFlag,
		Type:            "normal",
		Workers:         2,
		CheckpointEvery: 64,
	}
}

func (o *Options) validate() error {
	var errs []string
	if o.Negatives < 1 {
		errs = append(errs, "negatives must be >= 1")
	}
	if o.TopK < 1 {
		errs = append(errs, "top-k must be >= 1")
	}
	if o.RequireTop < 0 {
		errs = append(errs, "require-positive-top must be >= 0 (0 = off)")
	}
	if o.Margin < 0 {
		errs = append(errs, "margin must be >= 0 (0 = off)")
	}
	if !math.IsNaN(o.AbsMargin) && o.AbsMargin < 0 {
		errs = append(errs, "abs-margin must be >= 0")
	}
	if o.RangeMin < 0 || o.RangeMax < 0 || (o.RangeMax > 0 && o.RangeMax <= o.RangeMin) {
		errs = append(errs, fmt.Sprintf("bad rank window [%d, %d)", o.RangeMin, o.RangeMax))
	}
	if o.RangeMax > o.TopK {
		errs = append(errs, fmt.Sprintf("range-max %d exceeds top-k %d", o.RangeMax, o.TopK))
	}
	switch o.Sampling {
	case SampleRandom, SampleTop:
	case "":
		o.Sampling = SampleRandom
	default:
		errs = append(errs, fmt.Sprintf("unknown sampling %q (random, top)", o.Sampling))
	}
	switch o.Format {
	case FormatFlag, FormatTriplet, FormatNTuple, FormatLabeledList:
	case "":
		o.Format = FormatFlag
	default:
		errs = append(errs, fmt.Sprintf("unknown format %q (flag, triplet, n-tuple, labeled-list)", o.Format))
	}
	if o.MinNegatives < 0 {
		errs = append(errs, "min-negatives must be >= 0")
	}
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.CheckpointEvery < 1 {
		o.CheckpointEvery = 64
	}
	if o.Type == "" {
		o.Type = "normal"
	}
	if len(errs) > 0 {
		return errors.New("mining options: " + strings.Join(errs, "; "))
	}
	return nil
}

// Threshold is the highest score a negative may have for an anchor positive
// score pos under relative margin m:
//
//	threshold = pos − (1 − m)·|pos|
//
// For pos ≥ 0 this is the usual m·pos ("TopK-PercPos": drop negatives scoring
// above 95% of the positive). The naive m·pos is wrong for negative scores
// (cross-encoder logits): with pos = −2 it gives −1.9, above the positive, so
// it would keep negatives that outscore the positive. The form above always
// stays below pos by the fraction (1 − m) of its magnitude. m = 0 disables the
// rule (+Inf).
func Threshold(pos, m float64) float64 {
	if m == 0 {
		return math.Inf(1)
	}
	return pos - (1-m)*math.Abs(pos)
}

// normText is the form in which texts are compared for "equals the query or
// a positive": surrounding space trimmed and inner runs of space collapsed.
func normText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
