package snippet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"

	"github.com/anna-search/anna/internal/shareddata"
)

// reference is the snippet code before it was bounded: Bleve's fragmenter
// and scorer over every location of the whole text (quadratic in the
// locations). The bounded code must choose what it chooses.
func (h *Highlighter) reference(text string, from, to int, query string, size int) (Snippet, bool) {
	if size <= 0 {
		size = DefaultSize
	}
	want := h.terms(query)
	var locs highlight.TermLocations
	tlm := search.TermLocationMap{}
	for _, t := range h.analyzer.Analyze([]byte(text[from:to])) {
		term := string(t.Term)
		if _, ok := want[term]; !ok {
			continue
		}
		start, end := from+t.Start, from+t.End
		locs = append(locs, &highlight.TermLocation{Term: term, Pos: t.Position, Start: start, End: end})
		tlm.AddLocation(term, &search.Location{Pos: uint64(t.Position), Start: uint64(start), End: uint64(end)})
	}
	if len(locs) == 0 {
		return Snippet{}, false
	}
	sort.Sort(locs)
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
			s.Highlights = addHighlight(s.Highlights, Span{l.Start, l.End})
		}
	}
	return s, true
}

// vocabulary for random texts: query terms in several forms, stop words,
// punctuation, multi-byte letters, invalid UTF-8 and U+FFFD (where Bleve's
// fragmenter skips a location), İ and the Kelvin sign (lower-cased to i
// and k).
var vocabulary = strings.Fields(`vortex vortices Vortex's VORTEX vortexes shock shocks shocking Shocked
	happy happiness happily flow flows flowing sensibility sensible relational operator
	the and of a to in is über naïve 日本 Straße 3.14 1,000 x-ray well-known it's
	wing wings boundary layer layers graph graphs search searching
	Kelvin kelvins Kelvin KELVIN İnking inks`)

var separators = []string{" ", " ", " ", " ", "  ", "\n", "\t", ", ", ". ", "-", "'", "", "\xff", "\xe2\x82", "\uFFFD", " \uFFFD "}

// wide is filler of three-byte runes, so that fragments span three times
// more bytes than runes.
var wide = strings.Fields("日本語 東京 漢字 文字列 日本 京都 ・・・ 語")

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	filler := rng.IntN(3) == 0
	for b.Len() < n {
		if filler && rng.IntN(8) != 0 {
			b.WriteString(wide[rng.IntN(len(wide))])
		} else {
			b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
		}
		b.WriteString(separators[rng.IntN(len(separators))])
	}
	return b.String()
}

func randomQuery(rng *rand.Rand) string {
	var q []string
	for range 1 + rng.IntN(3) {
		q = append(q, vocabulary[rng.IntN(len(vocabulary))])
	}
	return strings.Join(q, " ")
}

// tiny forces every path on short texts: pieces of a few bytes, batches of
// one or two locations, and (whole 0) the candidate scan.
var tiny = []limits{
	{whole: 1 << 30, analysed: 1 << 30, scanned: 1 << 30, segment: 7, scan: 13, batch: 1},
	{whole: 0, analysed: 1 << 30, scanned: 1 << 30, segment: 7, scan: 13, batch: 2},
	{whole: 0, analysed: 1 << 30, scanned: 1 << 30, segment: 64, scan: 100, batch: 3},
	defaultLimits,
}

func compare(t *testing.T, h *Highlighter, text string, from, to int, query string, size int, lims ...limits) {
	t.Helper()
	want, wok := h.reference(text, from, to, query, size)
	if lims == nil {
		lims = tiny
	}
	for _, lim := range lims {
		hh := &Highlighter{analyzer: h.analyzer, lim: lim}
		got, ok, c, err := hh.within(context.Background(), text, from, to, query, size)
		if err != nil {
			t.Fatal(err)
		}
		if ok != wok || !reflect.DeepEqual(got, want) || c.truncated {
			t.Fatalf("limits %+v, text %q [%d:%d], query %q, size %d:\n got %v %+v (%+v)\nwant %v %+v", lim, text, from, to, query, size, ok, got, c, wok, want)
		}
	}
}

// TestSameChoice checks that the bounded search picks the fragment, span
// and highlights the whole-text search picked, on random texts (with
// invalid UTF-8 and U+FFFD) through every path.
func TestSameChoice(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		text := randomText(rng, 1+rng.IntN(6000))
		query := randomQuery(rng)
		size := []int{0, 1, 12, 40, 200}[i%5]
		compare(t, h, text, 0, len(text), query, size)
		from := rng.IntN(len(text))
		compare(t, h, text, from, from+rng.IntN(len(text)-from+1), query, size)
	}
}

