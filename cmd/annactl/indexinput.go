package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/anna-search/anna/engine"
)

// What `annactl index` does around its stream of documents: the input's
// line count for the progress line, the lines that held invalid UTF-8, and
// --sync.

// cacheUsage is the help of --cache, on by default wherever it is a flag
// (index, reindex, embed, eval; mine-negatives always uses it): a text is
// embedded once per model, so building an index again, evaluating or
// mining the same corpus costs no model time. The price is disk: the
// cache keeps every vector it is given, beside the index's own copy.
const cacheUsage = "reuse and fill the embedding cache under $ANNA_HOME/cache (by model fingerprint and text; --cache=false: neither, e.g. for texts that will not be embedded again)"

// progressLog keeps the engine's messages off a progress line: its logf
// first ends the line when one is showing, so that "dense graph: built
// ..." no longer runs on after a reindex's count.
type progressLog struct {
	a    *app
	mu   sync.Mutex
	open bool // a progress line is showing, unfinished
}

// update updates p and notes that its line is showing.
func (l *progressLog) update(p *progress, done int, suffix string) {
	l.mu.Lock()
	l.open = l.open || p.on
	l.mu.Unlock()
	p.update(done, suffix)
}

func (l *progressLog) logf(format string, args ...any) {
	l.mu.Lock()
	if l.open {
		fmt.Fprintln(l.a.stderr)
		l.open = false
	}
	l.mu.Unlock()
	l.a.logf(format, args...)
}

// done ends p's line if it is showing.
func (l *progressLog) done(p *progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open {
		p.done()
		l.open = false
	}
}

// countLinesAsync counts the lines of in, when it is a regular file (with
// ReadAt, so the stream's offset is untouched), and sets the count as p's
// total: the progress line gets its total and ETA. A file of up to
// syncCount bytes is counted at once (milliseconds), a larger one in the
// background, so that the first batch is not delayed. It counts nothing
// when p is not shown, or in is a pipe.
func countLinesAsync(ctx context.Context, in io.Reader, p *progress) {
	f, ok := in.(*os.File)
	if !ok || !p.on {
		return
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	count := func() {
		n, err := countLines(ctx, io.NewSectionReader(f, 0, fi.Size()))
		if err != nil {
			return
		}
		p.mu.Lock()
		p.total = n
		p.mu.Unlock()
	}
	if fi.Size() <= syncCount {
		count()
	} else {
		go count()
	}
}

// syncCount is the largest input countLinesAsync counts before it returns.
const syncCount = 64 << 20

// countLines counts lines as package beir numbers them: split on "\n", a
// last line without one counted too.
func countLines(ctx context.Context, r io.Reader) (int, error) {
	buf := make([]byte, 1<<20)
	n, last := 0, byte('\n')
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// utf8Lines passes a stream through and notes the lines (1-based, split on
// "\n", as package beir numbers them) that hold invalid UTF-8: JSON
// decoding turns such bytes into U+FFFD silently, so index counts them.
// The reader of the stream claims each line it consumes, in order, with
// invalid; the lines noted but not yet claimed are at most those read
// ahead.
type utf8Lines struct {
	r       io.Reader
	line    int    // lines finished
	carry   []byte // an incomplete rune at the end of the last read
	bad     bool   // the current line holds invalid UTF-8
	pending []int  // invalid lines not yet claimed, ascending
}

func (u *utf8Lines) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	u.scan(p[:n])
	if err == io.EOF && (u.bad || len(u.carry) > 0) {
		u.endLine() // the last line, without a newline
	}
	return n, err
}

func (u *utf8Lines) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			u.check(b)
			return
		}
		u.check(b[:i])
		u.endLine()
		b = b[i+1:]
	}
}

