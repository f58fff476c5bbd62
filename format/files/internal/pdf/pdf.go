// Package pdf reads a PDF's text layer page by page with PDFium, compiled
// to WebAssembly and run by wazero (github.com/klippa-app/go-pdfium's
// webassembly mode): pure Go, no cgo. Chosen over a Go PDF parser after
// measuring both (docs/results/pdf-readers.md): PDFium orders text as it
// reads on the page and handles the fonts real producers write.
//
// Each page with text is a part (its 1-based page number in Part.Page);
// lines broken by a hyphen are joined, ligatures read as letters. The
// title, author and creation date come from the document information
// dictionary. A PDF whose pages hold no text (scanned) is ErrNoTextLayer;
// one that needs a password is ErrEncrypted; one PDFium cannot open is
// ErrCorrupt.
//
// The WebAssembly module is compiled once per process, on the first PDF
// (several seconds), and the compiled code is cached under
// $ANNA_HOME/cache/wazero so later processes start in a fraction of a
// second. One PDFium instance serves the process, a PDF at a time; its
// memory is bounded (maxMemory).
package pdf

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/klippa-app/go-pdfium"
	pdferrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/structs"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/safe"
)

// maxMemory bounds PDFium's WebAssembly memory (64 KiB pages): 1 GiB.
const maxMemory = 16384

// engine is the process's PDFium instance, started on first use.
var engine struct {
	once sync.Once
	mu   sync.Mutex // one document at a time
	inst pdfium.Pdfium
	err  error
}

func instance() (pdfium.Pdfium, error) {
	engine.once.Do(func() {
		cfg := wazero.NewRuntimeConfig().
			WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
			WithMemoryLimitPages(maxMemory)
		if cache, err := wazero.NewCompilationCacheWithDir(home.WasmCacheDir()); err == nil {
			cfg = cfg.WithCompilationCache(cache)
		}
		pool, err := webassembly.Init(webassembly.Config{MinIdle: 1, MaxIdle: 1, MaxTotal: 1, RuntimeConfig: cfg, ReuseWorkers: true})
		if err != nil {
			engine.err = fmt.Errorf("starting PDFium: %w", err)
			return
		}
		engine.inst, engine.err = pool.GetInstance(time.Minute)
		if engine.err != nil {
			engine.err = fmt.Errorf("starting PDFium: %w", engine.err)
		}
	})
	return engine.inst, engine.err
}

// Reader reads PDFs.
var Reader = doc.ReaderFunc(Read)

// Read reads one PDF.
func Read(ctx context.Context, in doc.Input) (doc.Doc, error) {
	ctx = safe.Ctx(ctx)
	if !strings.Contains(string(in.Data[:min(len(in.Data), 1024)]), "%PDF") {
		return doc.Doc{}, fmt.Errorf("%w: no %%PDF header", doc.ErrCorrupt)
	}
	inst, err := instance()
	if err != nil {
		return doc.Doc{}, err
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	data := in.Data
	opened, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	switch {
	case errors.Is(err, pdferrors.ErrPassword), errors.Is(err, pdferrors.ErrSecurity):
		return doc.Doc{}, fmt.Errorf("%w: it needs a password", doc.ErrEncrypted)
	case err != nil:
		return doc.Doc{}, fmt.Errorf("%w: PDFium: %v", doc.ErrCorrupt, err)
	}
	h := opened.Document
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: h})
	var d doc.Doc
	meta := func(tag string) string {
		r, err := inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: h, Tag: tag})
		if err != nil {
			return ""
		}
		return r.Value
	}
	d.Title, d.Author, d.Date = doc.Title(meta("Title")), doc.Title(meta("Author")), pdfDate(meta("CreationDate"))
	pc, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: h})
	if err != nil {
		return doc.Doc{}, fmt.Errorf("%w: PDFium: %v", doc.ErrCorrupt, err)
	}
	lim := in.Limits.Or()
	total, failed := 0, 0
	var firstErr error
	for i := 0; i < pc.PageCount; i++ {
		if err := ctx.Err(); err != nil {
			return doc.Doc{}, err
		}
		text, err := pageText(inst, h, i)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = fmt.Errorf("page %d: %v", i+1, err)
			}
			continue
		}
		text = Clean(text)
		if strings.TrimSpace(text) == "" {
			continue
		}
		if total+len(text) > lim.MaxText {
			text, _ = doc.Truncate(text, lim.MaxText-total)
			d.Truncated = true
		}
		total += len(text)
		if text != "" {
			d.Parts = append(d.Parts, doc.Part{Text: text, Page: i + 1})
		}
		if d.Truncated {
			break
		}
	}
	switch {
	case len(d.Parts) > 0:
		return d, nil
	case failed > 0:
		return doc.Doc{}, fmt.Errorf("%w: %d of %d pages could not be read (%v)", doc.ErrCorrupt, failed, pc.PageCount, firstErr)
	case pc.PageCount == 0:
		return doc.Doc{}, fmt.Errorf("%w: no pages", doc.ErrNoText)
	}
	return doc.Doc{}, fmt.Errorf("%w: none of its %d pages holds text (scanned? anna does no OCR)", doc.ErrNoTextLayer, pc.PageCount)
}

