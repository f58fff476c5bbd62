// Package files reads a folder of a person's own files — PDFs, web pages,
// Office documents, e-books, notebooks, mail, notes and source code — as
// documents in parts, each part saying where in its file it lies (page,
// line range, section). It is the one place that knows formats: Formats is
// the registry table, and the folder walker (List) asks it and nothing
// else which files are read and how.
//
// A file is read whole (up to the format's size limit) by its format's
// reader into a Doc: the format's own title, author, date and declared
// language, and Parts — a PDF's pages, a text's sections by heading (or
// blocks of lines), a presentation's slides, a workbook's sheets, a
// program's functions, a mailbox's messages. See docs/formats.md.
//
// Invariants:
//   - Readers are pure Go, or tree-sitter through cgo for source code
//     where cgo is on; no reader writes anything, follows links out of the
//     file, or runs code from it.
//   - Every file costs time and memory bounded by its size and Limits: a
//     file over its format's MaxBytes is not opened (ErrTooLarge), a
//     container inflates at most Limits.MaxUnpacked, text past
//     Limits.MaxText is dropped (Doc.Truncated), a reader's panic is an
//     error naming the file.
//   - A file not read has a reason (File.Skip, or the error of Read
//     wrapping one of the sentinel errors); a file without text is never a
//     Doc without parts.
//   - List never follows a symbolic link to a folder (a link loop cannot
//     hang it); a link to a file is read as that file.
package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/anna-search/anna/format/files/internal/code"
	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/format/files/internal/html"
	"github.com/anna-search/anna/format/files/internal/mail"
	"github.com/anna-search/anna/format/files/internal/notebook"
	"github.com/anna-search/anna/format/files/internal/office"
	"github.com/anna-search/anna/format/files/internal/pdf"
	"github.com/anna-search/anna/format/files/internal/text"
	"github.com/anna-search/anna/internal/safe"
)

// Doc is a file read: its own title, author, date and language (where the
// format has them) and its text in Parts.
type Doc = doc.Doc

// Part is one passage of a file and where it lies in it.
type Part = doc.Part

// Limits bound what a reader does with one file (zero fields: DefaultLimits).
type Limits = doc.Limits

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = doc.DefaultLimits

// The reasons a file is not read; Read's errors wrap one of them.
var (
	ErrNoText      = doc.ErrNoText
	ErrNoTextLayer = doc.ErrNoTextLayer // a PDF of images (scanned)
	ErrEncrypted   = doc.ErrEncrypted
	ErrCorrupt     = doc.ErrCorrupt
	ErrTooLarge    = doc.ErrTooLarge
	ErrBinary      = doc.ErrBinary
	ErrEmpty       = errors.New("empty")
	ErrUnsupported = errors.New("unsupported")
)

// Format is one entry of the registry: a format, the file names it takes,
// and its reader.
type Format struct {
	Name string // "pdf", "html", "docx", "markdown", "code"...
	// Extensions are the file extensions it reads (lower case, with the
	// dot); Names are whole file names without one (Makefile).
	Extensions []string
	Names      []string
	// MaxBytes is the largest file of the format read.
	MaxBytes int64
	reader   doc.Reader
}

const (
	textMax      = 64 << 20  // text, Markdown, code
	containerMax = 256 << 20 // PDF, Office, EPUB, mail
)

// ReadersVersion is the registry's version: raised whenever a reader
// comes to read files it refused before (a better PDF reader, a format's
// limit raised), so that what remembers failed files (package ingest)
// tries them again.
const ReadersVersion = 1

// formats is the registry: every format anna reads, in the order Formats
// lists them. Nothing outside this table maps a file to a reader.
var formats = []Format{
	{Name: "pdf", Extensions: []string{".pdf"}, MaxBytes: containerMax, reader: pdf.Reader},
	{Name: "html", Extensions: []string{".html", ".htm", ".xhtml", ".xht"}, MaxBytes: textMax, reader: html.Reader},
	{Name: "docx", Extensions: []string{".docx", ".docm", ".dotx"}, MaxBytes: containerMax, reader: office.DOCX},
	{Name: "pptx", Extensions: []string{".pptx", ".pptm", ".ppsx"}, MaxBytes: containerMax, reader: office.PPTX},
	{Name: "xlsx", Extensions: []string{".xlsx", ".xlsm"}, MaxBytes: containerMax, reader: office.XLSX},
	{Name: "odt", Extensions: []string{".odt", ".odp", ".ods"}, MaxBytes: containerMax, reader: office.ODF},
	{Name: "epub", Extensions: []string{".epub"}, MaxBytes: containerMax, reader: office.EPUB},
	{Name: "notebook", Extensions: []string{".ipynb"}, MaxBytes: textMax, reader: notebook.Reader},
	{Name: "email", Extensions: []string{".eml"}, MaxBytes: containerMax, reader: mail.EML},
	{Name: "mbox", Extensions: []string{".mbox"}, MaxBytes: containerMax, reader: mail.MBOX},
	{Name: "markdown", Extensions: []string{".md", ".markdown", ".mdown", ".mkd", ".mdx"}, MaxBytes: textMax, reader: text.Reader(text.Markdown)},
	{Name: "rst", Extensions: []string{".rst", ".rest"}, MaxBytes: textMax, reader: text.Reader(text.RST)},
	{Name: "text", Extensions: []string{".txt", ".text"}, MaxBytes: textMax, reader: text.Reader(text.Plain)},
	{Name: "code", Extensions: codeExtensions(), Names: codeNames(), MaxBytes: textMax, reader: code.Reader},
}

