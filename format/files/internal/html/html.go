// Package html reads web pages (HTML, XHTML): the main content — found by
// go-readability (Mozilla's Readability in Go), or, where it finds no
// article, the body less what is never content (navigation, headers,
// footers, sidebars, scripts, styles, forms, cookie and consent banners)
// — as text in parts by heading, each part's Section the headings it is
// under. Title: the page's <title> (as Readability cleans it of the site's
// name), else its first <h1>; author, date and language from its metadata
// and <html lang>. The charset is the page's declared one (or sniffed).
//
// Text walks the same way for EPUB's chapters (package office).
package html

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"codeberg.org/readeck/go-readability/v2"
	xhtml "golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/safe"
)

// Reader reads web pages.
var Reader = doc.ReaderFunc(Read)

// maxNodes bounds the elements Readability scores; a larger page is read
// without it (the body less boilerplate).
const maxNodes = 200000

// Read reads one web page.
func Read(ctx context.Context, in doc.Input) (doc.Doc, error) {
	ctx = safe.Ctx(ctx)
	data := in.Data
	if doc.IsBinary(data) {
		return doc.Doc{}, fmt.Errorf("%w: a NUL byte in its first bytes", doc.ErrBinary)
	}
	enc, _, _ := charset.DetermineEncoding(data[:min(len(data), 4096)], "text/html")
	r, err := enc.NewDecoder().Bytes(data)
	if err == nil {
		data = r
	}
	root, err := xhtml.Parse(bytes.NewReader(data))
	if err != nil {
		return doc.Doc{}, fmt.Errorf("%w: %v", doc.ErrCorrupt, err)
	}
	var d doc.Doc
	head := metadata(root)
	d.Title, d.Author, d.Date, d.Lang = head.title, head.author, head.date, head.lang
	content := root
	if n := countElements(root, maxNodes+1); n <= maxNodes {
		p := readability.NewParser()
		p.Logger = slog.New(slog.DiscardHandler)
		p.CharThresholds = 200
		art, err := p.ParseDocument(root, nil)
		if err == nil && art.Node != nil {
			if t := doc.Title(art.Title()); t != "" {
				d.Title = t
			}
			if d.Author == "" {
				d.Author = doc.Title(art.Byline())
			}
			if d.Lang == "" {
				d.Lang = art.Language()
			}
			if d.Date == "" {
				if t, err := art.PublishedTime(); err == nil {
					d.Date = t.Format(time.RFC3339)
				}
			}
			// Readability may keep a fragment of a page that is not an
			// article (a documentation index): the body less boilerplate
			// is then the better reading.
			if len(strings.TrimSpace(textOf(art.Node))) >= len(strings.TrimSpace(textOf(stripped(root))))/3 {
				content = art.Node
			}
		}
	}
	if content == root {
		content = stripped(root)
	}
	lines, heads := Text(content)
	if h1 := firstH1(root); h1 != "" && (d.Title == "" || strings.HasPrefix(d.Title, h1)) {
		d.Title = h1 // "Storm Glass | Almanac" is "Storm Glass"
	}
	if d.Title == "" && len(heads) > 0 {
		d.Title = heads[0].Title
	}
	d.Parts = Parts(lines, heads)
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: the page has no text", doc.ErrNoText)
	}
	text := 0
	for i := range d.Parts {
		text += len(d.Parts[i].Text)
		if text > in.Limits.Or().MaxText {
			d.Parts, d.Truncated = d.Parts[:i], true
			break
		}
	}
	return d, nil
}

// firstH1 is the text of the page's first <h1>.
func firstH1(n *xhtml.Node) string {
	if n.Type == xhtml.ElementNode && n.DataAtom == atom.H1 {
		return doc.Title(textOf(n))
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := firstH1(c); t != "" {
			return t
		}
	}
	return ""
}

// Parts cuts a text walked by Text into parts by heading; the lines are
// not the file's, so the parts carry sections, not line ranges.
func Parts(lines []string, heads []doc.Heading) []doc.Part {
	parts := doc.Sections(lines, 1, heads, doc.TargetPart)
	for i := range parts {
		parts[i].StartLine, parts[i].EndLine = 0, 0
	}
	return parts
}