// pageText is page i's text as PDFium reads it.
func pageText(inst pdfium.Pdfium, h references.FPDF_DOCUMENT, i int) (string, error) {
	tp, err := inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: requests.Page{ByIndex: &requests.PageByIndex{Document: h, Index: i}}})
	if err != nil {
		return "", err
	}
	defer inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage})
	n, err := inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil {
		return "", err
	}
	if n.Count <= 0 {
		return "", nil
	}
	t, err := inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, StartIndex: 0, Count: n.Count})
	if err != nil {
		return "", err
	}
	return spaced(t.Text, n.Count, func(i int) (structs.FPDF_FS_RECTF, bool) {
		b, err := inst.FPDFText_GetLooseCharBox(&requests.FPDFText_GetLooseCharBox{TextPage: tp.TextPage, Index: i})
		if err != nil {
			return structs.FPDF_FS_RECTF{}, false
		}
		return b.Rect, true
	}), nil
}

// wordGap is the gap between two characters' advance boxes on one line,
// as a share of the line's height, from which they are taken to be two
// words: a PDF may place each word by position, with no space character
// between (groff and Ghostscript do), and PDFium then runs the words
// together ("twelvepounds a year,and"). Letters of a word sit within a
// few hundredths of the height of each other (kerning); a space is about
// a quarter of the font's size, a fifth of the line's height.
const wordGap = 0.1

// spaced is text, page text of count characters as PDFium gives it, with a
// space put between two characters of a line that box (each character's
// advance box, PDFium's loose box) finds a word's gap apart. text is left
// as it is where its UTF-16 units are not count (then they cannot be
// matched to PDFium's character indices).
func spaced(text string, count int, box func(i int) (structs.FPDF_FS_RECTF, bool)) string {
	units := utf16.Encode([]rune(text))
	if len(units) != count || count < 2 {
		return text
	}
	blank := func(u uint16) bool { return u <= ' ' || u == 0xA0 || u == 0x2002 || u == 0x2003 || u == 0x2009 }
	out := make([]uint16, 0, count+count/8)
	prev, prevOK := box(0)
	for i := 0; i < count; i++ {
		out = append(out, units[i])
		if i+1 == count {
			break
		}
		next, nextOK := box(i + 1)
		if prevOK && nextOK && !blank(units[i]) && !blank(units[i+1]) {
			h := prev.Top - prev.Bottom
			if h < 0 {
				h = -h
			}
			sameLine := h > 0 && abs32(next.Bottom-prev.Bottom) < h/3
			if gap := next.Left - prev.Right; sameLine && gap > wordGap*h && gap < 4*h {
				out = append(out, ' ')
			}
		}
		prev, prevOK = next, nextOK
	}
	return string(utf16.Decode(out))
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

var (
	// hyphenated is a word broken at a line's end by a hyphen, going on
	// in lower case on the next line (PDFium marks such a hyphen U+0002).
	hyphenated = regexp.MustCompile(`(\pL)[-\x{2010}\x{00AD}\x{0002}][ \t]*\n[ \t]*(\p{Ll})`)
	spaces     = regexp.MustCompile(`[ \t]+\n`)
	blanks     = regexp.MustCompile(`\n{3,}`)
)

// Clean normalises a page's text: line ends "\n", ligatures as letters,
// hyphenated line ends joined, trailing spaces and runs of blank lines
// dropped, control characters gone.
func Clean(s string) string {
	s = doc.Normalize(s)
	s = hyphenated.ReplaceAllString(s, "$1$2")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0xFFFE || r == 0xFFFF {
			return -1
		}
		return r
	}, s)
	s = spaces.ReplaceAllString(s, "\n")
	s = blanks.ReplaceAllString(s, "\n\n")
	return strings.TrimSpace(s)
}

// pdfDate reads a PDF date ("D:20240131120000+01'00'") as RFC 3339, or
// returns it as given when it does not parse.
func pdfDate(s string) string {
	v := strings.TrimPrefix(strings.TrimSpace(s), "D:")
	if len(v) < 8 {
		return doc.Title(s)
	}
	v = strings.ReplaceAll(v, "'", "")
	if i := strings.IndexByte(v, 'Z'); i >= 0 {
		v = v[:i+1] // "Z00'00'": UTC
	}
	for _, layout := range []string{"20060102150405-0700", "20060102150405Z0700", "20060102150405Z", "20060102150405", "200601021504", "20060102"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.Format(time.RFC3339)
		}
	}
	return doc.Title(s)
}
