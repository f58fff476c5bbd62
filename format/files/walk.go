package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/safe"
)

// IgnoreFiles are the files whose patterns (gitignore syntax) leave files
// out of a folder, each for its folder and those below it.
var IgnoreFiles = []string{".gitignore", ".annaignore"}

// Options shape a folder's listing.
type Options struct {
	// Include, when not empty, reads only the files matching one of its
	// globs; Exclude leaves out the files and folders matching one of its.
	// A glob ("**" for any folders) is matched against the path relative
	// to the folder, and a glob without a slash against the name too.
	Include, Exclude []string
	// NoIgnoreFiles reads files .gitignore and .annaignore leave out.
	NoIgnoreFiles bool
	// Limits bound each reader.
	Limits Limits
	// OnDir, when set, hears of each folder List walks (rel "" for the
	// root): what a watcher watches.
	OnDir func(rel string)
}

// Check reports a bad glob among o's.
func (o Options) Check() error {
	for _, g := range append(slices.Clone(o.Include), o.Exclude...) {
		if !doublestar.ValidatePattern(g) {
			return fmt.Errorf("files: bad glob %q", g)
		}
	}
	return nil
}

// File is one entry of a folder's listing: a file to read (Format set and
// Skip empty) or one not read and why.
type File struct {
	Rel     string // the path relative to the folder, with slashes
	Size    int64
	ModTime time.Time
	Format  string // the registry's name of its format
	// Skip says why the file is not read: "hidden", "ignored" (by
	// .gitignore, .annaignore or Exclude), "not included", "unsupported",
	// "binary", "empty", "too large", "link to a folder", "unreadable".
	Skip string
	Dir  bool  // a folder left out whole (hidden, ignored, or a link)
	Err  error // for "unreadable": what the file system said
}

// Ext is the file's extension (lower case, with the dot), or its name
// when it has none.
func (f File) Ext() string {
	base := path.Base(f.Rel)
	if f.Dir {
		return "folder"
	}
	if e := strings.ToLower(path.Ext(base)); e != "" && e != base {
		return e
	}
	return "no extension"
}

// List lists the files under root, in lexical order of their relative
// paths: those to read and those not read with the reason. Hidden files
// and folders (a name starting with ".") are not read, nor what the
// ignore files and Exclude leave out; links to files are listed as files,
// links to folders are not followed. A file of no registered format is
// "unsupported", unless it has no extension and its first bytes are text
// (read as plain text) or they are binary ("binary").
func List(ctx context.Context, root string, opt Options) ([]File, error) {
	ctx = safe.Ctx(ctx)
	if err := opt.Check(); err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("files: %s is not a folder", root)
	}
	w := walker{root: root, opt: opt}
	if err := w.dir(ctx, root, nil); err != nil {
		return nil, err
	}
	slices.SortFunc(w.out, func(a, b File) int { return strings.Compare(a.Rel, b.Rel) })
	return w.out, nil
}

type walker struct {
	root     string
	opt      Options
	patterns []gitignore.Pattern
	out      []File
}