// TestSameChoiceCorpus does the same on real documents (SciFact and
// Cranfield, with their own queries), one by one and 30 at a time.
func TestSameChoiceCorpus(t *testing.T) {
	h, _ := New()
	for _, name := range []string{"scifact", "cranfield"} {
		dir := shareddata.Path(t, "datasets", name)
		docs := readField(t, filepath.Join(dir, "corpus.jsonl"), 300)
		queries := readField(t, filepath.Join(dir, "queries.jsonl"), 300)
		for i, d := range docs {
			compare(t, h, d, 0, len(d), queries[i%len(queries)], 0)
		}
		for i := 0; i+30 <= len(docs); i += 30 {
			text := strings.Join(docs[i:i+30], "\n")
			compare(t, h, text, 0, len(text), queries[i%len(queries)], 150, tiny[2], tiny[3])
		}
	}
}

func readField(t *testing.T, path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var out []string
	for sc.Scan() && len(out) < n {
		var d struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(d.Title+" "+d.Text))
	}
	return out
}

// repetitive is n bytes of 15 distinct words, the text of issue #41
// (a log or a table reads the same).
func repetitive(n int) string {
	words := strings.Fields("vortex shock wave flow pressure boundary layer mach number heat transfer wing body jet plate")
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(words[(i*7+i/15)%15])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// TestBoundedWork: on a 4 MB text of 15 words, each query term found
// some 39,000 times, a snippet analyses a bounded number of bytes and
// returns quickly (the whole-text search took 11 s), whether its terms
// meet early (it stops at the first fragment holding all of them) or one
// is missing (it reads to the limit).
func TestBoundedWork(t *testing.T) {
	h, _ := New()
	text := repetitive(4 << 20)
	for _, q := range []string{"vortex shock", "vortex zebra", "zebra", "shock"} {
		start := time.Now()
		s, ok, c, err := h.within(context.Background(), text, 0, len(text), q, 0)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%q: %v", q, took)
		}
		if c.analysed > MaxAnalysed+cutSearch+64<<10 || c.scanned > MaxScanned+1<<20 {
			t.Errorf("%q: %+v: more than the limits", q, c)
		}
		if ok != (q != "zebra") || (ok && len(s.Highlights) == 0) {
			t.Errorf("%q: %v %+v", q, ok, s)
		}
		t.Logf("%q: %+v", q, c)
	}
	// A rare term far into a long text is still found: the candidate scan
	// reads the whole text, the analyzer only the words where a term can
	// start.
	rare := text[:3<<20] + " the zebra crossed " + text[3<<20:]
	s, ok, c, err := h.within(context.Background(), rare, 0, len(rare), "zebra", 0)
	if err != nil || !ok || rare[s.Highlights[0].Start:s.Highlights[0].End] != "zebra" || c.analysed > 1<<10 {
		t.Errorf("rare term: %v %v %+v %+v", err, ok, s, c)
	}
}

// TestCancel: a cancelled context stops a snippet with its error.
func TestCancel(t *testing.T) {
	h, _ := New()
	text := repetitive(4 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := h.LexicalContext(ctx, text, "vortex zebra", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("LexicalContext: %v", err)
	}
	if _, err := h.PassageContext(ctx, text, 0, len(text), "vortex zebra", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("PassageContext: %v", err)
	}
	// Cancelled midway: the work stops within a few pieces.
	hh := &Highlighter{analyzer: h.analyzer, lim: limits{whole: 1 << 30, analysed: 1 << 30, scanned: 1 << 30, segment: 64 << 10, scan: 1 << 20, batch: 64}}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, c, err := hh.within(ctx, text, 0, len(text), "vortex zebra", 0)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second || c.analysed >= len(text) {
		t.Errorf("cancelled midway: %v after %v, %+v", err, time.Since(start), c)
	}
}

// TestZeroHighlighter: a Highlighter not made by New finds nothing and
// says why; it does not panic.
func TestZeroHighlighter(t *testing.T) {
	var h Highlighter
	if _, ok := h.Lexical("vortex", "vortex", 0); ok {
		t.Error("zero Highlighter: a snippet")
	}
	if _, _, err := h.LexicalContext(context.Background(), "vortex", "vortex", 0); err == nil {
		t.Error("zero Highlighter: no error")
	}
	if s := h.Passage("vortex and more", 0, 6, "vortex", 0); s.End != 6 {
		t.Errorf("zero Highlighter: passage %+v", s)
	}
}
