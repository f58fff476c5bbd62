package ingest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/files"
	"github.com/anna-search/anna/internal/parallel"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/lang"
)

// FolderEngine is what a folder is synced into: *engine.Engine.
type FolderEngine interface {
	Adder
	Apply(ctx context.Context, docs []engine.Document, deletes []string) (engine.AddResult, error)
	Documents(ctx context.Context, fn func(engine.Document) error) error
}

// The metadata keys of a folder's documents beyond engine's MetaPath,
// MetaPage, MetaLines and MetaSection.
const (
	MetaExt    = "ext"    // the file's extension, without the dot
	MetaFormat = "format" // the registry's name of its format (files.Formats)
	MetaSize   = "size"   // the file's size in bytes (a number)
	MetaMtime  = "mtime"  // its modification time, RFC 3339 with nanoseconds, UTC
	MetaHash   = "sha256" // its content's SHA-256 (hex)
	MetaParts  = "parts"  // how many documents the file is (a number)
	MetaPart   = "part"   // which one this is, from 1 (a number)
	MetaSymbol = "symbol" // the function, method or class (code)
	MetaCode   = "code"   // the programming language (code)
	MetaAuthor = "author" // the format's author (a message's sender)
	MetaDate   = "date"   // the format's date
	// MetaLang is the natural language, an ISO 639-1 code: the one the
	// format declares (HTML's lang, the core properties' dc:language,
	// front matter's lang) where it declares a known one, else the one
	// package lang detects in the file's text where it is sure of it
	// (never for code). The document's Language is set to the same, so
	// BM25 analyses it as written; where neither is known, both are left
	// to the engine (Options.Language, by default detected per document).
	MetaLang = "lang"
)

// FolderOptions shape a folder's ingest.
type FolderOptions struct {
	// Options: Batch is documents (parts of files) per commit, files kept
	// whole in one; Progress's Total is the files to read (changed or
	// new), Read the files done; Accept sees each document.
	Options
	Files files.Options // which files: include/exclude globs, ignore files, limits
	// Remove removes the documents of files that are gone (deleted, or
	// now ignored or excluded) once the others are in: what --sync and a
	// watch do. A file that fails to read keeps its documents either way.
	Remove bool
	// OnSkip hears of each file not read and why (File.Skip; File.Err for
	// a file that failed to read: its error names the file and the
	// reason).
	OnSkip func(f files.File)
	// OnNote hears of what a file read needed: its encoding converted,
	// its text truncated.
	OnNote func(rel, note string)
}

// FolderStats count what a folder's ingest did: its documents in Stats
// (Read counts files), its files in the rest.
type FolderStats struct {
	Stats
	Files          int // files of a readable format listed
	FilesRead      int // files read (new or changed)
	FilesUnchanged int // files stored with the same size and time: not read
	FilesFailed    int // files that failed to read (in Skipped, with Err)
	// FilesStillFailing counts the files that failed before and have not
	// changed since (same size and time, same readers): not read again,
	// in Skipped with the remembered reason and an Err wrapping
	// ErrNotReadAgain.
	FilesStillFailing int
	FilesMoved        int          // files found under a new name with the content of one gone: their vectors kept
	FilesRemoved      int          // files whose documents were removed (Remove)
	Skipped           []files.File // files not read, with the reason
}

// stored is what the engine holds of one file.
type stored struct {
	ids   []string
	size  int64
	mtime string
	hash  string
	parts int
	ok    bool // every document of the file agrees and they are all there
}

// folderState is what the engine holds of a folder, by path.
type folderState map[string]*stored

// loadState reads the engine's documents of files.
func loadState(ctx context.Context, eng FolderEngine) (folderState, error) {
	st := folderState{}
	err := eng.Documents(ctx, func(d engine.Document) error {
		p := d.Meta[engine.MetaPath]
		if p == "" {
			return nil
		}
		s := st[p]
		size, _ := d.MetaValues[MetaSize].Number()
		parts, _ := d.MetaValues[MetaParts].Number()
		if s == nil {
			s = &stored{size: int64(size), mtime: d.Meta[MetaMtime], hash: d.Meta[MetaHash], parts: int(parts), ok: d.Meta[MetaMtime] != ""}
			st[p] = s
		} else if s.size != int64(size) || s.mtime != d.Meta[MetaMtime] || s.hash != d.Meta[MetaHash] || s.parts != int(parts) {
			s.ok = false
		}
		s.ids = append(s.ids, d.ID)
		return nil
	})
	for _, s := range st {
		s.ok = s.ok && len(s.ids) == s.parts
	}
	return st, err
}

