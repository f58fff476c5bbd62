package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// The metadata keys of a document read from a folder (package ingest
// writes them, from package format/files) that a Result's Location is
// read from.
const (
	MetaPath    = "path"    // the file, relative to the folder, with slashes
	MetaPage    = "page"    // the 1-based page (PDF), a number
	MetaLines   = "lines"   // the file's lines the document spans, "12-40"
	MetaSection = "section" // the heading, slide, sheet, cells or message
)

// Location is where in its file a result lies: the file's path, and its
// page, line range or section where the format has one. A document with
// line numbers and a snippet is located at the snippet's lines.
type Location struct {
	Path      string `json:"path"`
	Page      int    `json:"page,omitempty"`
	StartLine int    `json:"start_line,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	Section   string `json:"section,omitempty"`
}

// String is the location as a person reads it: "notes/plan.pdf:page 3",
// "engine/write.go:68-120", "book.epub § Chapter 2 › Storms", or the path.
func (l Location) String() string {
	switch {
	case l.Page > 0:
		return fmt.Sprintf("%s:page %d", l.Path, l.Page)
	case l.StartLine > 0 && l.EndLine > l.StartLine:
		return fmt.Sprintf("%s:%d-%d", l.Path, l.StartLine, l.EndLine)
	case l.StartLine > 0:
		return fmt.Sprintf("%s:%d", l.Path, l.StartLine)
	case l.Section != "":
		return l.Path + " § " + l.Section
	}
	return l.Path
}

// locate sets each result's Location from its metadata.
func locate(rs []Result) {
	for i := range rs {
		rs[i].Location = locationOf(rs[i])
	}
}

func locationOf(r Result) *Location {
	p, ok := r.Meta[MetaPath]
	if !ok || p == "" {
		return nil
	}
	l := &Location{Path: p, Section: r.Meta[MetaSection]}
	if v, ok := r.MetaValues[MetaPage]; ok {
		if x, ok := v.Number(); ok && x >= 1 {
			l.Page = int(x)
		}
	} else if n, err := strconv.Atoi(r.Meta[MetaPage]); err == nil && n >= 1 {
		l.Page = n
	}
	if from, to, ok := parseLines(r.Meta[MetaLines]); ok {
		l.StartLine, l.EndLine = from, to
		// The snippet's own lines, where the text is the file's lines.
		if s := r.Snippet; s != nil && s.Start >= 0 && s.End <= len(r.Text) && s.Start <= s.End &&
			strings.Count(r.Text, "\n") == to-from {
			a := from + strings.Count(r.Text[:s.Start], "\n")
			b := a + strings.Count(strings.TrimRight(r.Text[s.Start:s.End], "\n"), "\n")
			l.StartLine, l.EndLine = a, b
		}
	}
	return l
}

// parseLines reads "12-40" (or "12").
func parseLines(s string) (from, to int, ok bool) {
	if s == "" {
		return 0, 0, false
	}
	a, b, found := strings.Cut(s, "-")
	from, err := strconv.Atoi(a)
	if err != nil || from < 1 {
		return 0, 0, false
	}
	to = from
	if found {
		if to, err = strconv.Atoi(b); err != nil || to < from {
			return 0, 0, false
		}
	}
	return from, to, true
}
