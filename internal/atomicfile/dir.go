package atomicfile

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CreateSum creates path (truncating it), lets fill write it through a
// buffer, syncs it and returns the hex sha256 of what was written. It is
// not atomic by itself: it is for the files of a folder that ReplaceDir
// puts in place. Errors name the file.
func CreateSum(path string, fill func(io.Writer) error) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CopySum copies the file src to dst through CreateSum and returns the
// hex sha256 of what it wrote.
func CopySum(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	return CreateSum(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// ReplaceDir renames the folder tmp to dest, moving an existing dest aside
// (dest.old) first and removing it after, and creates dest's parent if
// needed. If the rename fails, the old dest is moved back.
//
// Crash behaviour: a kill leaves the old dest, the new one, or the old one
// under dest.old beside tmp; the next ReplaceDir to dest removes a
// dest.old it finds.
func ReplaceDir(tmp, dest string) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	old := dest + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(dest, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("moving old %s aside: %w", dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Rename(old, dest)
		return err
	}
	os.RemoveAll(old)
	return nil
}
