package office

import (
	"context"
	"encoding/xml"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/archive"
)

// DOCX reads Word documents: paragraphs and tables in body order,
// headings from the paragraph styles (Title, Heading 1-9, or a style's
// outline level), then footnotes and endnotes.
var DOCX = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	z, d, err := openWith(in, "docProps/core.xml")
	if err != nil {
		return doc.Doc{}, err
	}
	levels, err := styleLevels(z)
	if err != nil {
		return doc.Doc{}, err
	}
	body, err := member(z, "word/document.xml", false)
	if err != nil {
		return doc.Doc{}, err
	}
	t := &textBuilder{limit: in.Limits.Or().MaxText}
	if err := wordText(t, "word/document.xml", body, levels); err != nil {
		return doc.Doc{}, err
	}
	for _, notes := range []string{"word/footnotes.xml", "word/endnotes.xml"} {
		if b, _ := member(z, notes, true); b != nil {
			wordText(t, notes, b, levels)
		}
	}
	return finish(d, t)
})

var headingStyle = regexp.MustCompile(`(?i)^heading ?([1-9])$`)

// styleLevels maps paragraph style ids to heading levels (Title: 1,
// Heading N: N, or the style's outline level + 1).
func styleLevels(z *archive.Zip) (map[string]int, error) {
	levels := map[string]int{"Title": 1}
	for i := 1; i <= 9; i++ {
		levels["Heading"+strconv.Itoa(i)] = i
	}
	b, err := member(z, "word/styles.xml", true)
	if err != nil || b == nil {
		return levels, err
	}
	var id string
	walk("word/styles.xml", b, handler{start: func(e xml.StartElement, stack []string) {
		switch e.Name.Local {
		case "style":
			id = attr(e, "styleId")
		case "name":
			if m := headingStyle.FindStringSubmatch(attr(e, "val")); m != nil && id != "" {
				levels[id], _ = strconv.Atoi(m[1])
			} else if strings.EqualFold(attr(e, "val"), "title") && id != "" {
				levels[id] = 1
			}
		case "outlineLvl":
			if n, err := strconv.Atoi(attr(e, "val")); err == nil && id != "" && n < 9 {
				if _, ok := levels[id]; !ok {
					levels[id] = n + 1
				}
			}
		}
	}})
	return levels, nil
}

// wordText walks a WordprocessingML part: a paragraph per line, table
// cells separated by " | ", heading paragraphs recorded.
func wordText(t *textBuilder, name string, b []byte, levels map[string]int) error {
	level := 0
	return walk(name, b, handler{
		start: func(e xml.StartElement, stack []string) {
			switch e.Name.Local {
			case "p":
				level = 0
			case "pStyle":
				level = levels[attr(e, "val")]
			case "outlineLvl":
				if n, err := strconv.Atoi(attr(e, "val")); err == nil && n < 9 && level == 0 {
					level = n + 1
				}
			case "tab":
				if inside(stack, "r") {
					t.write("\t")
				}
			case "br", "cr":
				t.line(0)
			case "tc":
				if t.cur.Len() > 0 {
					t.write(" | ")
				}
			}
		},
		text: func(s string, stack []string) {
			if len(stack) > 0 && stack[len(stack)-1] == "t" {
				t.write(s)
			}
		},
		end: func(local string, stack []string) {
			switch local {
			case "p":
				if !inside(stack[:len(stack)-1], "tc") {
					t.line(level)
				} else {
					t.write(" ")
				}
				level = 0
			case "tr":
				t.line(0)
			}
		},
	})
}

