// Package doc is what the readers of package files share: the Reader
// interface, the Doc and Part a reader returns, the limits it works within,
// the reasons a file is not read (sentinel errors), and helpers several
// formats use (text decoding, splitting into parts by headings or blocks of
// lines).
//
// Invariants every reader keeps:
//   - Read never panics and never writes; it returns within time and memory
//     proportional to its input, bounded by Limits (a container unpacks at
//     most MaxUnpacked bytes; text past MaxText is dropped and Doc.Truncated
//     set).
//   - A file that holds no text is an error wrapping ErrNoText (or
//     ErrNoTextLayer), never a Doc without parts; every Part has text.
//   - Part texts are valid UTF-8.
package doc

import (
	"context"
	"errors"

	"github.com/anna-search/anna/internal/safe"
)

// Input is one file to read: its bytes, read whole by the caller (who
// bounds the size), and the name errors give it.
type Input struct {
	Name   string // the file's path relative to the folder, for messages
	Data   []byte
	Limits Limits
}

// Limits bound what a reader does with one file.
type Limits struct {
	// MaxText is the most text kept from a file, in bytes; what comes past
	// it is dropped and Doc.Truncated set.
	MaxText int
	// MaxUnpacked is the most a container (zip: DOCX, EPUB...) may inflate,
	// all members together; past it the file is refused with ErrTooLarge.
	MaxUnpacked int64
}

// DefaultLimits are the limits when a field is 0.
var DefaultLimits = Limits{MaxText: 32 << 20, MaxUnpacked: 128 << 20}

// Or fills l's zero fields from DefaultLimits.
func (l Limits) Or() Limits {
	if l.MaxText <= 0 {
		l.MaxText = DefaultLimits.MaxText
	}
	if l.MaxUnpacked <= 0 {
		l.MaxUnpacked = DefaultLimits.MaxUnpacked
	}
	return l
}

// Reader reads one format.
type Reader interface {
	Read(ctx context.Context, in Input) (Doc, error)
}

// ReaderFunc is a Reader.
type ReaderFunc func(ctx context.Context, in Input) (Doc, error)

// Read calls f.
func (f ReaderFunc) Read(ctx context.Context, in Input) (Doc, error) {
	ctx = safe.Ctx(ctx)
	return f(ctx, in)
}

// Doc is a file read: the format's own title, author, date and language
// (empty where the format has none) and its text in parts.
type Doc struct {
	Title  string
	Author string
	Date   string // as the format gives it, RFC 3339 where it could be parsed
	// Lang is the natural language the format declares (HTML's lang, the
	// core properties' dc:language), as given; empty when it declares
	// none. A detector may fill it later: it is where the language goes.
	Lang      string
	Parts     []Part
	Truncated bool // text past Limits.MaxText was dropped
	// Encoding names the conversion a text file's bytes needed to become
	// UTF-8 ("UTF-16LE with a byte order mark", "Windows-1252 / Latin-1
	// (not UTF-8)"); empty for UTF-8 and for formats that say their own.
	Encoding string
	// SHA256 is the file's content hash (hex), set by files.Format.Read.
	SHA256 string
}

// Part is one passage of a file with where it lies: a PDF page, a section
// under a heading, a slide, a sheet, a function, a message.
type Part struct {
	Text string
	// Title is the part's own title where it has one apart from the file's
	// (a message's subject in a mailbox); empty otherwise.
	Title   string
	Section string // the heading, slide, sheet, cells or message it is in
	Page    int    // 1-based page (PDF), 0 when the format has none
	// StartLine and EndLine are the 1-based lines of the file the part
	// spans (text and code), 0 when the format has none.
	StartLine, EndLine int
	Symbol             string // the function, method or class (code)
	Code               string // the programming language (code), e.g. "go"
	Author, Date       string // a part's own author and date (a message's)
}

// The reasons a file is not read. A reader wraps one with the detail:
// fmt.Errorf("%w: ...", doc.ErrCorrupt).
var (
	ErrNoText      = errors.New("no text")
	ErrNoTextLayer = errors.New("no text layer") // a PDF of images (scanned)
	ErrEncrypted   = errors.New("encrypted")
	ErrCorrupt     = errors.New("corrupt")
	ErrTooLarge    = errors.New("too large")
	ErrBinary      = errors.New("binary")
)

// Reasons lists the reasons above, most specific first: what a summary
// groups skipped files by.
var Reasons = []error{ErrNoTextLayer, ErrNoText, ErrEncrypted, ErrCorrupt, ErrTooLarge, ErrBinary}

// Reason is the short name of the reason err wraps ("corrupt"), or "" for
// none of Reasons.
func Reason(err error) string {
	for _, r := range Reasons {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	return ""
}
