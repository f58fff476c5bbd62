package main

// What `annactl search` prints: the table, --json lines, snippets,
// --explain.

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/anna-search/anna/engine"
)

// jsonResult is one line of `search --json`.
type jsonResult struct {
	Rank  int      `json:"rank"`
	ID    string   `json:"id"`
	Score float64  `json:"score"`
	Title string   `json:"title,omitempty"`
	Text  string   `json:"text"`
	Meta  metadata `json:"metadata,omitempty"`
	// Location is where in its file the hit lies (a folder's documents):
	// path, page, start_line, end_line, section, and label as the table
	// prints it ("notes/plan.pdf:page 3").
	Location *jsonLocation `json:"location,omitempty"`
	Explain  []jsonContrib `json:"explain,omitempty"`
	Snippet  *jsonSnippet  `json:"snippet,omitempty"`
}

type jsonLocation struct {
	engine.Location
	Label string `json:"label"`
}

func locationJSON(l *engine.Location) *jsonLocation {
	if l == nil {
		return nil
	}
	return &jsonLocation{Location: *l, Label: l.String()}
}

// jsonSnippet is a hit's snippet; offsets are bytes of the hit's text.
type jsonSnippet struct {
	Text       string   `json:"text"`
	Start      int      `json:"start"`
	End        int      `json:"end"`
	Highlights [][2]int `json:"highlights"`
	Source     string   `json:"source"`
}

type jsonContrib struct {
	List  string  `json:"list"`
	Rank  int     `json:"rank"`
	Score float64 `json:"score"`
	Fused float64 `json:"fused,omitempty"` // what the list added to the fused score (absent: nothing, or no fusion)
}

func (a *app) printResultsJSON(res []engine.Result, explain bool) error {
	enc := json.NewEncoder(a.stdout)
	for i, r := range res {
		jr := jsonResult{Rank: i + 1, ID: r.ID, Score: r.Score, Title: r.Title, Text: r.Text, Meta: metadataOf(r), Location: locationJSON(r.Location)}
		if explain {
			for _, c := range r.Explain {
				jr.Explain = append(jr.Explain, jsonContrib{List: c.List, Rank: c.Rank, Score: c.Score, Fused: c.Fused})
			}
		}
		if s := r.Snippet; s != nil {
			jr.Snippet = &jsonSnippet{Text: s.Text, Start: s.Start, End: s.End, Highlights: [][2]int{}, Source: s.Source}
			for _, h := range s.Highlights {
				jr.Snippet.Highlights = append(jr.Snippet.Highlights, [2]int{h.Start, h.End})
			}
		}
		if err := enc.Encode(jr); err != nil {
			return err
		}
	}
	return nil
}

// tableSnippet is the snippet length the table asks for, in bytes.
const tableSnippet = 120

func (a *app) printResults(res []engine.Result, explain, color bool) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tSCORE\tID\tTITLE / TEXT")
	for i, r := range res {
		var line string
		if r.Snippet != nil {
			line = snippetLine(r, color)
		} else {
			line = oneLine(r.Title, r.Text, 90)
		}
		id := r.ID
		if r.Location != nil {
			id = r.Location.String() // a file's hit says where it lies: path:page N, path:LINE-LINE
		}
		fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\n", i+1, r.Score, id, line)
		if explain {
			for _, c := range r.Explain {
				fmt.Fprintf(tw, "\t\t\t  %s: rank %d, score %.4f", c.List, c.Rank, c.Score)
				if c.Fused != 0 {
					fmt.Fprintf(tw, ", adds %.4g", c.Fused)
				}
				fmt.Fprintln(tw)
			}
		}
	}
	return tw.Flush()
}

// oneLine joins title and text on one line, cut to n runes. It reads only
// the words it shows (a document may be megabytes long).
func oneLine(title, text string, n int) string {
	fields := func(yield func(string) bool) {
		if title != "" {
			for f := range strings.FieldsSeq(title) {
				if !yield(f) {
					return
				}
			}
			if !yield("—") {
				return
			}
		}
		for f := range strings.FieldsSeq(text) {
			if !yield(f) {
				return
			}
		}
	}
	var b strings.Builder
	runes := 0
	for f := range fields {
		if runes > 0 {
			b.WriteByte(' ')
			runes++
		}
		for _, r := range f {
			if runes > n {
				break
			}
			b.WriteRune(r)
			runes++
		}
		if runes > n {
			break
		}
	}
	s := b.String()
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// snippetLine is a hit's title and snippet on one line, "…" where the
// text goes on, the query's terms in bold when color is set.
func snippetLine(r engine.Result, color bool) string {
	s := r.Snippet
	var b strings.Builder
	if r.Title != "" {
		b.WriteString(r.Title + " — ")
	}
	if s.Start > 0 {
		b.WriteString("…")
	}
	at := s.Start
	for _, h := range s.Highlights {
		if h.Start < at || h.End > s.End || h.Start > h.End {
			continue // not within the snippet after the last: the engine gives none such
		}
		b.WriteString(r.Text[at:h.Start])
		if color {
			b.WriteString("\x1b[1m" + r.Text[h.Start:h.End] + "\x1b[0m")
		} else {
			b.WriteString(r.Text[h.Start:h.End])
		}
		at = h.End
	}
	b.WriteString(r.Text[at:s.End])
	if s.End < len(r.Text) {
		b.WriteString("…")
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// metadata is a hit's metadata in `search --json`: strings, numbers and
// lists, under "metadata" as annactl index reads it.
type metadata map[string]engine.Value

func metadataOf(r engine.Result) metadata {
	if len(r.Meta)+len(r.MetaValues) == 0 {
		return nil
	}
	m := make(metadata, len(r.Meta)+len(r.MetaValues))
	for k, v := range r.Meta {
		m[k] = engine.StringValue(v)
	}
	maps.Copy(m, r.MetaValues)
	return m
}

// quoteAll quotes each of ss, joined by ", ".
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
