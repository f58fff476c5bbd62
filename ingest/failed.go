package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/files"
)

// StateKeeper is what keeps a folder's record of failed files beside its
// documents: *engine.Engine (SetState, State). A FolderEngine without it
// has every failed file read again at each sync.
type StateKeeper interface {
	SetState(key string, val []byte) error
	State(key string) ([]byte, error)
}

// stateFailed is the key of the failed files' record (JSON, failRecord).
const stateFailed = "ingest.failed"

// failRecord is the record: the folder and the readers it holds for, and
// each file that failed to read with the stamps it had then.
type failRecord struct {
	Root    string             `json:"root"`
	Readers string             `json:"readers"`
	Files   map[string]failure `json:"files"`
}

// failure is one file that failed to read.
type failure struct {
	Size   int64  `json:"size"`
	Mtime  string `json:"mtime"` // stamp
	Reason string `json:"reason"`
	Err    string `json:"error"` // the error's text, naming the file
}

// failMemory is the failed files as a sync sees them: loaded once, saved
// when changed.
type failMemory struct {
	keep    StateKeeper // nil: nothing remembered
	root    string
	readers string
	files   map[string]failure
	dirty   bool
}

// loadFailures reads eng's record for root as the readers now are (lim).
// A record of another folder or other readers is dropped (every file it
// names is read again); so is one that cannot be read. An engine that
// cannot keep records (not a StateKeeper, or writing through another
// process) remembers nothing.
func loadFailures(eng FolderEngine, root string, lim files.Limits) (*failMemory, error) {
	m := &failMemory{readers: readersStamp(lim), files: map[string]failure{}}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	m.root = root
	keep, ok := eng.(StateKeeper)
	if !ok {
		return m, nil
	}
	raw, err := keep.State(stateFailed)
	if errors.Is(err, engine.ErrLocked) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: reading the record of files that failed: %w", err)
	}
	m.keep = keep
	if raw == nil {
		return m, nil
	}
	var r failRecord
	if json.Unmarshal(raw, &r) != nil || r.Root != m.root || r.Readers != m.readers {
		m.dirty = true
		return m, nil
	}
	for p, f := range r.Files {
		m.files[p] = f
	}
	return m, nil
}

// still returns the record of f when f failed as it is now: same size and
// modification time, under the same readers.
func (m *failMemory) still(f files.File) (failure, bool) {
	r, ok := m.files[f.Rel]
	return r, ok && r.Size == f.Size && r.Mtime == stamp(f.ModTime)
}

// failed remembers f's failure (err) unless it may pass unchanged (an
// error of the file system: a permission fixed leaves the stamps alone).
func (m *failMemory) failed(f files.File, err error) {
	if files.Reason(err) == "unreadable" {
		m.forget(f.Rel)
		return
	}
	m.files[f.Rel] = failure{Size: f.Size, Mtime: stamp(f.ModTime), Reason: files.Reason(err), Err: err.Error()}
	m.dirty = true
}

// forget drops rel's record.
func (m *failMemory) forget(rel string) {
	if _, ok := m.files[rel]; ok {
		delete(m.files, rel)
		m.dirty = true
	}
}

// save writes the record when it changed.
func (m *failMemory) save() error {
	if m.keep == nil || !m.dirty {
		return nil
	}
	var raw []byte
	if len(m.files) > 0 {
		var err error
		raw, err = json.Marshal(failRecord{Root: m.root, Readers: m.readers, Files: m.files})
		if err != nil {
			return err
		}
	}
	if err := m.keep.SetState(stateFailed, raw); err != nil {
		return fmt.Errorf("ingest: recording the files that failed: %w", err)
	}
	m.dirty = false
	return nil
}

// readersStamp names the readers a failure holds for: the registry's
// version, the limits and the build of anna (a released or VCS-stamped
// version, which changes with its readers and their libraries).
func readersStamp(lim files.Limits) string {
	l := lim.Or()
	s := fmt.Sprintf("files %d; text %d; unpacked %d", files.ReadersVersion, l.MaxText, l.MaxUnpacked)
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		s += "; anna " + bi.Main.Version
	}
	return s
}

// ErrNotReadAgain is wrapped by the error of a file not read because it
// failed before as it is now (FolderStats.FilesStillFailing): its File.Err
// is the remembered error's text, wrapping this and the reason's
// sentinel (files.ErrNoTextLayer...).
var ErrNotReadAgain = errors.New("failed before and unchanged since: not read again")

// stillFailing is the error of a file not read again.
type stillFailing struct {
	msg    string
	reason error
}

func (e *stillFailing) Error() string { return e.msg + " (" + ErrNotReadAgain.Error() + ")" }
func (e *stillFailing) Unwrap() []error {
	if e.reason == nil {
		return []error{ErrNotReadAgain}
	}
	return []error{ErrNotReadAgain, e.reason}
}

// err is the error of a file not read again for r.
func (r failure) err() error {
	e := &stillFailing{msg: r.Err}
	for _, s := range []error{files.ErrNoTextLayer, files.ErrNoText, files.ErrEncrypted, files.ErrCorrupt, files.ErrTooLarge, files.ErrBinary, files.ErrEmpty, files.ErrUnsupported} {
		if files.Reason(s) == r.Reason {
			e.reason = s
			break
		}
	}
	return e
}