// check validates one piece of the current line, holding back a rune cut
// by the end of the read.
func (u *utf8Lines) check(b []byte) {
	if u.bad || len(b) == 0 {
		return
	}
	if len(u.carry) > 0 {
		b = append(u.carry, b...)
		u.carry = nil
	}
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				u.carry = append([]byte(nil), b[i:]...)
				b = b[:i]
			}
			break
		}
	}
	if !utf8.Valid(b) {
		u.bad = true
		u.carry = nil
	}
}

func (u *utf8Lines) endLine() {
	u.line++
	if u.bad || len(u.carry) > 0 {
		u.pending = append(u.pending, u.line)
	}
	u.bad, u.carry = false, nil
}

// invalid claims line: whether it held invalid UTF-8. Lines must be claimed
// in ascending order; those skipped are forgotten.
func (u *utf8Lines) invalid(line int) bool {
	for len(u.pending) > 0 && u.pending[0] < line {
		u.pending = u.pending[1:]
	}
	if len(u.pending) > 0 && u.pending[0] == line {
		u.pending = u.pending[1:]
		return true
	}
	return false
}

// noteUTF8 counts a stored document whose line held invalid UTF-8.
func (st *indexStats) noteUTF8(name string, line int) {
	st.badUTF8++
	if len(st.badUTF8First) < namedMax {
		st.badUTF8First = append(st.badUTF8First, fmt.Sprintf("%s:%d", name, line))
	}
}

// errSyncEmpty refuses --sync of an input without documents.
var errSyncEmpty = errors.New("--sync: the input holds no document; refusing to empty the directory (remove its folder to start over)")

// syncIndex, for --sync, removes the documents the input does not hold once
// the whole input is in (err, the indexing's, is nil): the directory then
// holds exactly the input's documents. After a failed or interrupted
// indexing it removes nothing and returns err; an input without documents
// removes nothing either (an error).
func (a *app) syncIndex(ctx context.Context, eng *engine.Engine, st *indexStats, batch int, err error) error {
	if err != nil {
		return err
	}
	if len(st.seen) == 0 {
		// An empty or truncated-to-nothing input emptying a directory is
		// more likely a mistake than a wish.
		return errSyncEmpty
	}
	n, err := eng.Teacher().DeleteExcept(ctx, func(id string) bool { return st.seen[id] }, batch)
	st.removed = n
	st.synced = err == nil
	return err
}

// indexReport says, after index's summary line, what else it found and did.
func (a *app) indexReport(st indexStats, name, dir string, sync bool, err error) {
	if st.badUTF8 > 0 {
		fmt.Fprintf(a.stderr, "invalid UTF-8, stored as U+FFFD: %s (%s%s)\n",
			plural(st.badUTF8, "document"), strings.Join(st.badUTF8First, ", "), more(st.badUTF8, len(st.badUTF8First)))
	}
	switch {
	case !sync:
	case st.synced:
		fmt.Fprintf(a.stderr, "synced: removed %s that %s does not hold; %s holds exactly its %s\n", plural(st.removed, "document"), name, dir, plural(len(st.seen), "document"))
	case st.removed > 0:
		fmt.Fprintf(a.stderr, "--sync: removed %s that %s does not hold before stopping; run the same command again to finish\n", plural(st.removed, "document"), name)
	case err != nil && !errors.Is(err, errSyncEmpty):
		fmt.Fprintf(a.stderr, "--sync: nothing removed (%s was not read to its end)\n", name)
	}
}

// plural is "1 document", "2 documents" ("1 query", "2 queries").
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "y"); ok && !strings.HasSuffix(stem, "e") {
		return fmt.Sprintf("%d %sies", n, stem)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// more is " and N more" when a list names fewer than all.
func more(all, named int) string {
	if all > named {
		return fmt.Sprintf(" and %d more", all-named)
	}
	return ""
}

// inputFolder is the FOLDER that --input or the argument names, or "".
func inputFolder(flag string, args []string) string {
	path := flag
	if len(args) == 1 && flag == "" {
		path = args[0]
	}
	if path == "" || path == "-" {
		return ""
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return path
	}
	return ""
}
