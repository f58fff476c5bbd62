// Package office reads the zip + XML formats: Word (DOCX), PowerPoint
// (PPTX), Excel (XLSX), OpenDocument (ODT, ODP, ODS) and EPUB. Text comes
// with its headings (Word's heading styles and outline levels,
// OpenDocument's text:h, an EPUB chapter's <h1>..<h6>); slides and sheets
// are sections of their own; the title, author, date and language come
// from the core properties (docProps/core.xml, meta.xml, the EPUB
// package's metadata).
//
// The archive is read in memory and inflates at most Limits.MaxUnpacked
// bytes in all (a zip bomb is ErrTooLarge); a part that is not well-formed
// XML is ErrCorrupt. encoding/xml expands no entity a document defines, so
// no XML bomb either.
package office

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/archive"
)

// open opens a container and checks it is one.
func open(in doc.Input) (*archive.Zip, error) {
	z, err := archive.OpenZip(in.Data, in.Limits.Or().MaxUnpacked)
	if err != nil {
		if errors.Is(err, archive.ErrTooLarge) {
			return nil, fmt.Errorf("%w: %v", doc.ErrTooLarge, err)
		}
		if bytes.HasPrefix(in.Data, []byte{0xD0, 0xCF, 0x11, 0xE0}) {
			return nil, fmt.Errorf("%w: an encrypted or pre-2007 (OLE) Office file, not a zip", doc.ErrEncrypted)
		}
		return nil, fmt.Errorf("%w: not a zip archive: %v", doc.ErrCorrupt, err)
	}
	return z, nil
}

// openWith opens a container and reads its properties part (Dublin
// Core: docProps/core.xml, meta.xml) into a Doc, when it has one.
func openWith(in doc.Input, properties string) (*archive.Zip, doc.Doc, error) {
	var d doc.Doc
	z, err := open(in)
	if err != nil {
		return nil, d, err
	}
	if b, _ := member(z, properties, true); b != nil {
		props(properties, b, &d)
	}
	return z, d, nil
}

// member reads a member; a missing one is nil without error when optional.
func member(z *archive.Zip, name string, optional bool) ([]byte, error) {
	b, err := z.Read(name)
	switch {
	case err == nil:
		return b, nil
	case archive.IsNotExist(err) && optional:
		return nil, nil
	case errors.Is(err, archive.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", doc.ErrTooLarge, err)
	}
	return nil, fmt.Errorf("%w: %v", doc.ErrCorrupt, err)
}

// tokens walks an XML part, calling start and end for elements and text
// for character data (with the stack of local names of enclosing
// elements); a malformed part is ErrCorrupt.
type handler struct {
	start func(e xml.StartElement, stack []string)
	end   func(name string, stack []string)
	text  func(s string, stack []string)
}

func walk(name string, b []byte, h handler) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = false
	d.Entity = xml.HTMLEntity
	d.CharsetReader = func(label string, r io.Reader) (io.Reader, error) { return r, nil }
	var stack []string
	for {
		t, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", doc.ErrCorrupt, name, err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			if len(stack) > 512 {
				return fmt.Errorf("%w: %s: elements nested more than 512 deep", doc.ErrCorrupt, name)
			}
			if h.start != nil {
				h.start(t, stack)
			}
		case xml.EndElement:
			if len(stack) > 0 {
				if h.end != nil {
					h.end(t.Name.Local, stack)
				}
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if h.text != nil {
				h.text(string(t), stack)
			}
		}
	}
}

func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func inside(stack []string, local string) bool {
	for _, s := range stack {
		if s == local {
			return true
		}
	}
	return false
}

// props reads Dublin Core properties (core.xml, meta.xml, an EPUB's OPF):
// the first title, creator, date and language.
func props(name string, b []byte, d *doc.Doc) {
	var cur string
	var buf strings.Builder
	walk(name, b, handler{
		start: func(e xml.StartElement, _ []string) {
			switch e.Name.Local {
			case "title", "creator", "initial-creator", "created", "creation-date", "date", "language":
				cur = e.Name.Local
				buf.Reset()
			}
		},
		text: func(s string, _ []string) {
			if cur != "" {
				buf.WriteString(s)
			}
		},
		end: func(local string, _ []string) {
			if local != cur || cur == "" {
				return
			}
			v := doc.Title(buf.String())
			switch cur {
			case "title":
				d.Title = first(d.Title, v)
			case "creator", "initial-creator":
				d.Author = first(d.Author, v)
			case "created", "creation-date", "date":
				d.Date = first(d.Date, isoDate(v))
			case "language":
				d.Lang = first(d.Lang, v)
			}
			cur = ""
		},
	})
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// isoDate normalises a date the properties give to RFC 3339 where it
// parses.
func isoDate(s string) string {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			if layout == "2006-01-02" {
				return t.Format("2006-01-02")
			}
			return t.Format(time.RFC3339)
		}
	}
	return s
}

// rels reads a relationships part: id -> target, resolved against the
// folder of the part they belong to.
func rels(z *archive.Zip, owner string) (map[string]string, error) {
	name := path.Join(path.Dir(owner), "_rels", path.Base(owner)+".rels")
	b, err := member(z, name, true)
	if err != nil || b == nil {
		return nil, err
	}
	out := map[string]string{}
	err = walk(name, b, handler{start: func(e xml.StartElement, _ []string) {
		if e.Name.Local == "Relationship" {
			t := attr(e, "Target")
			if !strings.HasPrefix(t, "/") {
				t = path.Join(path.Dir(owner), t)
			}
			out[attr(e, "Id")] = strings.TrimPrefix(t, "/")
		}
	}})
	return out, err
}

// textBuilder gathers lines and headings.
type textBuilder struct {
	lines []string
	heads []doc.Heading
	cur   strings.Builder
	size  int
	limit int
	cut   bool
}

func (t *textBuilder) write(s string) {
	if t.cut {
		return
	}
	t.cur.WriteString(s)
}

// line ends the current line; a heading of level > 0 is recorded.
func (t *textBuilder) line(level int) {
	s := strings.TrimSpace(t.cur.String())
	t.cur.Reset()
	if s == "" || t.cut {
		return
	}
	if t.limit > 0 && t.size+len(s) > t.limit {
		t.cut = true
		return
	}
	t.size += len(s) + 1
	if level > 0 {
		if len(t.lines) > 0 && t.lines[len(t.lines)-1] != "" {
			t.lines = append(t.lines, "")
		}
		t.heads = append(t.heads, doc.Heading{Line: len(t.lines) + 1, Level: level, Title: doc.Title(s)})
	}
	t.lines = append(t.lines, s)
}

// heading adds a heading line of its own.
func (t *textBuilder) heading(level int, title string) {
	t.line(0)
	t.write(title)
	t.line(level)
}

func (t *textBuilder) parts() []doc.Part {
	parts := doc.Sections(t.lines, 1, t.heads, doc.TargetPart)
	for i := range parts {
		parts[i].StartLine, parts[i].EndLine = 0, 0
	}
	return parts
}

func finish(d doc.Doc, t *textBuilder) (doc.Doc, error) {
	t.line(0)
	d.Parts = t.parts()
	d.Truncated = t.cut
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: the document holds no text", doc.ErrNoText)
	}
	return d, nil
}
