//go:build unix

package engine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// Writers before readers, across processes. bbolt's lock admits one
// writer or any number of readers; a writer polls for it, so readers that
// come and go while it waits (four overlapping `annactl search` loops)
// kept it out for good. DIR/anna.lock is a turnstile: a writer holds an
// exclusive flock on it while it waits for anna.db's lock (and lets go
// once it has it, or gives up), and a reader about to take anna.db's
// shared lock first checks that nobody holds the turnstile, and waits
// while a writer does. A writer so waits at most for the readers that were
// already in (each until it closes); the readers that come meanwhile read
// through it once it has the lock. flock is released when a process dies,
// so a crashed writer keeps nobody waiting. A read-only open never creates
// the file (it writes nothing): without it, nobody waits.
const turnstileFile = "anna.lock"

// takeTurnstile tries, without waiting, to take dir's turnstile for a
// writer; release lets go of it (ok false: another writer holds it, or it
// cannot be made, and the writer goes on without it).
func takeTurnstile(dir string) (release func(), ok bool) {
	f, err := os.OpenFile(filepath.Join(dir, turnstileFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return func() {}, false
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true
}

// writerWaiting reports whether a writer holds dir's turnstile: it is
// waiting for anna.db's lock, and readers should let it in first.
func writerWaiting(dir string) bool {
	f, err := os.Open(filepath.Join(dir, turnstileFile))
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}