// dir lists the folder at abs (parts: its path below the root).
func (w *walker) dir(ctx context.Context, abs string, parts []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		if len(parts) == 0 {
			return fmt.Errorf("files: %w", err)
		}
		w.out = append(w.out, File{Rel: strings.Join(parts, "/"), Dir: true, Skip: "unreadable", Err: err})
		return nil
	}
	if w.opt.OnDir != nil {
		w.opt.OnDir(strings.Join(parts, "/"))
	}
	keep := len(w.patterns)
	defer func() { w.patterns = w.patterns[:keep] }()
	if !w.opt.NoIgnoreFiles {
		for _, name := range IgnoreFiles {
			w.patterns = append(w.patterns, readIgnore(filepath.Join(abs, name), parts)...)
		}
	}
	matcher := gitignore.NewMatcher(w.patterns)
	for _, e := range entries {
		name := e.Name()
		sub := append(slices.Clone(parts), name)
		rel := strings.Join(sub, "/")
		isDir := e.IsDir()
		full := filepath.Join(abs, name)
		link := e.Type()&fs.ModeSymlink != 0
		var target fs.FileInfo
		if link {
			t, err := os.Stat(full)
			if err != nil {
				w.out = append(w.out, File{Rel: rel, Skip: "unreadable", Err: err})
				continue
			}
			target, isDir = t, t.IsDir()
		}
		switch {
		case strings.HasPrefix(name, "."):
			w.out = append(w.out, File{Rel: rel, Dir: isDir, Skip: "hidden"})
			continue
		case w.excluded(rel, name) || matcher.Match(sub, isDir):
			w.out = append(w.out, File{Rel: rel, Dir: isDir, Skip: "ignored"})
			continue
		case isDir && link:
			w.out = append(w.out, File{Rel: rel, Dir: true, Skip: "link to a folder"})
			continue
		case isDir:
			if err := w.dir(ctx, full, sub); err != nil {
				return err
			}
			continue
		}
		info := target
		if info == nil {
			if info, err = e.Info(); err != nil {
				w.out = append(w.out, File{Rel: rel, Skip: "unreadable", Err: err})
				continue
			}
		}
		f := File{Rel: rel, Size: info.Size(), ModTime: info.ModTime()}
		if !info.Mode().IsRegular() {
			f.Skip = "unsupported"
		} else if len(w.opt.Include) > 0 && !w.included(rel, name) {
			f.Skip = "not included"
		} else {
			w.classify(&f, full)
		}
		w.out = append(w.out, f)
	}
	return nil
}

// classify sets f's format, or why it is not read.
func (w *walker) classify(f *File, full string) {
	if f.Size == 0 {
		f.Skip = "empty"
		return
	}
	if ft, ok := Lookup(f.Rel); ok {
		f.Format = ft.Name
		if f.Size > ft.MaxBytes {
			f.Skip = "too large"
		}
		return
	}
	head, err := readHead(full)
	switch {
	case err != nil:
		f.Skip, f.Err = "unreadable", err
	case doc.IsBinary(head):
		f.Skip = "binary"
	case (path.Ext(path.Base(f.Rel)) == "" || textName.MatchString(path.Base(f.Rel))) && f.Size <= plainText.MaxBytes:
		f.Format = plainText.Name
	default:
		f.Skip = "unsupported"
	}
}

// textName matches the names of a project's notes whatever follows a dot
// (README.Debian, CHANGELOG.old, LICENSE.MIT): text when their bytes are.
var textName = regexp.MustCompile(`(?i)^(readme|changelog|changes|news|license|licence|copying|install|authors|notice|todo|contributing|history)\.`)

// readHead reads a file's first bytes, for guessing what it holds.
func readHead(name string) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b := make([]byte, 8<<10)
	n, err := io.ReadFull(fh, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

func globMatch(globs []string, rel, name string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, rel); ok {
			return true
		}
		if !strings.Contains(g, "/") {
			if ok, _ := doublestar.Match(g, name); ok {
				return true
			}
		}
	}
	return false
}

func (w *walker) excluded(rel, name string) bool { return globMatch(w.opt.Exclude, rel, name) }
func (w *walker) included(rel, name string) bool { return globMatch(w.opt.Include, rel, name) }

// readIgnore reads an ignore file's patterns for the folder at parts.
func readIgnore(name string, parts []string) []gitignore.Pattern {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	var ps []gitignore.Pattern
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(l, slices.Clone(parts)))
	}
	return ps
}

// Ignored reports whether the file or folder rel (relative to root, with
// slashes) is left out by a name starting with ".", an ignore file or
// Exclude, without listing the folder: what a watcher asks of a new path.
func Ignored(root, rel string, isDir bool, opt Options) bool {
	parts := strings.Split(rel, "/")
	var ps []gitignore.Pattern
	for i, p := range parts {
		if strings.HasPrefix(p, ".") {
			return true
		}
		if globMatch(opt.Exclude, strings.Join(parts[:i+1], "/"), p) {
			return true
		}
		if !opt.NoIgnoreFiles {
			dir := filepath.Join(append([]string{root}, parts[:i]...)...)
			for _, name := range IgnoreFiles {
				ps = append(ps, readIgnore(filepath.Join(dir, name), parts[:i])...)
			}
			if gitignore.NewMatcher(ps).Match(parts[:i+1], i < len(parts)-1 || isDir) {
				return true
			}
		}
	}
	return false
}
