// Package atomicfile replaces a file, or a folder, whole, so that a reader —
// or the next run after a crash — finds either the old content or the new,
// never a torn file or a half-written folder.
//
// Write streams the new content into a temporary file in the destination's
// folder (".NAME.tmp-*", so concurrent writers never share one), fsyncs and
// closes it, makes it mode 0644, renames it over the destination and fsyncs
// the folder (best effort, where a folder can be synced). If writing fails at
// any point the temporary file is removed and the destination is untouched.
//
// A folder is written beside its destination (e.g. NAME.partial) with
// CreateSum and CopySum — in place, synced, each returning the file's sha256
// for a manifest — and put in place by ReplaceDir, which moves an existing
// destination aside to NAME.old, renames the new folder over it and removes
// NAME.old. Model directories (model/onnx.WriteDir, model/installed.Add) are
// written so.
//
// Crash behaviour: a kill between the temporary file's creation and the rename
// can leave a ".NAME.tmp-*" file behind, never a partial NAME. A kill during a
// folder's replacement leaves the old folder, the new one, or the old one
// under NAME.old beside the new one's temporary folder; the next ReplaceDir
// to NAME removes a NAME.old it finds.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with what write writes (buffered), creating path's
// folder if needed. Errors name the file.
func Write(path string, write func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w", path, err)
	}
	tmp := f.Name()
	bw := bufio.NewWriterSize(f, 1<<16)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		err = fmt.Errorf("write %s: %w", path, err)
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("sync %s: %w", tmp, err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", tmp, cerr)
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // makes the rename durable on Linux; some systems cannot sync a folder
		d.Close()
	}
	return nil
}

// WriteBytes replaces path with b.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// Copy replaces dst with the content of src.
func Copy(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return Write(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
