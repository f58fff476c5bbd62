package mining

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/internal/safe"
)

// PairRecord is a prepared (query, positive) example: the mining input form.
type PairRecord struct {
	Query  string   `json:"query"`
	Pos    []string `json:"pos"`
	Prompt string   `json:"prompt,omitempty"`
}

// ConvertStats count what ConvertPairs did.
type ConvertStats struct {
	Units          int `json:"units"`
	Written        int `json:"written"`
	DuplicatePairs int `json:"duplicate_pairs"`
	BadUnits       int `json:"bad_units"`
}

// ConvertPairs writes one PairRecord per (query, positive) of src: queries
// with several positives become several examples, and repeated (query,
// positive) pairs are dropped. Positives given by ID are resolved through
// corpus (which may be nil when the input has texts only). With skipBad, bad
// units are counted instead of failing.
func ConvertPairs(ctx context.Context, src Source, corpus Corpus, w io.Writer, skipBad bool) (ConvertStats, error) {
	ctx = safe.Ctx(ctx)
	bw := bufio.NewWriter(w)
	st, err := convertPairs(ctx, src, corpus, bw, skipBad)
	// Keep what was converted before a failure: it is valid output.
	if ferr := bw.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("write: %w", ferr)
	}
	return st, err
}

func convertPairs(ctx context.Context, src Source, corpus Corpus, bw *bufio.Writer, skipBad bool) (ConvertStats, error) {
	var st ConvertStats
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	// BEIR sources do not know texts up front; dedupe resolved texts here too.
	seen := map[uint64]struct{}{}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		u, err := src.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		st.Units++
		st.DuplicatePairs += u.DupPairs
		recs, err := convertUnit(ctx, u, corpus)
		if err != nil {
			var bad errBadInput
			if skipBad && errors.As(err, &bad) {
				st.BadUnits++
				continue
			}
			return st, fmt.Errorf("%s: %w", u.Where, err)
		}
		for _, r := range recs {
			k := hash64(normText(r.Query), normText(r.Pos[0]))
			if _, ok := seen[k]; ok {
				st.DuplicatePairs++
				continue
			}
			seen[k] = struct{}{}
			if err := enc.Encode(r); err != nil {
				return st, fmt.Errorf("write: %w", err)
			}
			st.Written++
		}
	}
	return st, nil
}

func convertUnit(ctx context.Context, u Unit, corpus Corpus) ([]PairRecord, error) {
	if u.Err != nil {
		return nil, badInput(u.Err)
	}
	var out []PairRecord
	for _, p := range u.Positives {
		text := p.Text
		if text == "" {
			if corpus == nil {
				return nil, fmt.Errorf("positive %q is given by ID but no corpus was given", p.ID)
			}
			t, ok, err := corpus.Text(ctx, p.ID)
			if err != nil {
				return nil, fmt.Errorf("look up positive %q: %w", p.ID, err)
			}
			if !ok {
				return nil, badInput(fmt.Errorf("positive %q is not in the corpus", p.ID))
			}
			text = t
		}
		out = append(out, PairRecord{Query: u.Query.Text, Pos: []string{text}, Prompt: u.Query.Instruction})
	}
	return out, nil
}

// NLIOptions say how NLI labels become similarity data.
type NLIOptions struct {
	PosScore float64 // score for entailment (1)
	NegScore float64 // score for contradiction (0)
	// Format: "pairs" writes {"sentence1", "sentence2", "score"} (CoSENT /
	// AnglE / CosineSimilarityLoss input); "flag" groups by premise into
	// FlagEmbedding records {"query": premise, "pos": entailed, "neg":
	// contradicted, "pos_scores", "neg_scores", "type"}; premises with no
	// entailed hypothesis are left out of "flag" (nothing to train on).
	Format  string
	Type    string // FlagEmbedding type for "flag" ("normal")
	SkipBad bool
}

// NLIStats count what ConvertNLI did.
type NLIStats struct {
	Lines          int `json:"lines"`
	Entailment     int `json:"entailment"`
	Contradiction  int `json:"contradiction"`
	NeutralDropped int `json:"neutral_dropped"`
	Duplicates     int `json:"duplicates"` // repeated (premise, hypothesis) pairs
	Conflicts      int `json:"conflicts"`  // repeats with another label (the first label is kept)
	Bad            int `json:"bad"`
	Written        int `json:"written"`     // output lines
	NoPositive     int `json:"no_positive"` // "flag": premises left out
}

// SimilarityPair is one line of "pairs" output.
type SimilarityPair struct {
	Sentence1 string  `json:"sentence1"`
	Sentence2 string  `json:"sentence2"`
	Score     float64 `json:"score"`
}

