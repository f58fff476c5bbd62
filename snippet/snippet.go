// Package snippet picks the part of a document that matched a query, to
// show beside a search result, and the words in it to highlight.
//
// For BM25 it finds the query's terms in the text as the BM25 index reads
// them (Bleve's English analyzer: the same stems, the same stop words), with
// their byte offsets, and lets Bleve's own highlighting machinery choose:
// the simple fragmenter cuts fragments around the term locations and the
// simple fragment scorer keeps the one with the most distinct query terms
// (the first such). For a dense hit the fragment comes from the passage that
// matched (the engine knows which), highlighted the same way.
//
// Invariants: offsets are byte offsets into the text given, on UTF-8
// boundaries, Start <= every highlight < End; a snippet is never longer
// than the size asked for plus one word at each end.
package snippet

import (
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
)

// Span is a byte range [Start, End) of a text.
type Span struct{ Start, End int }

// Snippet is a fragment of a text and the query terms in it.
type Snippet struct {
	Span              // the fragment
	Highlights []Span // the query's terms inside it
}

// DefaultSize is the fragment length used when none is given, in bytes.
const DefaultSize = 200

// Highlighter finds snippets. It is safe for concurrent use.
type Highlighter struct {
	analyzer analysis.Analyzer
}

// New returns a Highlighter that reads texts with Bleve's English analyzer,
// as index/lexical indexes them.
func New() (*Highlighter, error) {
	a, err := registry.NewCache().AnalyzerNamed(en.AnalyzerName)
	if err != nil {
		return nil, fmt.Errorf("snippet: analyzer %q: %w", en.AnalyzerName, err)
	}
	return &Highlighter{analyzer: a}, nil
}

// terms is the set of query terms as the index reads them.
func (h *Highlighter) terms(query string) map[string]bool {
	out := map[string]bool{}
	for _, t := range h.analyzer.Analyze([]byte(query)) {
		out[string(t.Term)] = true
	}
	return out
}

// locations finds the query terms in text[from:to], as absolute offsets.
func (h *Highlighter) locations(text string, from, to int, want map[string]bool) (highlight.TermLocations, search.TermLocationMap) {
	var locs highlight.TermLocations
	tlm := search.TermLocationMap{}
	for _, t := range h.analyzer.Analyze([]byte(text[from:to])) {
		term := string(t.Term)
		if !want[term] {
			continue
		}
		start, end := from+t.Start, from+t.End
		locs = append(locs, &highlight.TermLocation{Term: term, Pos: t.Position, Start: start, End: end})
		tlm.AddLocation(term, &search.Location{Pos: uint64(t.Position), Start: uint64(start), End: uint64(end)})
	}
	return locs, tlm
}

// Lexical returns the fragment of about size bytes (DefaultSize when size
// <= 0) of text holding the most distinct query terms; ok is false when
// the text holds none.
func (h *Highlighter) Lexical(text, query string, size int) (s Snippet, ok bool) {
	return h.within(text, 0, len(text), query, size)
}

// Passage returns the fragment of the passage text[start:end] (a dense
// hit's best passage) that holds the most distinct query terms, or its
// beginning when it holds none.
func (h *Highlighter) Passage(text string, start, end int, query string, size int) Snippet {
	start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
	if s, ok := h.within(text, start, end, query, size); ok {
		return s
	}
	if size <= 0 {
		size = DefaultSize
	}
	return Snippet{Span: Span{start, wordEnd(text, min(end, start+size), end)}}
}

func (h *Highlighter) within(text string, from, to int, query string, size int) (Snippet, bool) {
	if size <= 0 {
		size = DefaultSize
	}
	locs, tlm := h.locations(text, from, to, h.terms(query))
	if len(locs) == 0 {
		return Snippet{}, false
	}
	sort.Sort(locs)
	// Bleve's fragmenter reads the whole text; keep its fragments inside
	// [from, to).
	frags := simple.NewFragmenter(size).Fragment([]byte(text), locs)
	scorer := simplehl.NewFragmentScorer(tlm)
	var best *highlight.Fragment
	for _, f := range frags {
		f.Start, f.End = max(f.Start, from), min(f.End, to)
		if f.End <= f.Start {
			continue
		}
		scorer.Score(f)
		if best == nil || f.Score > best.Score {
			best = f
		}
	}
	if best == nil {
		return Snippet{}, false
	}
	s := Snippet{Span: Span{wordStart(text, best.Start, from), wordEnd(text, best.End, to)}}
	for _, l := range locs {
		if l.Start >= s.Start && l.End <= s.End {
			s.Highlights = append(s.Highlights, Span{l.Start, l.End})
		}
	}
	return s, true
}

// wordStart moves i back to the start of the word it falls in (not before
// floor).
func wordStart(text string, i, floor int) int {
	for i > floor {
		r, n := utf8.DecodeLastRuneInString(text[:i])
		if !isWord(r) {
			break
		}
		i -= n
	}
	return i
}

// wordEnd moves i forward to the end of the word it falls in (not past
// ceil).
func wordEnd(text string, i, ceil int) int {
	for i < ceil {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !isWord(r) {
			break
		}
		i += n
	}
	return i
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '-' }