// Dir syncs the files under root into eng: every file of a readable
// format (package files) is read into documents, one per part of it (a
// page, a section, a function...), with the metadata that locates it;
// a file stored with the same size and modification time is not read
// again, a changed one is re-read and only its changed parts embedded
// (engine.Apply keeps the vectors of unchanged text), a file renamed
// keeps its vectors. With Remove, the documents of files gone leave the
// engine.
//
// IDs: a file of one part is its path relative to root (with slashes); a
// file of several, its path + "#" + the part's number from 1.
//
// A file that fails to read is named (OnSkip, Skipped) and the others go
// on; its documents already stored stay. Each commit holds whole files,
// so a crash leaves every file's documents as they were before or after;
// running Dir again catches up.
//
// A file that failed to read is remembered with its size, modification
// time and reason, in the engine beside the documents (StateKeeper): at
// the next sync, unchanged, it is not read again but named all the same
// (FilesStillFailing, OnSkip and Skipped with the remembered reason). It
// is read again once its size or time changes, when a watch's event names
// it, after it was gone from the folder, and when the readers change
// (files.ReadersVersion, the limits, another build of anna). An error of
// the file system (unreadable) is not remembered, and an engine that
// writes through another process (engine.Options.WriteThrough: annactl
// index beside annactl serve) remembers nothing: there every failed file
// is read at each sync.
func Dir(ctx context.Context, eng FolderEngine, root string, opt FolderOptions) (FolderStats, error) {
	ctx = safe.Ctx(ctx)
	st, err := loadState(ctx, eng)
	if err != nil {
		return FolderStats{}, err
	}
	fm, err := loadFailures(eng, root, opt.Files.Limits)
	if err != nil {
		return FolderStats{}, err
	}
	return syncFolder(ctx, eng, root, opt, st, fm, nil)
}

