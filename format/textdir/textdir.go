// Package textdir reads a folder of text documents: what `annactl index
// DIR` and ingest.Dir index when the input is a directory rather than JSON
// lines.
//
// A document is a regular file under the root whose extension is one of
// Options.Extensions (Markdown, plain text and reStructuredText by default;
// case-insensitive). Its ID is its path relative to the root with slashes
// ("notes/2024/plan.md"), so the same folder indexed again updates in place
// and a file that disappears is what `index --sync` removes. Its title is a
// Markdown file's front-matter title or first heading, else the file name
// without its extension; its text is the whole file, less the front matter
// and the heading taken as title.
// Metadata: "path" (the ID) and "ext" (the extension, without the dot).
//
// Invariants:
//   - Files are listed in lexical order of their relative paths; hidden
//     files and folders (a name starting with ".") are skipped, symbolic
//     links are not followed (a link loop cannot hang the walk).
//   - A file larger than Options.MaxBytes, or holding a NUL byte in its
//     first 8 KiB (binary), is skipped and reported to Options.OnSkip with
//     the reason, never read whole; invalid UTF-8 is replaced by U+FFFD and
//     counted in Doc.InvalidUTF8.
//   - Nothing is written; the walk stops within one file of ctx's end.
package textdir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/anna-search/anna/internal/safe"
)

// DefaultExtensions are the file extensions read when Options.Extensions
// is empty.
var DefaultExtensions = []string{".md", ".markdown", ".txt", ".text", ".rst"}

// DefaultMaxBytes is the largest file read when Options.MaxBytes is 0.
const DefaultMaxBytes = 64 << 20

// Options shape a read. The zero value reads DefaultExtensions up to
// DefaultMaxBytes.
type Options struct {
	Extensions []string // with the dot: ".md"
	MaxBytes   int64
	// OnSkip, when set, hears of each file of a listed extension that is
	// not read: too large, binary, or unreadable (its path relative to the
	// root, and why).
	OnSkip func(path, why string)
	// OnInvalidUTF8, when set, hears of each file read whose invalid UTF-8
	// was replaced by U+FFFD.
	OnInvalidUTF8 func(path string)
}

// Doc is one file read.
type Doc struct {
	ID, Title, Text string
	Ext             string // without the dot, lower case
	InvalidUTF8     bool   // the file held invalid UTF-8, replaced by U+FFFD
}

func (o Options) exts() []string {
	if len(o.Extensions) == 0 {
		return DefaultExtensions
	}
	return o.Extensions
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

// Files lists the documents under root: their relative, slash-separated
// paths, in lexical order.
func Files(ctx context.Context, root string, opt Options) ([]string, error) {
	ctx = safe.Ctx(ctx)
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("textdir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("textdir: %s is not a folder", root)
	}
	exts := opt.exts()
	var out []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			return fmt.Errorf("textdir: %w", err)
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !slices.Contains(exts, strings.ToLower(filepath.Ext(d.Name()))) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("textdir: %w", err)
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// ErrSkipped wraps the error of a file Read does not read: too large,
// binary or unreadable.
var ErrSkipped = errors.New("skipped")

// Read reads one listed file (rel as Files returns it). A file skipped by
// the invariants' rules, or unreadable, returns an error wrapping
// ErrSkipped.
func Read(root, rel string, opt Options) (Doc, error) {
	path := filepath.Join(root, filepath.FromSlash(rel))
	f, err := os.Open(path)
	if err != nil {
		return Doc{}, fmt.Errorf("textdir: %w: %w", ErrSkipped, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Doc{}, fmt.Errorf("textdir: %w: %w", ErrSkipped, err)
	}
	if fi.Size() > opt.maxBytes() {
		return Doc{}, fmt.Errorf("textdir: %s: %w: %d bytes, more than the %d read", path, ErrSkipped, fi.Size(), opt.maxBytes())
	}
	b, err := io.ReadAll(io.LimitReader(f, opt.maxBytes()+1))
	if err != nil {
		return Doc{}, fmt.Errorf("textdir: %s: %w: %w", path, ErrSkipped, err)
	}
	if int64(len(b)) > opt.maxBytes() {
		return Doc{}, fmt.Errorf("textdir: %s: %w: it grew past the %d bytes read", path, ErrSkipped, opt.maxBytes())
	}
	if bytes.IndexByte(b[:min(len(b), 8<<10)], 0) >= 0 {
		return Doc{}, fmt.Errorf("textdir: %s: %w: binary (a NUL byte)", path, ErrSkipped)
	}
	d := Doc{ID: rel, Ext: strings.TrimPrefix(strings.ToLower(filepath.Ext(rel)), ".")}
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
		d.InvalidUTF8 = true
	}
	text := strings.TrimPrefix(string(b), "\uFEFF")
	var title string
	if d.Ext == "md" || d.Ext == "markdown" {
		title, text = markdownTitle(text)
	}
	if title == "" {
		base := filepath.Base(filepath.FromSlash(rel))
		title = strings.TrimSuffix(base, filepath.Ext(base))
	}
	d.Title, d.Text = title, text
	return d, nil
}

// markdownTitle returns a Markdown text's title, from YAML front matter
// ("title: ...") or else its first ATX heading within the first 50 lines,
// and the text without the front matter.
func markdownTitle(text string) (title, body string) {
	body = text
	if rest, ok := strings.CutPrefix(text, "---\n"); ok {
		if end := strings.Index(rest, "\n---"); end >= 0 {
			front := rest[:end]
			body = strings.TrimLeft(rest[end+4:], "-\r\n")
			for _, l := range strings.Split(front, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "title:"); ok {
					title = strings.Trim(strings.TrimSpace(v), `"'`)
					break
				}
			}
		}
	}
	if title != "" {
		return title, body
	}
	lines := strings.SplitN(body, "\n", 51)
	for i, l := range lines[:min(len(lines), 50)] {
		l = strings.TrimSpace(l)
		if h := strings.TrimLeft(l, "#"); len(h) < len(l) && len(l)-len(h) <= 6 && strings.HasPrefix(h, " ") {
			// the heading is the title; the text keeps what surrounds it
			lines[i] = ""
			return strings.TrimSpace(strings.TrimRight(h, "# ")), strings.TrimSpace(strings.Join(lines, "\n"))
		}
	}
	return "", body
}

// Walk reads files (listed by Files under root) in order and calls fn with
// each one read (n: its position in files, from 1); a file skipped goes to
// Options.OnSkip instead. It stops at fn's first error, or ctx's end.
func Walk(ctx context.Context, root string, files []string, opt Options, fn func(n int, d Doc) error) error {
	ctx = safe.Ctx(ctx)
	for i, rel := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := Read(root, rel, opt)
		if errors.Is(err, ErrSkipped) {
			if opt.OnSkip != nil {
				opt.OnSkip(rel, strings.TrimPrefix(err.Error(), "textdir: "))
			}
			continue
		}
		if err != nil {
			return err
		}
		if d.InvalidUTF8 && opt.OnInvalidUTF8 != nil {
			opt.OnInvalidUTF8(rel)
		}
		if err := fn(i+1, d); err != nil {
			return err
		}
	}
	return nil
}