type pageMeta struct{ title, author, date, lang string }

// metadata reads <title>, <html lang> and the author and date <meta> tags.
func metadata(root *xhtml.Node) pageMeta {
	var m pageMeta
	var walk func(n *xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode {
			switch n.DataAtom {
			case atom.Html:
				m.lang = attr(n, "lang")
				if m.lang == "" {
					m.lang = attr(n, "xml:lang")
				}
			case atom.Title:
				if m.title == "" {
					m.title = doc.Title(textOf(n))
				}
			case atom.Meta:
				name := strings.ToLower(attr(n, "name") + attr(n, "property"))
				v := attr(n, "content")
				switch name {
				case "author", "article:author", "dc.creator":
					m.author = doc.Title(v)
				case "date", "article:published_time", "dc.date", "dcterms.created":
					m.date = doc.Title(v)
				}
			case atom.Body:
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return m
}

func attr(n *xhtml.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) || a.Namespace != "" && strings.EqualFold(a.Namespace+":"+a.Key, key) {
			return a.Val
		}
	}
	return ""
}

func countElements(n *xhtml.Node, limit int) int {
	count := 0
	var walk func(n *xhtml.Node) bool
	walk = func(n *xhtml.Node) bool {
		if n.Type == xhtml.ElementNode {
			count++
			if count > limit {
				return false
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	walk(n)
	return count
}

// boilerplate names classes and ids of what is not content.
var boilerplate = regexp.MustCompile(`(?i)(^|[-_ ])(cookie|consent|gdpr|banner|navbar|nav|menu|sidebar|breadcrumbs?|footer|header|masthead|newsletter|subscribe|share|social|popup|modal|skip-link|toc)([-_ ]|$)`)

// never are the elements that never hold a page's content.
var never = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true,
	atom.Nav: true, atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Form: true,
	atom.Button: true, atom.Iframe: true, atom.Dialog: true, atom.Select: true, atom.Head: true,
	atom.Object: true, atom.Embed: true, atom.Canvas: true, atom.Menu: true,
}

// stripped is a copy of the page without what never is content.
func stripped(root *xhtml.Node) *xhtml.Node {
	var clone func(n *xhtml.Node) *xhtml.Node
	clone = func(n *xhtml.Node) *xhtml.Node {
		c := &xhtml.Node{Type: n.Type, DataAtom: n.DataAtom, Data: n.Data, Namespace: n.Namespace, Attr: n.Attr}
		for k := n.FirstChild; k != nil; k = k.NextSibling {
			if k.Type == xhtml.ElementNode && dropped(k) {
				continue
			}
			c.AppendChild(clone(k))
		}
		return c
	}
	return clone(root)
}

func dropped(n *xhtml.Node) bool {
	if never[n.DataAtom] {
		return true
	}
	switch strings.ToLower(attr(n, "role")) {
	case "navigation", "banner", "contentinfo", "complementary", "dialog", "alertdialog", "search", "menu", "menubar":
		return true
	}
	if attr(n, "aria-hidden") == "true" || hasAttr(n, "hidden") {
		return true
	}
	return boilerplate.MatchString(attr(n, "id")) || boilerplate.MatchString(attr(n, "class"))
}

func hasAttr(n *xhtml.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// textOf is n's text, without structure.
func textOf(n *xhtml.Node) string {
	var b strings.Builder
	var walk func(n *xhtml.Node)
	walk = func(n *xhtml.Node) {
		switch {
		case n.Type == xhtml.TextNode:
			b.WriteString(n.Data)
		case n.Type == xhtml.ElementNode && (n.DataAtom == atom.Script || n.DataAtom == atom.Style):
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// blocks are the elements that begin a line of text.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true, atom.Li: true,
	atom.Ul: true, atom.Ol: true, atom.Dl: true, atom.Dt: true, atom.Dd: true, atom.Blockquote: true,
	atom.Pre: true, atom.Table: true, atom.Tr: true, atom.Br: true, atom.Hr: true, atom.Figure: true,
	atom.Figcaption: true, atom.Address: true, atom.Details: true, atom.Summary: true, atom.Caption: true,
	atom.Body: true, atom.Html: true, atom.Center: true,
}

var headings = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// Text walks n into lines of text and the headings among them: block
// elements begin lines, headings are lines of their own (level from
// <h1>..<h6>), list items begin "- ", table cells are separated by " | ",
// <pre> keeps its lines, other white space collapses.
func Text(n *xhtml.Node) ([]string, []doc.Heading) {
	w := textWalker{}
	w.walk(n, false)
	w.endLine()
	return w.lines, w.heads
}

type textWalker struct {
	lines []string
	heads []doc.Heading
	cur   strings.Builder
}

func (w *textWalker) endLine() {
	if t := strings.TrimSpace(w.cur.String()); t != "" {
		w.lines = append(w.lines, t)
	}
	w.cur.Reset()
}

func (w *textWalker) blank() {
	w.endLine()
	if len(w.lines) > 0 && w.lines[len(w.lines)-1] != "" {
		w.lines = append(w.lines, "")
	}
}

func (w *textWalker) walk(n *xhtml.Node, pre bool) {
	switch n.Type {
	case xhtml.TextNode:
		if pre {
			ls := strings.Split(n.Data, "\n")
			for i, l := range ls {
				if i > 0 {
					w.lines = append(w.lines, strings.TrimRight(w.cur.String(), " \t"))
					w.cur.Reset()
				}
				w.cur.WriteString(l)
			}
			return
		}
		t := strings.Join(strings.Fields(doc.Normalize(n.Data)), " ")
		if t == "" {
			if n.Data != "" && w.cur.Len() > 0 {
				w.cur.WriteByte(' ')
			}
			return
		}
		if unicodeSpaceStart(n.Data) && w.cur.Len() > 0 {
			w.cur.WriteByte(' ')
		}
		w.cur.WriteString(t)
		if unicodeSpaceEnd(n.Data) {
			w.cur.WriteByte(' ')
		}
		return
	case xhtml.ElementNode:
		if n.DataAtom == atom.Script || n.DataAtom == atom.Style || n.DataAtom == atom.Noscript || n.DataAtom == atom.Template || n.DataAtom == atom.Head {
			return
		}
	case xhtml.CommentNode, xhtml.DoctypeNode:
		return
	}
	if lv, ok := headings[n.DataAtom]; ok {
		w.blank()
		title := strings.Join(strings.Fields(textOf(n)), " ")
		if title != "" {
			w.heads = append(w.heads, doc.Heading{Line: len(w.lines) + 1, Level: lv, Title: doc.Title(title)})
			w.lines = append(w.lines, title)
			w.lines = append(w.lines, "")
		}
		return
	}
	block := blocks[n.DataAtom]
	switch {
	case n.DataAtom == atom.P || n.DataAtom == atom.Pre || n.DataAtom == atom.Blockquote || n.DataAtom == atom.Table:
		w.blank()
	case block:
		w.endLine()
	}
	switch n.DataAtom {
	case atom.Li:
		w.cur.WriteString("- ")
	case atom.Td, atom.Th:
		if w.cur.Len() > 0 {
			w.cur.WriteString(" | ")
		}
	case atom.Img:
		if alt := strings.TrimSpace(attr(n, "alt")); alt != "" {
			w.cur.WriteString(" " + alt + " ")
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, pre || n.DataAtom == atom.Pre)
	}
	switch {
	case n.DataAtom == atom.P || n.DataAtom == atom.Pre || n.DataAtom == atom.Blockquote || n.DataAtom == atom.Table:
		w.blank()
	case block:
		w.endLine()
	}
}

func unicodeSpaceStart(s string) bool {
	return s != "" && strings.ContainsRune(" \t\n\r\f", rune(s[0]))
}
func unicodeSpaceEnd(s string) bool {
	return s != "" && strings.ContainsRune(" \t\n\r\f", rune(s[len(s)-1]))
}

// Parse parses an XHTML or HTML document (an EPUB chapter) and returns its
// body's text and headings, and its <title>.
func Parse(r io.Reader) (lines []string, heads []doc.Heading, title string, err error) {
	root, err := xhtml.Parse(r)
	if err != nil {
		return nil, nil, "", err
	}
	m := metadata(root)
	lines, heads = Text(stripped(root))
	return lines, heads, m.title, nil
}
