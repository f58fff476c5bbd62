package mining

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Stats summarise a run. They are merged in input order by the writer and
// saved in the progress sidecar, so a resumed run reports the same totals as
// an uninterrupted one.
type Stats struct {
	Teacher        string `json:"teacher"`
	Units          int    `json:"units"`           // input units processed (lines or queries)
	BadUnits       int    `json:"bad_units"`       // skipped with --skip-bad
	DuplicatePairs int    `json:"duplicate_pairs"` // (query, positive) pairs seen before, removed
	// Pairs are the (query, positive) pairs mined: positives found in the
	// corpus, duplicates removed. Each becomes an example (one per query
	// with Options.Grouped) unless counted below as not written.
	Pairs int `json:"pairs"`
	// MissingPositives are positives the corpus does not hold, skipped
	// (Options.Strict fails instead); MissingFirst names the first few as
	// "QUERY → DOCUMENT".
	MissingPositives int      `json:"missing_positives"`
	MissingFirst     []string `json:"missing_first,omitempty"`
	Examples         int      `json:"examples"`          // examples written
	Lines            int      `json:"lines"`             // output lines (differs from examples for triplets)
	Retrieved        int      `json:"retrieved"`         // candidates returned by the retriever
	ExcludedPositive int      `json:"excluded_positive"` // candidates that are known positives
	ExcludedSameText int      `json:"excluded_same_text"`
	// ExcludedQueryID are candidates that are the query itself: the
	// document with the query's ID, holding its text (evaluation's
	// identical-ID rule).
	ExcludedQueryID  int `json:"excluded_query_id"`
	OutsideWindow    int `json:"outside_window"` // beyond top-k or outside the rank window
	DroppedMargin    int `json:"dropped_margin"` // above the relative margin threshold
	DroppedAbsMargin int `json:"dropped_abs_margin"`
	DroppedCeiling   int `json:"dropped_ceiling"`
	DroppedFloor     int `json:"dropped_floor"`
	ShortExamples    int `json:"short_examples"`   // examples with fewer negatives than asked
	ShortUnits       int `json:"short_queries"`    // units where some example was short
	DroppedExamples  int `json:"dropped_examples"` // fewer than min-negatives (or n-tuple short): not written
	// DroppedByFilters are the DroppedExamples of units whose candidates
	// the margin or a score filter thinned (the others had too few
	// candidates to begin with).
	DroppedByFilters int `json:"dropped_examples_filtered"`
	// QueriesDropped are units with a positive that wrote no example, and
	// why: every positive missing from the corpus, or filtered out by
	// RequireTop, or too few negatives left after the margin and score
	// filters; the rest had too few candidates.
	QueriesDropped         int `json:"queries_dropped"`
	QueriesDroppedMissing  int `json:"queries_dropped_missing"`
	QueriesDroppedTop      int `json:"queries_dropped_require_top"`
	QueriesDroppedFiltered int `json:"queries_dropped_filtered"`
	// FilteredPositives are positives the teacher ranked below
	// Options.RequireTop: their examples were not written.
	FilteredPositives int     `json:"filtered_positives,omitempty"`
	Negatives         int     `json:"negatives"` // negatives written
	PosScores         Summary `json:"pos_scores"`
	NegScores         Summary `json:"neg_scores"` // of the negatives written
	Quality           Quality `json:"teacher_quality"`
}

// Quality is how well the teacher ranks each unit's positives among the
// candidates it labels (the top-k after removing the positives): the
// teacher's own quality on the input's labels, so that teachers can be
// compared on the data they teach. Ties count against the positives.
type Quality struct {
	Units     int     `json:"units"`      // units with a positive and a candidate scored
	NDCG10Sum float64 `json:"ndcg10_sum"` // binary-gain nDCG@10 over positives + candidates, summed
	Top1      int     `json:"top1"`       // units whose best-scored document is a positive
}

// NDCG10 is the mean nDCG@10 (NaN with no unit).
func (q Quality) NDCG10() float64 { return q.NDCG10Sum / float64(q.Units) }

// Top1Rate is the share of units whose best-scored document is a positive.
func (q Quality) Top1Rate() float64 { return float64(q.Top1) / float64(q.Units) }

// observe adds one unit: the teacher's scores of its positives and of its
// candidates.
func (q *Quality) observe(pos, cand []float64) {
	if len(pos) == 0 || len(cand) == 0 {
		return
	}
	type item struct {
		s   float64
		rel bool
	}
	all := make([]item, 0, len(pos)+len(cand))
	for _, s := range cand {
		all = append(all, item{s, false})
	}
	for _, s := range pos {
		all = append(all, item{s, true})
	}
	// Candidates first, and a stable sort: a tie puts the candidate ahead.
	sort.SliceStable(all, func(i, j int) bool { return all[i].s > all[j].s })
	var dcg, idcg float64
	for i := 0; i < 10 && i < len(all); i++ {
		if all[i].rel {
			dcg += 1 / math.Log2(float64(i+2))
		}
		if i < len(pos) {
			idcg += 1 / math.Log2(float64(i+2))
		}
	}
	q.Units++
	q.NDCG10Sum += dcg / idcg
	if all[0].rel {
		q.Top1++
	}
}

