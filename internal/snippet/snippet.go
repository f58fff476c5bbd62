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
//
// # Cost
//
// The work is linear in the text read and bounded whatever the document's
// length, so that a search over huge or repetitive documents (a log, a
// table) stays fast:
//
//   - The text is analysed piece by piece, in text order, and the search
//     stops at the first fragment that holds every distinct query term:
//     no later fragment can score higher, and the first best one wins.
//   - Bleve's fragmenter runs on bounded windows of the text around a few
//     term locations at a time, and its scorer on the locations inside
//     each fragment, so each location costs O(size), never O(locations).
//     On every text the choice is the one Bleve makes over the whole text,
//     up to the limits below.
//   - A text (or passage) of at most MaxAnalysed bytes is analysed as a
//     whole. A longer one is first scanned cheaply for the places where a
//     query term can start (its stem but the last letter, ASCII letters
//     matched without regard to case: an English token whose stem is s
//     starts with s but its last letter), and only the words there are
//     analysed. Where that scan cannot be trusted (a query term with
//     non-ASCII letters or of fewer than four letters, or a text holding
//     U+0130 or U+212A, which lower-case to ASCII letters), the text is
//     analysed from its start instead.
//   - At most MaxAnalysed bytes are analysed and MaxScanned bytes scanned
//     per snippet; past them the best fragment found so far is kept (or
//     none: for a dense hit, the passage's beginning).
//   - A snippet extends its fragment to word boundaries by at most maxWord
//     bytes at each end.
//
// LexicalContext and PassageContext stop when their context is cancelled
// (they check it every few milliseconds of work) and return its error; a
// nil context is context.Background().
package snippet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	"github.com/blevesearch/segment"

	"github.com/anna-search/anna/lang"
)

// Span is a byte range [Start, End) of a text.
type Span struct{ Start, End int }

// Snippet is a fragment of a text and the query terms in it.
type Snippet struct {
	Span              // the fragment
	Highlights []Span // the query's terms inside it: in order, none overlapping another
}

// addHighlight appends sp to hs (in order by start): where sp overlaps the
// last (a term inside another: CJK's characters inside their bigrams), one
// highlight covers both.
func addHighlight(hs []Span, sp Span) []Span {
	if n := len(hs); n > 0 && sp.Start < hs[n-1].End {
		hs[n-1].End = max(hs[n-1].End, sp.End)
		return hs
	}
	return append(hs, sp)
}

// DefaultSize is the fragment length used when none is given, in bytes.
const DefaultSize = 200

// MaxAnalysed is how many bytes of a text one snippet runs through the
// analyzer at most; a text or passage no longer than this is analysed as a
// whole (see Cost in the package doc).
const MaxAnalysed = 1 << 20

// MaxScanned is how many bytes of a text longer than MaxAnalysed one
// snippet scans for places where a query term can start.
const MaxScanned = 64 << 20

// maxWord is how far, in bytes, a fragment is extended to end on word
// boundaries (the longest word in SciFact, Cranfield, CISI, CACM and SQuAD
// is under 60 bytes).
const maxWord = 100

// limits are the bounds above; tests shrink them.
type limits struct {
	whole    int // the longest text analysed as a whole
	analysed int // bytes analysed at most
	scanned  int // bytes scanned for candidates at most
	segment  int // bytes analysed between two looks at the context
	scan     int // bytes scanned for candidates between two looks at the context
	batch    int // term locations given to the fragmenter at once
}

var defaultLimits = limits{whole: MaxAnalysed, analysed: MaxAnalysed, scanned: MaxScanned, segment: 64 << 10, scan: 1 << 20, batch: 64}

// Highlighter finds snippets. It is safe for concurrent use. Make one with
// New: a zero Highlighter finds none (the Context methods say why).
type Highlighter struct {
	analyzer analysis.Analyzer
	lim      limits
	english  bool // the cheap scan of long texts holds for English stems only
}