type nliLine struct {
	Premise    *string `json:"premise"`
	Hypothesis *string `json:"hypothesis"`
	Sentence1  *string `json:"sentence1"`
	Sentence2  *string `json:"sentence2"`
	Label      any     `json:"label"`
}

// nliLabel maps the label spellings of SNLI/MNLI/SICK (names, or the 0/1/2
// integer coding of the GLUE/HF datasets) to one of three names.
func nliLabel(v any) (string, error) {
	switch x := v.(type) {
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "entailment", "entails":
			return "entailment", nil
		case "contradiction":
			return "contradiction", nil
		case "neutral":
			return "neutral", nil
		}
		return "", fmt.Errorf("unknown label %q", x)
	case float64:
		switch x {
		case 0:
			return "entailment", nil
		case 1:
			return "neutral", nil
		case 2:
			return "contradiction", nil
		}
		return "", fmt.Errorf("unknown label %v (want 0 entailment, 1 neutral, 2 contradiction)", x)
	case nil:
		return "", errors.New(`missing field "label"`)
	}
	return "", fmt.Errorf("label of unexpected type %T", v)
}

// ConvertNLI turns NLI JSON lines (premise/hypothesis or sentence1/sentence2,
// with label) into similarity data: entailment → positive with PosScore,
// contradiction → negative with NegScore, neutral dropped. name labels errors
// ("snli/dev.jsonl:12: ..."). "flag" output holds the premises in memory
// until the end, to group hypotheses of a premise that are not adjacent.
func ConvertNLI(ctx context.Context, r io.Reader, name string, w io.Writer, opt NLIOptions) (NLIStats, error) {
	ctx = safe.Ctx(ctx)
	var st NLIStats
	if opt.Format == "" {
		opt.Format = "pairs"
	}
	if opt.Format != "pairs" && opt.Format != "flag" {
		return st, fmt.Errorf("nli: unknown format %q (pairs, flag)", opt.Format)
	}
	if opt.Type == "" {
		opt.Type = "normal"
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	seen := map[uint64]string{}
	var order []string
	groups := map[string]*flagembedding.Record{}
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return st, ctx.Err()
		}
		b, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read %s: %w", name, err)
		}
		if strings.TrimSpace(string(b)) == "" {
			continue
		}
		st.Lines++
		a, h, label, err := parseNLI(b)
		if err != nil {
			if opt.SkipBad {
				st.Bad++
				continue
			}
			return st, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if label == "neutral" {
			st.NeutralDropped++
			continue
		}
		k := hash64(normText(a), normText(h))
		if prev, ok := seen[k]; ok {
			st.Duplicates++
			if prev != label {
				st.Conflicts++
			}
			continue
		}
		seen[k] = label
		score := opt.PosScore
		if label == "entailment" {
			st.Entailment++
		} else {
			st.Contradiction++
			score = opt.NegScore
		}
		if opt.Format == "pairs" {
			if err := enc.Encode(SimilarityPair{a, h, score}); err != nil {
				return st, fmt.Errorf("write: %w", err)
			}
			st.Written++
			continue
		}
		g := groups[normText(a)]
		if g == nil {
			g = &flagembedding.Record{Query: a, Pos: []string{}, Neg: []string{}, PosScores: []float64{}, NegScores: []float64{}, Type: opt.Type, Teacher: "nli-label"}
			groups[normText(a)] = g
			order = append(order, normText(a))
		}
		if label == "entailment" {
			g.Pos, g.PosScores = append(g.Pos, h), append(g.PosScores, score)
		} else {
			g.Neg, g.NegScores = append(g.Neg, h), append(g.NegScores, score)
		}
	}
	for _, k := range order {
		g := groups[k]
		if len(g.Pos) == 0 {
			st.NoPositive++
			continue
		}
		if err := enc.Encode(g); err != nil {
			return st, fmt.Errorf("write: %w", err)
		}
		st.Written++
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("write: %w", err)
	}
	return st, nil
}

func parseNLI(b []byte) (a, h, label string, err error) {
	var l nliLine
	if err := json.Unmarshal(b, &l); err != nil {
		return "", "", "", fmt.Errorf("malformed JSON: %w", err)
	}
	pa, ph := l.Premise, l.Hypothesis
	if pa == nil {
		pa = l.Sentence1
	}
	if ph == nil {
		ph = l.Sentence2
	}
	if pa == nil || ph == nil {
		return "", "", "", errors.New(`need "premise"/"hypothesis" or "sentence1"/"sentence2"`)
	}
	if strings.TrimSpace(*pa) == "" || strings.TrimSpace(*ph) == "" {
		return "", "", "", errors.New("empty sentence")
	}
	label, err = nliLabel(l.Label)
	return strings.TrimSpace(*pa), strings.TrimSpace(*ph), label, err
}