// PPTX reads PowerPoint decks: a part per slide in the deck's order, its
// Section "Slide N: its title", with the slide's notes.
var PPTX = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	z, d, err := openWith(in, "docProps/core.xml")
	if err != nil {
		return doc.Doc{}, err
	}
	slides, err := slideOrder(z)
	if err != nil {
		return doc.Doc{}, err
	}
	total, limit := 0, in.Limits.Or().MaxText
	for i, s := range slides {
		if err := ctx.Err(); err != nil {
			return doc.Doc{}, err
		}
		b, err := member(z, s, false)
		if err != nil {
			return doc.Doc{}, err
		}
		title, body, err := slideText(s, b)
		if err != nil {
			return doc.Doc{}, err
		}
		if r, _ := rels(z, s); r != nil {
			for _, target := range r {
				if strings.Contains(target, "notesSlide") {
					if nb, _ := member(z, target, true); nb != nil {
						if _, notes, err := slideText(target, nb); err == nil && notes != "" {
							body += "\n\nNotes:\n" + notes
						}
					}
				}
			}
		}
		text := strings.TrimSpace(body)
		if text == "" && title == "" {
			continue
		}
		if total += len(text); total > limit {
			d.Truncated = true
			break
		}
		sec := fmt.Sprintf("Slide %d", i+1)
		if title != "" {
			sec += ": " + title
		}
		if text == "" {
			text = title
		}
		d.Parts = append(d.Parts, doc.Part{Text: text, Section: sec})
	}
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: no slide holds text", doc.ErrNoText)
	}
	if d.Title == "" {
		if _, after, ok := strings.Cut(d.Parts[0].Section, ": "); ok {
			d.Title = after
		}
	}
	return d, nil
})

// slideOrder lists the slide parts in the presentation's order.
func slideOrder(z *archive.Zip) ([]string, error) {
	const pres = "ppt/presentation.xml"
	b, err := member(z, pres, false)
	if err != nil {
		return nil, err
	}
	r, err := rels(z, pres)
	if err != nil {
		return nil, err
	}
	var out []string
	err = walk(pres, b, handler{start: func(e xml.StartElement, stack []string) {
		if e.Name.Local == "sldId" {
			if t, ok := r[attr(e, "id")]; ok {
				out = append(out, t)
			}
		}
	}})
	if len(out) == 0 { // no list: the slide parts by number
		for _, n := range z.Names() {
			if strings.HasPrefix(n, "ppt/slides/slide") && strings.HasSuffix(n, ".xml") {
				out = append(out, n)
			}
		}
		sort.Slice(out, func(i, j int) bool { return slideNum(out[i]) < slideNum(out[j]) })
	}
	return out, err
}

func slideNum(name string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path.Base(name), "slide"), ".xml"))
	return n
}

// slideText is a slide's title (its title placeholder's text) and its
// text, a paragraph per line.
func slideText(name string, b []byte) (title, body string, err error) {
	var lines []string
	var cur, tt strings.Builder
	isTitle, shapeTitle := false, false
	err = walk(name, b, handler{
		start: func(e xml.StartElement, stack []string) {
			switch e.Name.Local {
			case "sp":
				shapeTitle = false
			case "ph":
				if ty := attr(e, "type"); ty == "title" || ty == "ctrTitle" {
					shapeTitle = true
				}
			case "p":
				isTitle = shapeTitle
			case "br":
				cur.WriteString("\n")
			}
		},
		text: func(s string, stack []string) {
			if len(stack) > 0 && stack[len(stack)-1] == "t" {
				cur.WriteString(s)
				if isTitle {
					tt.WriteString(s)
				}
			}
		},
		end: func(local string, stack []string) {
			if local == "p" {
				if l := strings.TrimSpace(cur.String()); l != "" {
					lines = append(lines, l)
				}
				if isTitle {
					tt.WriteString(" ")
				}
				cur.Reset()
			}
		},
	})
	return doc.Title(tt.String()), strings.Join(lines, "\n"), err
}