// plainText is the format of a file without an extension whose bytes are
// text (README, LICENSE, NOTES).
var plainText = formats[slices.IndexFunc(formats, func(f Format) bool { return f.Name == "text" })]

func codeExtensions() []string {
	var exts []string
	for e := range code.Languages {
		exts = append(exts, e)
	}
	slices.Sort(exts)
	return exts
}

func codeNames() []string {
	var names []string
	for n := range code.Names {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Formats lists the registry.
func Formats() []Format { return slices.Clone(formats) }

// CodeParser says how this build cuts source code: tree-sitter (cgo) or
// blank-line blocks.
func CodeParser() string { return code.Parser }

// Lookup is the format of a file by its name (a path or a base name): by
// its whole name, then its extension. ok is false for a name no format
// takes (a file without an extension may still be text: see List).
func Lookup(name string) (Format, bool) {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	for _, f := range formats {
		if slices.Contains(f.Names, base) {
			return f, true
		}
	}
	ext := strings.ToLower(path.Ext(base))
	if ext == "" {
		return Format{}, false
	}
	for _, f := range formats {
		if slices.Contains(f.Extensions, ext) {
			return f, true
		}
	}
	return Format{}, false
}

// Read reads the file at filename with format f's reader (rel names it in
// errors). A file larger than f.MaxBytes is not read (ErrTooLarge), an
// empty one is ErrEmpty; a reader's panic is an error. The errors name
// rel and wrap the reason.
func (f Format) Read(ctx context.Context, filename, rel string, lim Limits) (d Doc, err error) {
	ctx = safe.Ctx(ctx)
	if f.reader == nil {
		return Doc{}, fmt.Errorf("%s: %w", rel, ErrUnsupported)
	}
	fh, err := os.Open(filename)
	if err != nil {
		return Doc{}, fmt.Errorf("%s: %w", rel, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return Doc{}, fmt.Errorf("%s: %w", rel, err)
	}
	if !st.Mode().IsRegular() {
		return Doc{}, fmt.Errorf("%s: %w: not a regular file", rel, ErrUnsupported)
	}
	if st.Size() > f.MaxBytes {
		return Doc{}, fmt.Errorf("%s: %w: %d bytes, more than the %d read for %s files", rel, ErrTooLarge, st.Size(), f.MaxBytes, f.Name)
	}
	data, err := io.ReadAll(io.LimitReader(fh, f.MaxBytes+1))
	if err != nil {
		return Doc{}, fmt.Errorf("%s: %w", rel, err)
	}
	if int64(len(data)) > f.MaxBytes {
		return Doc{}, fmt.Errorf("%s: %w: it grew past the %d bytes read", rel, ErrTooLarge, f.MaxBytes)
	}
	d, err = f.ReadBytes(ctx, data, rel, lim)
	if err == nil {
		sum := sha256.Sum256(data)
		d.SHA256 = hex.EncodeToString(sum[:])
	}
	return d, err
}

// ReadBytes reads a file's content (rel names it) with f's reader.
func (f Format) ReadBytes(ctx context.Context, data []byte, rel string, lim Limits) (d Doc, err error) {
	ctx = safe.Ctx(ctx)
	if f.reader == nil {
		return Doc{}, fmt.Errorf("%s: %w", rel, ErrUnsupported)
	}
	if len(strings.TrimSpace(string(data[:min(len(data), 4096)]))) == 0 && len(strings.TrimSpace(string(data))) == 0 {
		return Doc{}, fmt.Errorf("%s: %w", rel, ErrEmpty)
	}
	err = safe.Call(func() error {
		var rerr error
		d, rerr = f.reader.Read(ctx, doc.Input{Name: rel, Data: data, Limits: lim.Or()})
		return rerr
	})
	if err != nil {
		if ctx.Err() != nil {
			return Doc{}, ctx.Err()
		}
		if doc.Reason(err) == "" {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return Doc{}, fmt.Errorf("%s: %w", rel, err)
	}
	d.Parts = validParts(d.Parts)
	if len(d.Parts) == 0 {
		return Doc{}, fmt.Errorf("%s: %w", rel, ErrNoText)
	}
	return d, nil
}

// validParts keeps the promise every reader makes, whatever one misses:
// part texts and labels are valid UTF-8 (other bytes read as U+FFFD) and no
// part is blank.
func validParts(ps []Part) []Part {
	out := ps[:0]
	for _, p := range ps {
		for _, s := range []*string{&p.Text, &p.Title, &p.Section, &p.Symbol, &p.Author, &p.Date} {
			*s = strings.ToValidUTF8(*s, "\uFFFD")
		}
		if strings.TrimSpace(p.Text) != "" {
			out = append(out, p)
		}
	}
	return out
}

// Reason is the short reason an error of Read or a File's Err gives
// ("no text layer", "corrupt", "too large", "empty"...), "unreadable" for
// an error of the file system, or "" for nil.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrEmpty):
		return "empty"
	case errors.Is(err, ErrUnsupported):
		return "unsupported"
	}
	if r := doc.Reason(err); r != "" {
		return r
	}
	return "unreadable"
}
