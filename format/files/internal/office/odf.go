package office

import (
	"context"
	"encoding/xml"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/anna-search/anna/format/files/internal/doc"
	html "github.com/anna-search/anna/format/files/internal/html"
)

// ODF reads OpenDocument text, presentations and spreadsheets (ODT, ODP,
// ODS): content.xml's paragraphs, headings (text:h and its outline
// level), a presentation's pages and a spreadsheet's tables as sections;
// title, author, date and language from meta.xml.
var ODF = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	z, d, err := openWith(in, "meta.xml")
	if err != nil {
		return doc.Doc{}, err
	}
	b, err := member(z, "content.xml", false)
	if err != nil {
		return doc.Doc{}, err
	}
	t := &textBuilder{limit: in.Limits.Or().MaxText}
	level, pages := 0, 0
	err = walk("content.xml", b, handler{
		start: func(e xml.StartElement, stack []string) {
			switch e.Name.Local {
			case "h":
				t.line(0)
				level, _ = strconv.Atoi(attr(e, "outline-level"))
				if level <= 0 {
					level = 1
				}
			case "p":
				t.line(0)
			case "s":
				n, _ := strconv.Atoi(attr(e, "c"))
				t.write(strings.Repeat(" ", max(1, min(n, 80))))
			case "tab":
				t.write("\t")
			case "line-break":
				t.line(0)
			case "table-cell":
				if t.cur.Len() > 0 {
					t.write(" | ")
				}
			case "page": // a presentation's slide
				pages++
				name := attr(e, "name")
				title := fmt.Sprintf("Slide %d", pages)
				if name != "" && !strings.HasPrefix(strings.ToLower(name), "page") {
					title += ": " + name
				}
				t.heading(1, title)
			case "table":
				if inside(stack[:len(stack)-1], "spreadsheet") && !inside(stack[:len(stack)-1], "table") {
					t.heading(1, attr(e, "name"))
				}
			}
		},
		text: func(s string, stack []string) {
			if inside(stack, "p") || inside(stack, "h") {
				t.write(s)
			}
		},
		end: func(local string, stack []string) {
			switch local {
			case "h":
				t.line(level)
				level = 0
			case "p":
				if inside(stack[:len(stack)-1], "table-cell") {
					t.write(" ")
				} else {
					t.line(0)
				}
			case "table-row":
				t.line(0)
			}
		},
	})
	if err != nil {
		return doc.Doc{}, err
	}
	return finish(d, t)
})

// EPUB reads e-books: the chapters in the spine's order, each an XHTML
// document read as a web page's body, its headings the sections (a
// chapter without one is named by its <title> or "Chapter N"); title,
// author, date and language from the package's metadata.
var EPUB = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	z, err := open(in)
	if err != nil {
		return doc.Doc{}, err
	}
	cb, err := member(z, "META-INF/container.xml", false)
	if err != nil {
		return doc.Doc{}, err
	}
	opf := ""
	walk("META-INF/container.xml", cb, handler{start: func(e xml.StartElement, _ []string) {
		if e.Name.Local == "rootfile" && opf == "" {
			opf = attr(e, "full-path")
		}
	}})
	if opf == "" {
		return doc.Doc{}, fmt.Errorf("%w: META-INF/container.xml names no package document", doc.ErrCorrupt)
	}
	ob, err := member(z, opf, false)
	if err != nil {
		return doc.Doc{}, err
	}
	var d doc.Doc
	props(opf, ob, &d)
	manifest := map[string]string{}
	var spine []string
	err = walk(opf, ob, handler{start: func(e xml.StartElement, stack []string) {
		switch e.Name.Local {
		case "item":
			if mt := attr(e, "media-type"); strings.Contains(mt, "html") {
				manifest[attr(e, "id")] = path.Join(path.Dir(opf), attr(e, "href"))
			}
		case "itemref":
			if attr(e, "linear") != "no" {
				spine = append(spine, attr(e, "idref"))
			}
		}
	}})
	if err != nil {
		return doc.Doc{}, err
	}
	total, limit := 0, in.Limits.Or().MaxText
	for i, id := range spine {
		if err := ctx.Err(); err != nil {
			return doc.Doc{}, err
		}
		name, ok := manifest[id]
		if !ok {
			continue
		}
		b, err := member(z, unescapePath(name), true)
		if err != nil {
			return doc.Doc{}, err
		}
		if b == nil {
			continue
		}
		lines, heads, title, err := html.Parse(strings.NewReader(string(b)))
		if err != nil {
			return doc.Doc{}, fmt.Errorf("%w: %s: %v", doc.ErrCorrupt, name, err)
		}
		chapter := title
		if chapter == "" || chapter == d.Title {
			chapter = fmt.Sprintf("Chapter %d", i+1)
		}
		for _, p := range html.Parts(lines, heads) {
			if p.Section == "" {
				p.Section = chapter
			}
			if total += len(p.Text); total > limit {
				d.Truncated = true
				break
			}
			d.Parts = append(d.Parts, p)
		}
		if d.Truncated {
			break
		}
	}
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: no chapter holds text", doc.ErrNoText)
	}
	return d, nil
})

func unescapePath(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			if v, err := strconv.ParseUint(p[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