// XLSX reads Excel workbooks: a part per sheet (rows as lines, cells
// separated by tabs), a large sheet cut into blocks of rows, its Section
// the sheet's name and rows.
var XLSX = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	z, d, err := openWith(in, "docProps/core.xml")
	if err != nil {
		return doc.Doc{}, err
	}
	shared, err := sharedStrings(z)
	if err != nil {
		return doc.Doc{}, err
	}
	const book = "xl/workbook.xml"
	b, err := member(z, book, false)
	if err != nil {
		return doc.Doc{}, err
	}
	r, err := rels(z, book)
	if err != nil {
		return doc.Doc{}, err
	}
	type sheet struct{ name, part string }
	var sheets []sheet
	walk(book, b, handler{start: func(e xml.StartElement, _ []string) {
		if e.Name.Local == "sheet" {
			if t, ok := r[attr(e, "id")]; ok {
				sheets = append(sheets, sheet{attr(e, "name"), t})
			}
		}
	}})
	total, limit := 0, in.Limits.Or().MaxText
	for _, s := range sheets {
		if err := ctx.Err(); err != nil {
			return doc.Doc{}, err
		}
		sb, err := member(z, s.part, true)
		if err != nil {
			return doc.Doc{}, err
		}
		if sb == nil {
			continue
		}
		rows, first, err := sheetRows(s.part, sb, shared)
		if err != nil {
			return doc.Doc{}, err
		}
		for _, p := range doc.Blocks(rows, first, doc.TargetPart) {
			if total += len(p.Text); total > limit {
				d.Truncated = true
				break
			}
			p.Section = fmt.Sprintf("%s (rows %d-%d)", s.name, p.StartLine, p.EndLine)
			p.StartLine, p.EndLine = 0, 0
			d.Parts = append(d.Parts, p)
		}
	}
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: no sheet holds a value", doc.ErrNoText)
	}
	return d, nil
})

// sharedStrings reads the workbook's shared string table.
func sharedStrings(z *archive.Zip) ([]string, error) {
	const name = "xl/sharedStrings.xml"
	b, err := member(z, name, true)
	if err != nil || b == nil {
		return nil, err
	}
	var out []string
	var cur strings.Builder
	err = walk(name, b, handler{
		start: func(e xml.StartElement, _ []string) {
			if e.Name.Local == "si" {
				cur.Reset()
			}
		},
		text: func(s string, stack []string) {
			if len(stack) > 0 && stack[len(stack)-1] == "t" && !inside(stack, "rPh") {
				cur.WriteString(s)
			}
		},
		end: func(local string, _ []string) {
			if local == "si" {
				out = append(out, cur.String())
			}
		},
	})
	return out, err
}

// sheetRows reads a worksheet's rows as lines (cells joined by tabs), the
// first row's number, and blank lines for empty rows between.
func sheetRows(name string, b []byte, shared []string) ([]string, int, error) {
	var rows []string
	first, last := 0, 0
	var cells []string
	var val strings.Builder
	typ := ""
	err := walk(name, b, handler{
		start: func(e xml.StartElement, _ []string) {
			switch e.Name.Local {
			case "row":
				cells = cells[:0]
				n, _ := strconv.Atoi(attr(e, "r"))
				if n == 0 {
					n = last + 1
				}
				if first == 0 {
					first = n
				}
				for last > 0 && last+1 < n && len(rows) < 1<<20 {
					rows = append(rows, "")
					last++
				}
				last = n
			case "c":
				typ = attr(e, "t")
				val.Reset()
			}
		},
		text: func(s string, stack []string) {
			if len(stack) > 0 && (stack[len(stack)-1] == "v" || stack[len(stack)-1] == "t") {
				val.WriteString(s)
			}
		},
		end: func(local string, _ []string) {
			switch local {
			case "c":
				v := val.String()
				if typ == "s" {
					if i, err := strconv.Atoi(v); err == nil && i >= 0 && i < len(shared) {
						v = shared[i]
					}
				}
				if v = strings.TrimSpace(v); v != "" {
					cells = append(cells, strings.ReplaceAll(v, "\n", " "))
				}
			case "row":
				rows = append(rows, strings.Join(cells, "\t"))
			}
		},
	})
	if first == 0 {
		first = 1
	}
	return rows, first, err
}
