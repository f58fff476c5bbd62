// Package text reads plain text, Markdown and reStructuredText: the text
// as it is (in UTF-8: other encodings are converted, see doc.DecodeText),
// in parts by section (Markdown and reStructuredText headings) or by blocks
// of lines, each with its line range.
//
// Titles: a Markdown file's front-matter title or first heading, a
// reStructuredText file's first section title, a plain text file's first
// line (when short). Front matter is not part of the text; line numbers
// stay the file's.
package text

import (
	"context"
	"fmt"
	"strings"

	"github.com/anna-search/anna/format/files/internal/doc"
)

// Kind says which syntax a text file has.
type Kind int

const (
	Plain Kind = iota
	Markdown
	RST
)

// Reader reads text of one kind.
func Reader(k Kind) doc.Reader {
	return doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) { return Read(in, k) })
}

// Read reads one text file of kind k.
func Read(in doc.Input, k Kind) (doc.Doc, error) {
	if doc.IsBinary(in.Data) {
		return doc.Doc{}, fmt.Errorf("%w: a NUL byte in its first bytes", doc.ErrBinary)
	}
	s, enc := doc.DecodeText(in.Data)
	d := doc.Doc{Encoding: enc}
	s, d.Truncated = doc.Truncate(s, in.Limits.Or().MaxText)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := doc.Lines(s)
	first := 1
	var heads []doc.Heading
	switch k {
	case Markdown:
		var fm []string
		fm, lines = frontMatter(lines)
		if len(fm) > 0 {
			first += len(fm)
			d.Title, d.Author, d.Date = fmField(fm, "title"), fmField(fm, "author"), fmField(fm, "date")
			d.Lang = fmField(fm, "lang")
		}
		heads = markdownHeadings(lines)
	case RST:
		heads = rstHeadings(lines)
	}
	if d.Title == "" && len(heads) > 0 && heads[0].Line <= 50 {
		d.Title = heads[0].Title
	}
	if d.Title == "" && k == Plain {
		d.Title = firstLine(lines)
	}
	d.Title = doc.Title(d.Title)
	for i := range heads {
		heads[i].Title = doc.Title(heads[i].Title)
	}
	d.Parts = doc.Sections(lines, first, heads, doc.TargetPart)
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: white space only", doc.ErrNoText)
	}
	return d, nil
}

// frontMatter splits YAML front matter ("---" lines around it) off lines.
func frontMatter(lines []string) (fm, rest []string) {
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return nil, lines
	}
	for i := 1; i < len(lines) && i < 200; i++ {
		if t := strings.TrimSpace(lines[i]); t == "---" || t == "..." {
			return lines[:i+1], lines[i+1:]
		}
	}
	return nil, lines
}

// fmField is a top-level "key: value" of front matter, unquoted.
func fmField(fm []string, key string) string {
	for _, l := range fm {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// markdownHeadings finds ATX ("## Title") and setext (a line underlined
// with = or -) headings outside fenced code blocks.
func markdownHeadings(lines []string) []doc.Heading {
	var hs []doc.Heading
	fence := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		if len(l)-len(strings.TrimLeft(l, " ")) > 3 {
			continue // indented code
		}
		if h := strings.TrimLeft(t, "#"); len(h) < len(t) && len(t)-len(h) <= 6 && (h == "" || h[0] == ' ' || h[0] == '\t') {
			if title := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(h), "#")); title != "" {
				hs = append(hs, doc.Heading{Line: i + 1, Level: len(t) - len(h), Title: title})
			}
			continue
		}
		if i > 0 && t != "" && (strings.Trim(t, "=") == "" || strings.Trim(t, "-") == "" && len(t) >= 2) {
			prev := strings.TrimSpace(lines[i-1])
			if prev != "" && !strings.HasPrefix(prev, "#") && !strings.HasPrefix(prev, "-") && !strings.HasPrefix(prev, "*") && (len(hs) == 0 || hs[len(hs)-1].Line != i) {
				level := 1
				if t[0] == '-' {
					level = 2
				}
				hs = append(hs, doc.Heading{Line: i, Level: level, Title: prev})
			}
		}
	}
	return hs
}

// rstHeadings finds reStructuredText section titles: a line underlined
// (and maybe overlined) with one punctuation character repeated at least
// as long as it; levels in the order the styles first appear.
func rstHeadings(lines []string) []doc.Heading {
	var hs []doc.Heading
	levels := map[string]int{}
	for i := 1; i < len(lines); i++ {
		u := strings.TrimRight(lines[i], " \t")
		title := strings.TrimSpace(lines[i-1])
		if len(u) < 2 || title == "" || len(u) < len([]rune(title)) || !adornment(u) || adornment(title) {
			continue
		}
		style := u[:1]
		if i >= 2 && strings.TrimRight(lines[i-2], " \t") == u {
			style += "/over"
		}
		lv, ok := levels[style]
		if !ok {
			lv = len(levels) + 1
			levels[style] = lv
		}
		line := i // the title's line, 1-based
		if strings.HasSuffix(style, "/over") {
			line = i - 1
		}
		hs = append(hs, doc.Heading{Line: line, Level: lv, Title: title})
	}
	return hs
}

// adornment reports whether s is one punctuation character repeated.
func adornment(s string) bool {
	if s == "" || !strings.ContainsRune("=-~^\"'`#*+:._<>", rune(s[0])) {
		return false
	}
	return strings.Trim(s, s[:1]) == ""
}

// firstLine is a plain text's first non-blank line when it reads as a
// title (at most 150 bytes).
func firstLine(lines []string) string {
	for _, l := range lines[:min(len(lines), 20)] {
		if t := strings.TrimSpace(l); t != "" {
			if len(t) > 150 {
				return ""
			}
			return t
		}
	}
	return ""
}
