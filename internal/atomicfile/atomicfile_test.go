package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.json")
	if err := WriteBytes(path, []byte("old\n")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("new", 1<<16)) // past the buffer: some of it reached the temporary file
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v: want boom, naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("a failed write changed the file: %.20q", b)
	}
	if err := Copy(path, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("copying a missing file succeeded")
	}
	src := filepath.Join(dir, "src")
	os.WriteFile(src, []byte("copied"), 0o600)
	if err := Copy(path, src); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "copied" {
		t.Fatalf("got %q after Copy", b)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v (%v), want 0644", st.Mode(), err)
	}
	left, _ := os.ReadDir(filepath.Dir(path))
	if len(left) != 1 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

func TestWriteUnwritableFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	err := WriteBytes(filepath.Join(file, "x"), []byte("x")) // a file where the folder should be
	if err == nil {
		t.Fatal("writing under a file succeeded")
	}
}
