package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/anna-search/anna/format/files"
	"github.com/anna-search/anna/internal/safe"
)

// DefaultDebounce is how long Watch waits after a folder's last change
// before it syncs, when WatchOptions.Debounce is 0.
const DefaultDebounce = 300 * time.Millisecond

// WatchOptions shape Watch.
type WatchOptions struct {
	// FolderOptions shape each sync; Remove is always on.
	FolderOptions
	// Debounce is the quiet time after the last change before a sync
	// (DefaultDebounce when 0): an editor's save (a temporary file
	// written, then renamed over the old one) or a file written slowly
	// is read once it is still.
	Debounce time.Duration
	// OnSync, when set, hears of each sync: the first (the catch-up) and
	// each after changes.
	OnSync func(FolderStats, error)
	// Ready, when set, is called once the first sync is done and the
	// folder is watched.
	Ready func()
}

// Watch keeps eng in step with the folder root until ctx is done: first
// a sync (Dir with Remove: new and changed files read, the documents of
// files gone removed — what a restart after a crash catches up with),
// then, on every change the file system reports (fsnotify), another sync
// once the folder has been still for Debounce. A sync lists the folder and
// reads only files whose size or time changed or that the events named,
// so a rename keeps its vectors and new folders are found and watched. A
// root that disappears is waited for (checked each second) and synced
// when it is back; its documents stay meanwhile.
//
// Between changes Watch does nothing (it waits on the file system's
// events). It returns ctx's error once ctx is done, after the sync in
// progress commits or stops between files; a watcher that cannot start
// is an error at once. A sync's error is given to OnSync and the watch
// goes on.
func Watch(ctx context.Context, eng FolderEngine, root string, opt WatchOptions) error {
	ctx = safe.Ctx(ctx)
	if opt.Debounce <= 0 {
		opt.Debounce = DefaultDebounce
	}
	opt.Remove = true
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("ingest: watching %s: %w", root, err)
	}
	defer w.Close()
	st, err := loadState(ctx, eng)
	if err != nil {
		return err
	}
	fm, err := loadFailures(eng, abs, opt.Files.Limits)
	if err != nil {
		return err
	}
	watched := map[string]bool{}
	wt := watcher{eng: eng, root: abs, opt: opt, st: st, failed: fm, fsw: w, watched: watched}
	if wt.sync(ctx, nil) {
		// What changed in a folder between its listing and its watch
		// started: a second look, reading only what changed.
		wt.sync(ctx, nil)
	}
	if opt.Ready != nil {
		opt.Ready()
	}
	return wt.loop(ctx)
}

type watcher struct {
	eng     FolderEngine
	root    string
	opt     WatchOptions
	st      folderState
	failed  *failMemory
	fsw     *fsnotify.Watcher
	watched map[string]bool // folders watched, relative
	missing bool            // the root is gone
}

// sync runs one sync (force: files to read whatever their stamps) and
// watches the folders it found; added says whether it began to watch a
// folder (whose changes between its listing and its watch went unseen).
func (w *watcher) sync(ctx context.Context, force map[string]bool) (added bool) {
	var dirs []string
	fo := w.opt.FolderOptions
	fo.Files.OnDir = func(rel string) { dirs = append(dirs, rel) }
	fs, err := syncFolder(ctx, w.eng, w.root, fo, w.st, w.failed, force)
	if err != nil && ctx.Err() != nil {
		return false
	}
	if err != nil {
		if _, serr := os.Stat(w.root); errors.Is(serr, os.ErrNotExist) {
			w.missing = true
			err = fmt.Errorf("ingest: %s is gone; its documents stay until it is back (checked each second)", w.root)
		} else {
			// What the engine holds may differ from what was noted: read it again.
			if st, lerr := loadState(ctx, w.eng); lerr == nil {
				w.st = st
			}
		}
	} else {
		w.missing = false
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		seen[d] = true
		if !w.watched[d] {
			if aerr := w.fsw.Add(filepath.Join(w.root, filepath.FromSlash(d))); aerr != nil {
				err = errors.Join(err, fmt.Errorf("ingest: watching %s: %w (on Linux, fs.inotify.max_user_watches bounds the folders watched)", filepath.Join(w.root, d), aerr))
				continue
			}
			w.watched[d] = true
			added = true
		}
	}
	for d := range w.watched {
		if !seen[d] {
			w.fsw.Remove(filepath.Join(w.root, filepath.FromSlash(d)))
			delete(w.watched, d)
		}
	}
	if w.opt.OnSync != nil {
		w.opt.OnSync(fs, err)
	}
	return added
}

func (w *watcher) loop(ctx context.Context) error {
	dirty := map[string]bool{}
	var timer <-chan time.Time
	var poll <-chan time.Time
	var ticker *time.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		if w.missing && ticker == nil {
			ticker = time.NewTicker(time.Second)
			poll = ticker.C
		} else if !w.missing && ticker != nil {
			ticker.Stop()
			ticker, poll = nil, nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return errors.New("ingest: the file system watcher stopped")
			}
			rel, relevant := w.relevant(ev)
			if !relevant {
				continue
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create) != 0 && rel != "" {
				dirty[rel] = true
			}
			timer = time.After(w.opt.Debounce)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return errors.New("ingest: the file system watcher stopped")
			}
			if w.opt.OnSync != nil {
				w.opt.OnSync(FolderStats{}, fmt.Errorf("ingest: watching %s: %w (syncing everything)", w.root, err))
			}
			timer = time.After(w.opt.Debounce)
		case <-timer:
			timer = nil
			force := dirty
			dirty = map[string]bool{}
			if w.sync(ctx, force) {
				timer = time.After(w.opt.Debounce) // a new folder: look again
			}
		case <-poll:
			if fi, err := os.Stat(w.root); err == nil && fi.IsDir() {
				w.watched = map[string]bool{}
				if w.sync(ctx, nil) {
					timer = time.After(w.opt.Debounce)
				}
			}
		}
	}
}

// relevant says whether an event is about a path a sync would look at
// (not under a hidden or ignored folder), and its relative path; a change
// to an ignore file is relevant.
func (w *watcher) relevant(ev fsnotify.Event) (string, bool) {
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	if rel == "." {
		return "", true
	}
	if slices.Contains(files.IgnoreFiles, filepath.Base(rel)) {
		return "", true
	}
	isDir := false
	if fi, err := os.Stat(ev.Name); err == nil {
		isDir = fi.IsDir()
	}
	if files.Ignored(w.root, rel, isDir, w.opt.Files) {
		return "", false
	}
	return rel, true
}