// missingNamed bounds Stats.MissingFirst.
const missingNamed = 5

// missing counts a positive of u that the corpus does not hold.
func (s *Stats) missing(u *Unit, id string) {
	s.MissingPositives++
	if len(s.MissingFirst) < missingNamed {
		q := u.QueryID
		if q == "" {
			q = u.Where
		}
		s.MissingFirst = append(s.MissingFirst, q+" → "+id)
	}
}

// filtered is how many candidates the margin and score filters dropped.
func (s *Stats) filtered() int {
	return s.DroppedMargin + s.DroppedAbsMargin + s.DroppedCeiling + s.DroppedFloor
}

func (s *Stats) add(d *Stats) {
	s.Units += d.Units
	s.BadUnits += d.BadUnits
	s.DuplicatePairs += d.DuplicatePairs
	s.Pairs += d.Pairs
	s.MissingPositives += d.MissingPositives
	for _, m := range d.MissingFirst {
		if len(s.MissingFirst) < missingNamed {
			s.MissingFirst = append(s.MissingFirst, m)
		}
	}
	s.ExcludedQueryID += d.ExcludedQueryID
	s.DroppedByFilters += d.DroppedByFilters
	s.QueriesDropped += d.QueriesDropped
	s.QueriesDroppedMissing += d.QueriesDroppedMissing
	s.QueriesDroppedTop += d.QueriesDroppedTop
	s.QueriesDroppedFiltered += d.QueriesDroppedFiltered
	s.Examples += d.Examples
	s.Lines += d.Lines
	s.Retrieved += d.Retrieved
	s.ExcludedPositive += d.ExcludedPositive
	s.ExcludedSameText += d.ExcludedSameText
	s.OutsideWindow += d.OutsideWindow
	s.DroppedMargin += d.DroppedMargin
	s.DroppedAbsMargin += d.DroppedAbsMargin
	s.DroppedCeiling += d.DroppedCeiling
	s.DroppedFloor += d.DroppedFloor
	s.ShortExamples += d.ShortExamples
	s.ShortUnits += d.ShortUnits
	s.DroppedExamples += d.DroppedExamples
	s.FilteredPositives += d.FilteredPositives
	s.Negatives += d.Negatives
	s.PosScores.merge(&d.PosScores)
	s.NegScores.merge(&d.NegScores)
	s.Quality.Units += d.Quality.Units
	s.Quality.NDCG10Sum += d.Quality.NDCG10Sum
	s.Quality.Top1 += d.Quality.Top1
}

// sketchSize bounds the sample kept for quantiles.
const sketchSize = 2048

// Summary is a score distribution: moments, extremes, and a bottom-k sample
// for quantiles. The sample keeps the values with the smallest hash of their
// identity (unit, example, position), so it does not depend on merge order.
type Summary struct {
	N      int          `json:"n"`
	Sum    float64      `json:"sum"`
	SumSq  float64      `json:"sum_sq"`
	Min    float64      `json:"min"`
	Max    float64      `json:"max"`
	Sample []sketchItem `json:"sample,omitempty"`
}

type sketchItem struct {
	P uint64  `json:"p"`
	V float64 `json:"v"`
}

func (s *Summary) observe(v float64, prio uint64) {
	if s.N == 0 || v < s.Min {
		s.Min = v
	}
	if s.N == 0 || v > s.Max {
		s.Max = v
	}
	s.N++
	s.Sum += v
	s.SumSq += v * v
	s.Sample = append(s.Sample, sketchItem{prio, v})
	if len(s.Sample) > 2*sketchSize {
		s.trim()
	}
}

func (s *Summary) trim() {
	sort.Slice(s.Sample, func(i, j int) bool { return s.Sample[i].P < s.Sample[j].P })
	if len(s.Sample) > sketchSize {
		s.Sample = s.Sample[:sketchSize]
	}
}

func (s *Summary) merge(d *Summary) {
	if d.N == 0 {
		return
	}
	if s.N == 0 || d.Min < s.Min {
		s.Min = d.Min
	}
	if s.N == 0 || d.Max > s.Max {
		s.Max = d.Max
	}
	s.N += d.N
	s.Sum += d.Sum
	s.SumSq += d.SumSq
	s.Sample = append(s.Sample, d.Sample...)
	if len(s.Sample) > 2*sketchSize {
		s.trim()
	}
}

// Mean of the observed values.
func (s *Summary) Mean() float64 {
	if s.N == 0 {
		return math.NaN()
	}
	return s.Sum / float64(s.N)
}

// Std is the population standard deviation.
func (s *Summary) Std() float64 {
	if s.N == 0 {
		return math.NaN()
	}
	m := s.Mean()
	return math.Sqrt(math.Max(0, s.SumSq/float64(s.N)-m*m))
}