// syncFolder brings eng in step with root, given what it holds (st,
// updated as batches commit) and the files that failed (fm, saved before
// it returns); the files of force are read whatever their stamps say.
func syncFolder(ctx context.Context, eng FolderEngine, root string, opt FolderOptions, st folderState, fm *failMemory, force map[string]bool) (_ FolderStats, err error) {
	var fs FolderStats
	defer func() {
		if serr := fm.save(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	b, err := newBatcher(eng, opt.Options)
	if err != nil {
		return fs, err
	}
	listing, err := files.List(ctx, root, opt.Files)
	if err != nil {
		return fs, err
	}
	listed := map[string]bool{}
	var toRead []files.File
	for _, f := range listing {
		if f.Skip != "" {
			fs.Skipped = append(fs.Skipped, f)
			if opt.OnSkip != nil {
				opt.OnSkip(f)
			}
			// A file that exists keeps its documents unless it is now
			// left out on purpose.
			if f.Skip != "hidden" && f.Skip != "ignored" && f.Skip != "not included" && !f.Dir {
				listed[f.Rel] = true
			}
			continue
		}
		listed[f.Rel] = true
		toRead = append(toRead, f)
	}
	fs.Files = len(toRead)
	// The files gone, by content: a new file with one's content is it,
	// renamed.
	goneByHash := map[string][]string{}
	for p, s := range st {
		if !listed[p] && !underSkippedDir(p, listing) && s.hash != "" {
			goneByHash[s.hash] = append(goneByHash[s.hash], p)
		}
	}
	reading := map[string]bool{}
	for _, f := range toRead {
		reading[f.Rel] = true
	}
	for p := range fm.files {
		if !reading[p] {
			fm.forget(p) // gone, or left out: read again when back
		}
	}
	changed := toRead[:0:0]
	for _, f := range toRead {
		if r, ok := fm.still(f); ok && !force[f.Rel] {
			f.Skip, f.Err = r.Reason, r.err()
			fs.FilesStillFailing++
			fs.Skipped = append(fs.Skipped, f)
			if opt.OnSkip != nil {
				opt.OnSkip(f)
			}
			continue
		}
		s := st[f.Rel]
		if !force[f.Rel] && s != nil && s.ok && s.size == f.Size && s.mtime == stamp(f.ModTime) {
			fs.FilesUnchanged++
			fs.Unchanged += len(s.ids)
			continue
		}
		changed = append(changed, f)
	}
	b.total = len(changed)
	b.report()
	var pendingState []func()
	b.onFlush = func() {
		for _, f := range pendingState {
			f()
		}
		pendingState = pendingState[:0]
	}
	moved := map[string]bool{}
	// The files are read ahead of the commits (readAhead), and handed
	// back here in order: everything from here on is done in order.
	formats := make([]files.Format, len(changed))
	for i, f := range changed {
		formats[i], _ = files.Lookup(f.Rel)
		if f.Format != formats[i].Name {
			formats[i] = formatNamed(f.Format)
		}
	}
	next, stop := parallel.Ahead(ctx, len(changed), readers, readAhead, func(ctx context.Context, i int) (files.Doc, error) {
		if testRead != nil {
			testReadMu.Lock()
			testRead(changed[i].Rel)
			testReadMu.Unlock()
		}
		return formats[i].Read(ctx, joinPath(root, changed[i].Rel), changed[i].Rel, opt.Files.Limits)
	})
	defer stop()
	for i, f := range changed {
		if err := ctx.Err(); err != nil {
			return b.finishFolder(ctx, fs, err)
		}
		ft := formats[i]
		d, err, ok := next()
		if !ok { // ctx is done: next says so
			if err == nil {
				err = ctx.Err()
			}
			return b.finishFolder(ctx, fs, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return b.finishFolder(ctx, fs, ctx.Err())
			}
			f.Skip, f.Err = files.Reason(err), err
			fm.failed(f, err)
			fs.FilesFailed++
			fs.Skipped = append(fs.Skipped, f)
			if opt.OnSkip != nil {
				opt.OnSkip(f)
			}
			b.st.Read = i + 1
			continue
		}
		if opt.OnNote != nil {
			if d.Encoding != "" {
				opt.OnNote(f.Rel, "read as "+d.Encoding)
			}
			if d.Truncated {
				opt.OnNote(f.Rel, fmt.Sprintf("text past %d bytes left out", opt.Files.Limits.Or().MaxText))
			}
		}
		fs.FilesRead++
		// A record of its failure goes before its documents come: a
		// crash between the two has it read again, never hidden.
		if _, ok := fm.files[f.Rel]; ok {
			fm.forget(f.Rel)
			if err := fm.save(); err != nil {
				return b.finishFolder(ctx, fs, err)
			}
		}
		docs := Documents(f, ft.Name, d)
		keep := map[string]bool{}
		for _, doc := range docs {
			keep[doc.ID] = true
		}
		var dels []string
		if s := st[f.Rel]; s != nil {
			for _, id := range s.ids {
				if !keep[id] {
					dels = append(dels, id)
				}
			}
		} else if ps := goneByHash[d.SHA256]; len(ps) > 0 {
			from := ps[0]
			goneByHash[d.SHA256] = ps[1:]
			moved[from] = true
			fs.FilesMoved++
			dels = append(dels, st[from].ids...)
			pendingState = append(pendingState, func() { delete(st, from) })
		}
		rel, n, ids := f.Rel, len(docs), make([]string, len(docs))
		for j, doc := range docs {
			ids[j] = doc.ID
		}
		size, mt, hash := f.Size, stamp(f.ModTime), d.SHA256
		pendingState = append(pendingState, func() {
			st[rel] = &stored{ids: ids, size: size, mtime: mt, hash: hash, parts: n, ok: true}
		})
		if err := b.takeFile(ctx, i+1, docs, dels); err != nil {
			return b.finishFolder(ctx, fs, err)
		}
	}
	if err := b.flush(ctx); err != nil {
		return b.finishFolder(ctx, fs, err)
	}
	if opt.Remove {
		for p, s := range st {
			if listed[p] || moved[p] || underSkippedDir(p, listing) && !removedDir(p, listing) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return b.finishFolder(ctx, fs, err)
			}
			fs.FilesRemoved++
			p := p
			pendingState = append(pendingState, func() { delete(st, p) })
			if err := b.takeFile(ctx, b.st.Read, nil, s.ids); err != nil {
				return b.finishFolder(ctx, fs, err)
			}
		}
	}
	return b.finishFolder(ctx, fs, nil)
}

// underSkippedDir reports whether p lies under a folder the listing left
// out whole (a link to a folder, an unreadable folder): its files are not
// gone.
func underSkippedDir(p string, listing []files.File) bool {
	for _, f := range listing {
		if f.Dir && strings.HasPrefix(p, f.Rel+"/") {
			return true
		}
	}
	return false
}

// removedDir reports whether p lies under a folder left out on purpose
// (hidden or ignored): its documents go.
func removedDir(p string, listing []files.File) bool {
	for _, f := range listing {
		if f.Dir && (f.Skip == "hidden" || f.Skip == "ignored") && strings.HasPrefix(p, f.Rel+"/") {
			return true
		}
	}
	return false
}

// testRead, set by tests, hears of each file read (one call at a time).
var (
	testRead   func(rel string)
	testReadMu sync.Mutex
)

// readers files are read at once, at most readAhead ahead of the one
// being committed: parsing (a PDF's, an Office file's) overlaps the
// model's run, and the memory of files read and not yet batched stays
// that of readAhead files (each at most Limits.MaxText of text).
var (
	readers   = min(4, runtime.GOMAXPROCS(0))
	readAhead = 2 * readers
)

func formatNamed(name string) files.Format {
	for _, f := range files.Formats() {
		if f.Name == name {
			return f
		}
	}
	return files.Format{}
}

func joinPath(root, rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// stamp is a modification time as the metadata holds it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Documents turns a file read into its documents (see Dir for IDs; the
// metadata keys are engine's MetaPath, MetaPage, MetaLines, MetaSection
// and the Meta constants of this package). A part's title is its own (a
// message's subject), else the file's (the format's, or the file's name
// without its extension); a part of code is titled by the file's name and
// its symbol.
func Documents(f files.File, format string, d files.Doc) []engine.Document {
	base := path.Base(f.Rel)
	name := strings.TrimSuffix(base, path.Ext(base))
	if name == "" {
		name = base
	}
	title := d.Title
	if title == "" {
		title = name
	}
	language := fileLanguage(format, d)
	out := make([]engine.Document, 0, len(d.Parts))
	for i, p := range d.Parts {
		id := f.Rel
		if len(d.Parts) > 1 {
			id = f.Rel + "#" + strconv.Itoa(i+1)
		}
		meta := map[string]string{
			engine.MetaPath: f.Rel,
			MetaExt:         strings.TrimPrefix(strings.ToLower(path.Ext(base)), "."),
			MetaFormat:      format,
			MetaMtime:       stamp(f.ModTime),
			MetaHash:        d.SHA256,
		}
		values := map[string]engine.Value{
			MetaSize:  engine.NumberValue(float64(f.Size)),
			MetaParts: engine.NumberValue(float64(len(d.Parts))),
			MetaPart:  engine.NumberValue(float64(i + 1)),
		}
		set := func(k, v string) {
			if v != "" {
				meta[k] = v
			}
		}
		if p.Page > 0 {
			values[engine.MetaPage] = engine.NumberValue(float64(p.Page))
		}
		if p.StartLine > 0 {
			set(engine.MetaLines, fmt.Sprintf("%d-%d", p.StartLine, max(p.EndLine, p.StartLine)))
		}
		set(engine.MetaSection, p.Section)
		set(MetaSymbol, p.Symbol)
		set(MetaCode, p.Code)
		set(MetaAuthor, firstOf(p.Author, d.Author))
		set(MetaDate, firstOf(p.Date, d.Date))
		set(MetaLang, language)
		if meta[MetaExt] == "" {
			delete(meta, MetaExt)
		}
		t := firstOf(p.Title, title)
		if p.Code != "" && format == "code" {
			t = base
			if p.Symbol != "" {
				t += " " + p.Symbol
			}
		}
		out = append(out, engine.Document{ID: id, Title: t, Text: p.Text, Meta: meta, MetaValues: values, Language: language})
	}
	return out
}

// fileLanguage is a file's natural language (see MetaLang): the format's
// declared one, else what package lang is sure of in the file's first
// lang.DetectBytes of text, else "".
func fileLanguage(format string, d files.Doc) string {
	if l, err := lang.Parse(d.Lang); err == nil && l != "" && l != lang.Auto {
		return l
	}
	if format == "code" {
		return ""
	}
	var b strings.Builder
	b.WriteString(d.Title)
	for _, p := range d.Parts {
		if b.Len() >= lang.DetectBytes {
			break
		}
		b.WriteString("\n")
		b.WriteString(p.Text)
	}
	if g := lang.GuessText(b.String()); g.Sure {
		return g.Code
	}
	return ""
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