// New returns a Highlighter that reads texts with Bleve's English analyzer,
// as internal/index/lexical indexes English documents.
func New() (*Highlighter, error) {
	a, err := registry.NewCache().AnalyzerNamed(en.AnalyzerName)
	if err != nil {
		return nil, fmt.Errorf("snippet: analyzer %q: %w", en.AnalyzerName, err)
	}
	return &Highlighter{analyzer: a, lim: defaultLimits, english: true}, nil
}

// NewFor returns a Highlighter that reads texts as internal/index/lexical reads a
// document of language code (package lang: "" and "en" are New's English).
// A long text in another language is analysed from its start rather than
// scanned for stems (the scan's rule is English's), still bounded by
// MaxAnalysed. Its fragments end at word boundaries where the script has
// them and at any character where it has none (Chinese, Japanese, Thai...);
// offsets are byte offsets in the text's logical order, whatever the
// direction it is shown in (Arabic, Hebrew).
func NewFor(code string) (*Highlighter, error) {
	if code == "" || code == lang.English {
		return New()
	}
	a, err := lang.Analyzer(code)
	if err != nil {
		return nil, fmt.Errorf("snippet: %w", err)
	}
	return &Highlighter{analyzer: a, lim: defaultLimits}, nil
}

// terms is the set of query terms as the index reads them.
func (h *Highlighter) terms(query string) map[string]string {
	out := map[string]string{}
	for _, t := range h.analyzer.Analyze([]byte(query)) {
		out[string(t.Term)] = string(t.Term)
	}
	return out
}

// Lexical returns the fragment of about size bytes (DefaultSize when size
// <= 0) of text holding the most distinct query terms; ok is false when
// the text holds none.
func (h *Highlighter) Lexical(text, query string, size int) (s Snippet, ok bool) {
	s, ok, _, _ = h.within(context.Background(), text, 0, len(text), query, size)
	return s, ok
}

// LexicalContext is Lexical, stopped when ctx is cancelled (with ctx's
// error, wrapped).
func (h *Highlighter) LexicalContext(ctx context.Context, text, query string, size int) (s Snippet, ok bool, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s, ok, _, err = h.within(ctx, text, 0, len(text), query, size)
	return s, ok, err
}

// Passage returns the fragment of the passage text[start:end] (a dense
// hit's best passage) that holds the most distinct query terms, or its
// beginning when it holds none.
func (h *Highlighter) Passage(text string, start, end int, query string, size int) Snippet {
	s, err := h.PassageContext(context.Background(), text, start, end, query, size)
	if err != nil { // a zero Highlighter: the passage's beginning
		return lead(text, start, end, size)
	}
	return s
}

// PassageContext is Passage, stopped when ctx is cancelled (with ctx's
// error, wrapped).
func (h *Highlighter) PassageContext(ctx context.Context, text string, start, end int, query string, size int) (Snippet, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
	s, ok, _, err := h.within(ctx, text, start, end, query, size)
	if err != nil {
		return Snippet{}, err
	}
	if ok {
		return s, nil
	}
	return lead(text, start, end, size), nil
}

// lead is the beginning of text[start:end] (clamped to the text), of
// about size bytes, cut at a word.
func lead(text string, start, end, size int) Snippet {
	start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
	if size <= 0 {
		size = DefaultSize
	}
	return Snippet{Span: Span{start, wordEnd(text, max(start, min(end, start+size)), end)}}
}

// cost is what one snippet read, for tests.
type cost struct {
	analysed  int  // bytes run through the analyzer
	scanned   int  // bytes scanned for candidates
	locations int  // query term locations found
	truncated bool // a limit stopped the search
}

