package files

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

func put(t *testing.T, root, rel string, body []byte) string {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func listing(t *testing.T, root string, opt Options) map[string]File {
	t.Helper()
	fs, err := List(context.Background(), root, opt)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]File{}
	for _, f := range fs {
		out[f.Rel] = f
	}
	return out
}

// TestList: what the walker reads and why it leaves the rest: hidden
// files, .gitignore and .annaignore (nested, negated), --exclude and
// --include, empty files, binary and unsupported ones, a file without an
// extension that is text, links to folders (a loop) and broken links.
func TestList(t *testing.T) {
	root := t.TempDir()
	put(t, root, "notes/plan.md", []byte("# Plan\n"))
	put(t, root, "notes/.draft.md", []byte("# secret\n"))
	put(t, root, ".git/config", []byte("[core]\n"))
	put(t, root, ".gitignore", []byte("build/\n*.log\n!keep.log\n"))
	put(t, root, "build/out.txt", []byte("generated\n"))
	put(t, root, "run.log", []byte("log\n"))
	put(t, root, "keep.log", []byte("kept\n"))
	put(t, root, "src/.annaignore", []byte("vendor/\n"))
	put(t, root, "src/main.go", []byte("package main\n"))
	put(t, root, "src/vendor/lib.go", []byte("package lib\n"))
	put(t, root, "empty.txt", nil)
	put(t, root, "photo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	put(t, root, "data.bin", bytes.Repeat([]byte{1, 2, 3, 250}, 100))
	put(t, root, "lockfile.lock", []byte("some text\n"))
	put(t, root, "README", []byte("Read me first.\n"))
	put(t, root, "README.Debian", []byte("Notes for Debian.\n"))
	put(t, root, "drafts/x.md", []byte("# x\n"))
	if err := os.Symlink(root, filepath.Join(root, "loop")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "broken.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "notes/plan.md"), filepath.Join(root, "plan-link.md")); err != nil {
		t.Fatal(err)
	}
	got := listing(t, root, Options{Exclude: []string{"drafts/**"}})
	want := map[string]string{ // path: format or "-" + reason
		"notes/plan.md": "markdown", "notes/.draft.md": "-hidden", ".git": "-hidden", ".gitignore": "-hidden",
		"build": "-ignored", "run.log": "-ignored", "keep.log": "-unsupported", "src/.annaignore": "-hidden",
		"src/main.go": "code", "src/vendor": "-ignored", "empty.txt": "-empty", "photo.png": "-binary",
		"data.bin": "-binary", "lockfile.lock": "-unsupported", "README": "text", "README.Debian": "text", "drafts": "-ignored",
		"loop": "-link to a folder", "broken.md": "-unreadable", "plan-link.md": "markdown",
	}
	for rel, w := range want {
		f, ok := got[rel]
		g := f.Format
		if f.Skip != "" {
			g = "-" + f.Skip
		}
		if !ok || g != w {
			t.Errorf("%s: %q, want %q", rel, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("listed %d entries, want %d: %v", len(got), len(want), got)
	}
	inc := listing(t, root, Options{Include: []string{"*.md"}})
	if inc["notes/plan.md"].Skip != "" || inc["src/main.go"].Skip != "not included" {
		t.Errorf("--include *.md: %+v %+v", inc["notes/plan.md"], inc["src/main.go"])
	}
	if !Ignored(root, "src/vendor/lib.go", false, Options{}) || !Ignored(root, "x/.hidden", false, Options{}) || Ignored(root, "src/main.go", false, Options{}) {
		t.Error("Ignored disagrees with List")
	}
	var skipped []File
	for _, f := range got {
		if f.Skip != "" {
			skipped = append(skipped, f)
		}
	}
	s := Summary(4, skipped)
	for _, w := range []string{"4 read, 15 skipped: ", "3 folder (ignored)", "1 .png (binary)", "1 .lock (unsupported)", "1 .md (unreadable)", "supported: .pdf"} {
		if !strings.Contains(s, w) {
			t.Errorf("summary %q lacks %q", s, w)
		}
	}
	if err := (Options{Exclude: []string{"[bad"}}).Check(); err == nil {
		t.Error("a bad glob passed")
	}
}

// TestBadInput: each kind of bad file is named with its reason, in
// bounded time and memory, and never panics.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	read := func(rel string) (Doc, error) {
		f, ok := Lookup(rel)
		if !ok {
			t.Fatalf("no format for %s", rel)
		}
		return f.Read(ctx, filepath.Join(root, rel), rel, Limits{})
	}
	pdf, err := os.ReadFile("testdata/handbook-libreoffice.pdf")
	if err != nil {
		t.Fatal(err)
	}

	// A truncated PDF, and one whose bytes are garbage after the header.
	put(t, root, "truncated.pdf", pdf[:len(pdf)/3])
	put(t, root, "garbage.pdf", append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("garbage "), 1000)...))
	put(t, root, "notpdf.pdf", []byte("hello, this is not a PDF"))
	for _, rel := range []string{"truncated.pdf", "garbage.pdf", "notpdf.pdf"} {
		d, err := read(rel)
		if err == nil {
			// PDFium may recover the pages a truncated file still holds.
			if rel != "truncated.pdf" || len(d.Parts) == 0 {
				t.Errorf("%s: read %d parts without error", rel, len(d.Parts))
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNoText) || !strings.HasPrefix(err.Error(), rel+": ") {
			t.Errorf("%s: %v, want a corrupt file named", rel, err)
		}
	}

	// A zip bomb named .docx: 160 MiB of spaces in word/document.xml, past the 128 MiB a document may inflate.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, flate.BestSpeed) })
	m, _ := zw.Create("word/document.xml")
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for range 160 {
		m.Write(chunk)
	}
	zw.Close()
	put(t, root, "bomb.docx", zb.Bytes())
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	start := time.Now()
	if _, err := read("bomb.docx"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "bomb.docx") {
		t.Errorf("zip bomb: %v, want too large, named", err)
	}
	runtime.ReadMemStats(&ms)
	if alloc := ms.TotalAlloc - before; alloc > 64<<20 {
		t.Errorf("the zip bomb cost %d MiB of allocations", alloc>>20)
	}
	t.Logf("zip bomb (%d KiB holding 160 MiB) refused in %v", zb.Len()>>10, time.Since(start))

	// A 1 GiB file (sparse): not opened.
	big := filepath.Join(root, "huge.txt")
	fh, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	fh.Truncate(1 << 30)
	fh.Close()
	if f := listing(t, root, Options{})["huge.txt"]; f.Skip != "too large" {
		t.Errorf("1 GiB file listed as %+v", f)
	}
	if _, err := read("huge.txt"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "huge.txt") {
		t.Errorf("1 GiB file: %v", err)
	}

	// UTF-16 with a byte order mark, and Latin-1: read, the conversion named.
	u := utf16.Encode([]rune("Grüße aus Köln\n\nDer Leuchtturm brennt.\n"))
	b := []byte{0xFF, 0xFE}
	for _, r := range u {
		b = append(b, byte(r), byte(r>>8))
	}
	put(t, root, "utf16.txt", b)
	put(t, root, "latin1.txt", []byte("Caf\xe9 au lait \xe0 la cr\xe8me\n"))
	for rel, want := range map[string][2]string{"utf16.txt": {"Der Leuchtturm brennt.", "UTF-16LE"}, "latin1.txt": {"Café au lait à la crème", "Windows-1252"}} {
		d, err := read(rel)
		if err != nil || !strings.Contains(d.Parts[0].Text, want[0]) && !strings.Contains(d.Title, want[0]) || !strings.Contains(d.Encoding, want[1]) {
			t.Errorf("%s: %v %q encoding %q", rel, err, dump(d), d.Encoding)
		}
	}

	// Unreadable: a file the process may not read (not as root), a
	// broken link.
	p := put(t, root, "secret.md", []byte("# s\n"))
	os.Chmod(p, 0)
	if _, err := read("secret.md"); os.Geteuid() != 0 && (err == nil || !strings.Contains(err.Error(), "secret.md")) {
		t.Errorf("unreadable: %v", err)
	}
	os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "gone.md"))
	if _, err := read("gone.md"); err == nil || Reason(err) != "unreadable" {
		t.Errorf("broken link: %v (%s)", err, Reason(err))
	}

	// Garbage of every format: an error naming the file, never a panic.
	for _, f := range Formats() {
		name := "garbage" + f.Extensions[0]
		put(t, root, name, bytes.Repeat([]byte{0xC3, 0x28, 0x00, 0x7B, 0x5B}, 2000))
		if _, err := read(name); err == nil || !strings.HasPrefix(err.Error(), name+": ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
