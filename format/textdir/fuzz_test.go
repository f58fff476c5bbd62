package textdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRead: a text file as the folder reader reads it, as Markdown (front
// matter, first heading) and as plain text: it is skipped (binary) or read
// into a title of one line and a text no longer than the file, both valid
// UTF-8, and the front matter's title is the title.
func FuzzRead(f *testing.F) {
	f.Add([]byte("---\ntitle: \"Tides\"\ndate: 2024\n---\n# Heading\nbody text\n"))
	f.Add([]byte("\uFEFF# A title #\n\nsome text\n"))
	f.Add([]byte("---\nno end of the front matter\n# h\n"))
	f.Add([]byte("plain\x00binary"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		for _, name := range []string{"note.md", "note.txt"} {
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := Read(root, name, Options{})
			if err != nil {
				continue
			}
			if strings.ContainsAny(d.Title, "\n") && name == "note.md" {
				t.Fatalf("%s: a title of several lines: %q", name, d.Title)
			}
			if len(d.Text) > len(data)+len(data)/2+16 { // invalid UTF-8 bytes become 3-byte U+FFFD
				t.Fatalf("%s: %d bytes of text from a %d-byte file", name, len(d.Text), len(data))
			}
			if !utf8.ValidString(d.Title) || !utf8.ValidString(d.Text) {
				t.Fatalf("%s: invalid UTF-8 read", name)
			}
			if name == "note.md" && strings.HasPrefix(string(data), "---\ntitle: ") {
				if line, _, ok := strings.Cut(strings.TrimPrefix(string(data), "---\ntitle: "), "\n"); ok && strings.Contains(string(data), "\n---") && utf8.ValidString(line) {
					if want := strings.Trim(strings.TrimSpace(line), `"'`); want != "" && d.Title != want {
						t.Fatalf("front matter title %q read as %q", want, d.Title)
					}
				}
			}
		}
	})
}