// within finds the best fragment of text[from:to] (see Cost in the package
// doc for how): the first of Bleve's fragments with the most distinct
// query terms, as if Bleve had fragmented and scored the whole text.
func (h *Highlighter) within(ctx context.Context, text string, from, to int, query string, size int) (Snippet, bool, cost, error) {
	if size <= 0 {
		size = DefaultSize
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if h == nil || h.analyzer == nil {
		return Snippet{}, false, cost{}, errors.New("snippet: a Highlighter is made by New")
	}
	want := h.terms(query)
	if len(want) == 0 || from >= to {
		return Snippet{}, false, cost{}, nil
	}
	f := newFinder(h, text, from, to, want)
	sel := &selector{text: text, from: from, to: to, size: size, distinct: len(want), batch: h.lim.batch}
	for {
		if err := ctx.Err(); err != nil {
			return Snippet{}, false, f.cost, fmt.Errorf("snippet: %w", err)
		}
		front, done := f.more()
		sel.locs = append(sel.locs, f.out...)
		f.out = f.out[:0]
		if done {
			front = to
		}
		if err := sel.process(ctx, front, done); err != nil {
			return Snippet{}, false, f.cost, err
		}
		if sel.complete() || done {
			break
		}
	}
	f.cost.locations = f.found
	if sel.best == nil {
		return Snippet{}, false, f.cost, nil
	}
	return sel.snip, true, f.cost, nil
}

// finder finds the query's term locations in text[from:to], in text order,
// a piece at a time.
type finder struct {
	h        *Highlighter
	text     string
	from, to int
	want     map[string]string
	needles  [][]byte // lower-case ASCII prefixes of the terms; nil: analyse everything
	pos      int      // where the next piece starts
	analysed int      // text[..analysed) is analysed (candidate mode)
	tokens   int      // tokens read so far (positions)
	stopped  bool     // the analyzer stopped at an invalid sequence
	step     int      // the size of the last piece
	buf, low []byte
	out      []*highlight.TermLocation
	found    int
	cost     cost
}

func newFinder(h *Highlighter, text string, from, to int, want map[string]string) *finder {
	f := &finder{h: h, text: text, from: from, to: to, want: want, pos: from, analysed: from, step: 2 << 10}
	if to-from > h.lim.whole && h.english {
		f.needles = needles(want)
	}
	return f
}

// needles are the places where the terms can start: each term's ASCII
// lower-case stem but its last letter. An English token (Bleve's analyzer:
// possessive removed, lower-cased, Porter-stemmed) whose term is s starts
// with s[:len(s)-1]: the stemmer only removes or rewrites a suffix, and
// rewrites at most the stem's last letter (happy -> happi, sensibility ->
// sensibl, relational -> relat); it held for all 1.19 million tokens of
// SciFact, Cranfield, CISI, CACM and SQuAD whose term is ASCII. nil when
// a term has no such prefix of three letters or more. (A text holding a
// letter that lower-cases to ASCII from outside it, U+0130 or U+212A, is
// analysed whole: see more.)
func needles(want map[string]string) [][]byte {
	var out [][]byte
	for t := range want {
		n := t[:max(0, len(t)-1)]
		for i := 0; i < len(n); i++ {
			if n[i] >= utf8.RuneSelf || ('A' <= n[i] && n[i] <= 'Z') {
				return nil
			}
		}
		if len(n) < 3 {
			return nil
		}
		out = append(out, []byte(n))
	}
	// Longest first: when one needle is a prefix of another, both find
	// the same places.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// more reads the next piece of the text, appending the term locations in
// it to f.out. Afterwards every location that starts before front is
// known; done says the text (or a limit) is exhausted.
func (f *finder) more() (front int, done bool) {
	if f.stopped {
		return f.to, true
	}
	if f.pos >= f.to || f.cost.analysed >= f.h.lim.analysed || f.cost.scanned >= f.h.lim.scanned {
		f.cost.truncated = f.pos < f.to
		return f.to, true
	}
	// Pieces grow from 4 KiB, so that a search that ends early (see
	// complete) reads little.
	f.step = min(2*f.step, max(f.h.lim.segment, f.h.lim.scan))
	if f.needles == nil {
		end := f.to
		if step := min(f.step, f.h.lim.segment); end-f.pos > step {
			end = safeCut(f.text, f.pos+step, f.to)
		}
		f.analyse(f.pos, end)
		f.pos = end
		return end, f.pos >= f.to
	}
	// Candidate mode: find where a needle starts in text[pos:end) (the
	// scan reads a needle's length past end), analyse the words there.
	end := min(f.to, f.pos+min(f.step, f.h.lim.scan))
	if !validAround(f.text, f.pos, end, f.from, f.to) || strings.ContainsRune(f.text[f.pos:min(f.to, end+4)], '\u0130') || strings.ContainsRune(f.text[f.pos:min(f.to, end+4)], '\u212A') {
		// Where the analyzer stops (see analyse) is known only by
		// analysing, and the needles do not see İ and K (Kelvin) as i
		// and k: go on from here analysing everything.
		f.needles = nil
		f.pos = max(f.analysed, cutBefore(f.text, f.pos, f.analysed))
		return f.pos, false
	}
	longest := len(f.needles[0])
	stop := min(f.to, end+longest-1)
	f.low = lowerASCII(f.low[:0], f.text[f.pos:stop])
	f.cost.scanned += end - f.pos
	var at []int
	for _, n := range f.needles {
		for i := 0; ; {
			j := bytes.Index(f.low[i:], n)
			if j < 0 || f.pos+i+j >= end {
				break
			}
			at = append(at, f.pos+i+j)
			i += j + 1
		}
	}
	sort.Ints(at)
	// Analyse the words at the candidates, candidates less than mergeGap
	// bytes apart in one window (one call of the analyzer, not many).
	a, b := 0, 0
	flush := func() bool {
		f.analyse(a, b)
		f.analysed = max(f.analysed, b)
		a, b = 0, 0
		return f.cost.analysed < f.h.lim.analysed
	}
	for _, p := range at {
		if p < f.analysed || p < b {
			continue // inside the words already analysed, or about to be
		}
		if b > a && p-b > mergeGap || b-a > f.h.lim.segment {
			if !flush() {
				f.cost.truncated = true
				return f.to, true
			}
		}
		if b == a {
			a = max(f.analysed, cutBefore(f.text, p, f.from))
		}
		b = safeCut(f.text, min(f.to, p+longest+1), f.to)
	}
	if b > a && !flush() {
		f.cost.truncated = true
		return f.to, true
	}
	f.pos = end
	return end, f.pos >= f.to
}

// mergeGap is how close, in bytes, candidates are analysed together.
const mergeGap = 256

// analyse runs text[a:b] through the analyzer and keeps the query terms.
func (f *finder) analyse(a, b int) {
	if b <= a {
		return
	}
	f.cost.analysed += b - a
	if !utf8.ValidString(f.text[a:b]) {
		// Some invalid sequences (a truncated one, a surrogate, an
		// overlong form) stop Bleve's tokenizer: the index reads nothing
		// of the text after them, and neither does the snippet.
		seg := segment.NewWordSegmenterDirect([]byte(f.text[a:b]))
		read := 0
		for seg.Segment() {
			read += len(seg.Bytes())
		}
		f.stopped = read < b-a
	}
	// The analyzer lower-cases terms in place: give it a copy.
	f.buf = append(f.buf[:0], f.text[a:b]...)
	toks := f.h.analyzer.Analyze(f.buf)
	for _, t := range toks {
		term, ok := f.want[string(t.Term)]
		if !ok {
			continue
		}
		f.out = append(f.out, &highlight.TermLocation{Term: term, Pos: f.tokens + t.Position, Start: a + t.Start, End: a + t.End})
		f.found++
	}
	if n := len(toks); n > 0 {
		f.tokens += toks[n-1].Position
	}
}

// validAround reports whether the runes of text[from:to] that overlap
// [a, b) are valid UTF-8.
func validAround(text string, a, b, from, to int) bool {
	for i := 0; i < 3 && a > from && !utf8.RuneStart(text[a]); i++ {
		a--
	}
	for i := 0; i < 3 && b < to && !utf8.RuneStart(text[b]); i++ {
		b++
	}
	return utf8.ValidString(text[a:b])
}

// lowerASCII appends s with ASCII letters lower-cased to dst.
func lowerASCII(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// cutSearch is how far cuts look for white space.
const cutSearch = 256

// safe reports whether analysing text[..i) and text[i..) apart gives the
// tokens of analysing them together: white space before i and an ASCII
// character at i (a word boundary whatever surrounds it).
func safe(text string, i int) bool {
	if i <= 0 || i >= len(text) || text[i] >= utf8.RuneSelf {
		return i <= 0 || i >= len(text)
	}
	switch text[i-1] {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// safeCut returns the first safe cut at or after i (at most cutSearch
// bytes on, else the rune boundary at or after i), not past to.
func safeCut(text string, i, to int) int {
	if i >= to {
		return to
	}
	for j := i; j < i+cutSearch; j++ {
		if j >= to {
			return to
		}
		if safe(text, j) {
			return j
		}
	}
	for i < to && !utf8.RuneStart(text[i]) {
		i++
	}
	return i
}

// cutBefore returns the last safe cut at or before i (at most cutSearch
// bytes back, else the rune boundary 64 bytes back), not before floor.
func cutBefore(text string, i, floor int) int {
	for j := i; j > max(floor, i-cutSearch); j-- {
		if safe(text, j) {
			return j
		}
	}
	i = max(floor, i-64)
	for i > floor && !utf8.RuneStart(text[i]) {
		i--
	}
	return i
}

// selector runs Bleve's fragmenter and scorer over the term locations as
// they are found and keeps the best fragment.
type selector struct {
	text           string
	from, to, size int
	distinct       int // distinct query terms: the highest score
	batch          int

	locs     []*highlight.TermLocation // sorted by Start; locs[next:] not yet fragmented
	next     int
	checked  int // locs[next:checked] do not decode (see clean)
	maxbegin int // End of the last location fragmented (Bleve's maxbegin)

	best *highlight.Fragment
	snip Snippet
}

// complete reports whether the best fragment holds every query term: no
// later one can be better.
func (s *selector) complete() bool {
	return s.best != nil && int(s.best.Score) >= s.distinct
}

// process fragments the locations that can be: those whose fragment,
// score and snippet depend only on locations before front (all when final).
//
// Bleve's fragment for a location starts at most size runes (4·size bytes)
// before it, or back to the end of the previous location (maxbegin), ends
// at most size runes after its start, is centred by at most size/2 runes
// more, and its scorer counts the locations inside it. So a batch of
// locations fragmented over text[base:limit], base the previous location's
// end (or 8·size bytes before the first, when that is later: the
// previous location is then too far to matter) and limit 4·size bytes past
// the last, with the locations up to limit, gives Bleve's fragments for
// the whole text. The one difference is that Bleve skips a location whose
// neighbourhood does not decode (invalid UTF-8, U+FFFD) and keeps the
// maxbegin before it; a batch therefore ends on a location whose
// neighbourhood decodes, whose end is the next batch's maxbegin.
func (s *selector) process(ctx context.Context, front int, final bool) error {
	reach := 4*s.size + maxWord + 8 // a fragment's snippet ends before last.Start+reach
	ready := s.next
	for ready < len(s.locs) && (final || s.locs[ready].Start+reach <= front) {
		ready++
	}
	for s.next < ready && !s.complete() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("snippet: %w", err)
		}
		last := min(ready-1, max(s.next, s.checked, min(ready, s.next+s.batch)-1))
		for !s.clean(last) && last+1 < ready {
			last++
		}
		if !s.clean(last) && !(final && last == len(s.locs)-1) {
			s.checked = last // wait for a location that decodes
			break
		}
		s.fragment(s.next, last)
		s.maxbegin = s.locs[last].End
		s.next = last + 1
	}
	s.drop()
	return nil
}

// clean reports whether every rune Bleve's fragmenter may read for
// location i decodes (6·size bytes before it, 4·size after).
func (s *selector) clean(i int) bool {
	l := s.locs[i]
	a, b := max(0, l.Start-6*s.size-4), min(len(s.text), l.Start+4*s.size+4)
	for a < b && !utf8.RuneStart(s.text[a]) {
		a++
	}
	for b < len(s.text) && b > a && !utf8.RuneStart(s.text[b]) {
		b--
	}
	seg := s.text[a:b]
	return utf8.ValidString(seg) && !strings.ContainsRune(seg, utf8.RuneError)
}

// fragment runs Bleve's fragmenter on locations locs[i..j] (and those
// after, up to the window's end, which centre the fragments), and scores
// the fragments that belong to locs[i..j].
func (s *selector) fragment(i, j int) {
	first, last := s.locs[i], s.locs[j]
	base := max(s.maxbegin, first.Start-8*s.size)
	limit := min(len(s.text), last.Start+4*s.size)
	k := j + 1
	for k < len(s.locs) && s.locs[k].Start < limit {
		k++
	}
	ot := make(highlight.TermLocations, 0, k-i)
	for _, l := range s.locs[i:k] {
		c := *l
		c.Start, c.End = c.Start-base, c.End-base
		ot = append(ot, &c)
	}
	frags := simple.NewFragmenter(s.size).Fragment([]byte(s.text[base:limit]), ot)
	for _, f := range frags {
		f.Start, f.End = f.Start+base, f.End+base
		if f.Start >= last.End {
			break // a later location's, made without all it needs
		}
		// Keep the fragments inside [from, to), as before.
		f.Start, f.End = max(f.Start, s.from), min(f.End, s.to)
		if f.End <= f.Start {
			continue
		}
		f.Orig = nil
		s.score(f)
		if s.best == nil || f.Score > s.best.Score {
			s.best = f
			s.keep(f)
			if s.complete() {
				return
			}
		}
	}
}

// inside returns the locations that start in [a, b).
func (s *selector) inside(a, b int) []*highlight.TermLocation {
	lo := sort.Search(len(s.locs), func(i int) bool { return s.locs[i].Start >= a })
	hi := lo
	for hi < len(s.locs) && s.locs[hi].Start < b {
		hi++
	}
	return s.locs[lo:hi]
}

// score scores f with Bleve's scorer over the locations inside it.
func (s *selector) score(f *highlight.Fragment) {
	tlm := search.TermLocationMap{}
	for _, l := range s.inside(f.Start, f.End) {
		tlm.AddLocation(l.Term, &search.Location{Pos: uint64(l.Pos), Start: uint64(l.Start), End: uint64(l.End)})
	}
	simplehl.NewFragmentScorer(tlm).Score(f)
}

// keep makes the snippet of the best fragment f: cut at words, with the
// query terms inside.
func (s *selector) keep(f *highlight.Fragment) {
	sn := Snippet{Span: Span{wordStart(s.text, f.Start, s.from), wordEnd(s.text, f.End, s.to)}}
	for _, l := range s.inside(sn.Start, sn.End) {
		if l.End > sn.End {
			continue
		}
		// Locations overlap where a term is inside another (CJK's
		// characters inside their bigrams): one highlight covers them.
		sn.Highlights = addHighlight(sn.Highlights, Span{l.Start, l.End})
	}
	s.snip = sn
}

// drop forgets the fragmented locations no later fragment or snippet can
// reach (those ending more than maxWord bytes before maxbegin).
func (s *selector) drop() {
	n := 0
	for n < s.next && s.locs[n].End < s.maxbegin-maxWord-8 {
		n++
	}
	if n > len(s.locs)/2 {
		s.locs = append(s.locs[:0], s.locs[n:]...)
		s.next -= n
		s.checked = max(0, s.checked-n)
	}
}

// wordStart moves i back to the start of the word it falls in (not before
// floor, nor more than maxWord bytes).
func wordStart(text string, i, floor int) int {
	floor = max(floor, i-maxWord)
	for i > floor {
		r, n := utf8.DecodeLastRuneInString(text[:i])
		if !isWord(r) || i-n < floor {
			break
		}
		i -= n
	}
	return i
}

// wordEnd moves i forward to the end of the word it falls in (not past
// ceil, nor more than maxWord bytes).
func wordEnd(text string, i, ceil int) int {
	ceil = min(ceil, i+maxWord)
	for i < ceil {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !isWord(r) || i+n > ceil {
			break
		}
		i += n
	}
	return i
}

// isWord reports a character a fragment extends through to end on a word
// boundary: letters, digits, apostrophes and hyphens, but not the letters
// of scripts written without spaces, where every character is a boundary.
func isWord(r rune) bool {
	if r >= 0x0e00 && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar) {
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '-'
}