// Quantile estimates the q-quantile from the sample (exact below sketchSize values).
func (s *Summary) Quantile(q float64) float64 {
	s.trim()
	if len(s.Sample) == 0 {
		return math.NaN()
	}
	vs := make([]float64, len(s.Sample))
	for i, it := range s.Sample {
		vs[i] = it.V
	}
	sort.Float64s(vs)
	return vs[int(math.Round(q*float64(len(vs)-1)))]
}

func (s *Summary) String() string {
	if s.N == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d mean=%.4f std=%.4f min=%.4f p10=%.4f p50=%.4f p90=%.4f max=%.4f",
		s.N, s.Mean(), s.Std(), s.Min, s.Quantile(0.1), s.Quantile(0.5), s.Quantile(0.9), s.Max)
}

// Write prints the human summary.
func (s *Stats) Write(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "teacher:                 %s\n", s.Teacher)
	fmt.Fprintf(&b, "queries (input units):   %d\n", s.Units)
	fmt.Fprintf(&b, "bad input skipped:       %d\n", s.BadUnits)
	fmt.Fprintf(&b, "duplicate pairs removed: %d\n", s.DuplicatePairs)
	if s.MissingPositives > 0 {
		more := ""
		if s.MissingPositives > len(s.MissingFirst) {
			more = fmt.Sprintf(" and %d more", s.MissingPositives-len(s.MissingFirst))
		}
		fmt.Fprintf(&b, "positives not in corpus: %d skipped (--strict fails instead): %s%s\n", s.MissingPositives, strings.Join(s.MissingFirst, ", "), more)
	}
	fmt.Fprintf(&b, "examples written:        %d from %d (query, positive) pairs (%d lines, %d negatives)\n", s.Examples, s.Pairs, s.Lines, s.Negatives)
	fmt.Fprintf(&b, "candidates retrieved:    %d\n", s.Retrieved)
	fmt.Fprintf(&b, "  known positives:       %d\n", s.ExcludedPositive)
	fmt.Fprintf(&b, "  same text as q/pos:    %d\n", s.ExcludedSameText)
	if s.ExcludedQueryID > 0 {
		fmt.Fprintf(&b, "  the query itself:      %d (the document with the query's ID and text, as evaluation drops it)\n", s.ExcludedQueryID)
	}
	fmt.Fprintf(&b, "  outside top-k/window:  %d\n", s.OutsideWindow)
	fmt.Fprintf(&b, "  dropped by margin:     %d\n", s.DroppedMargin)
	if s.DroppedAbsMargin+s.DroppedCeiling+s.DroppedFloor > 0 {
		fmt.Fprintf(&b, "  dropped abs/ceil/floor: %d/%d/%d\n", s.DroppedAbsMargin, s.DroppedCeiling, s.DroppedFloor)
	}
	if s.FilteredPositives > 0 {
		fmt.Fprintf(&b, "positives filtered out:  %d (the teacher ranked them below --require-positive-top)\n", s.FilteredPositives)
	}
	fmt.Fprintf(&b, "queries short of negs:   %d (%d examples short, %d examples not written)\n", s.ShortUnits, s.ShortExamples, s.DroppedExamples)
	if s.DroppedExamples > 0 {
		fmt.Fprintf(&b, "examples not written:    %d: %d with fewer negatives than --min-negatives left after the margin and score filters (--margin, --abs-margin, --max-score, --min-score), %d with too few candidates retrieved\n",
			s.DroppedExamples, s.DroppedByFilters, s.DroppedExamples-s.DroppedByFilters)
	}
	if s.QueriesDropped > 0 {
		var why []string
		for _, r := range []struct {
			n    int
			what string
		}{
			{s.QueriesDroppedFiltered, "too few negatives left after the margin and score filters"},
			{s.QueriesDropped - s.QueriesDroppedFiltered - s.QueriesDroppedMissing - s.QueriesDroppedTop, "too few candidates retrieved"},
			{s.QueriesDroppedMissing, "no positive in the corpus"},
			{s.QueriesDroppedTop, "every positive filtered by --require-positive-top"},
		} {
			if r.n > 0 {
				why = append(why, fmt.Sprintf("%d %s", r.n, r.what))
			}
		}
		fmt.Fprintf(&b, "queries dropped:         %d of %d wrote no example: %s\n", s.QueriesDropped, s.Units, strings.Join(why, ", "))
	}
	fmt.Fprintf(&b, "positive scores:         %s\n", s.PosScores.String())
	fmt.Fprintf(&b, "kept negative scores:    %s\n", s.NegScores.String())
	if q := s.Quality; q.Units > 0 {
		fmt.Fprintf(&b, "teacher quality:         nDCG@10 %.4f, a positive on top in %.1f%% of %d queries (positives among each query's top-k candidates)\n",
			q.NDCG10(), 100*q.Top1Rate(), q.Units)
	}
	io.WriteString(w, b.String())
}
