package textdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, root, rel, body string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFolder(t *testing.T) {
	root := t.TempDir()
	write(t, root, "b/notes.md", "intro\n## Plan for 2025 ##\nbody text\n")
	write(t, root, "a.MD", "---\ntitle: \"Front matter\"\ntags: x\n---\n# Heading\ntext\n")
	write(t, root, "plain.txt", "# not a heading in text files\n")
	write(t, root, "c/bad.txt", "caf\xe9 au lait")
	write(t, root, "bin.txt", "abc\x00def")
	write(t, root, "big.rst", strings.Repeat("x", 200))
	write(t, root, ".hidden/x.md", "# secret")
	write(t, root, ".x.md", "# secret")
	write(t, root, "image.png", "\x89PNG")
	if err := os.Symlink(root, filepath.Join(root, "loop")); err != nil {
		t.Fatal(err)
	}
	files, err := Files(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.MD", "b/notes.md", "big.rst", "bin.txt", "c/bad.txt", "plain.txt"}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("files %q, want %q", files, want)
	}
	var skipped, invalid []string
	var docs []Doc
	opt := Options{MaxBytes: 100, OnSkip: func(p, why string) { skipped = append(skipped, p+": "+why) }, OnInvalidUTF8: func(p string) { invalid = append(invalid, p) }}
	if err := Walk(context.Background(), root, files, opt, func(n int, d Doc) error {
		if files[n-1] != d.ID {
			t.Errorf("document %d is %s, listed %s", n, d.ID, files[n-1])
		}
		docs = append(docs, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]Doc{}
	for _, d := range docs {
		got[d.ID] = d
	}
	for id, w := range map[string]Doc{
		"a.MD":       {ID: "a.MD", Title: "Front matter", Text: "# Heading\ntext\n", Ext: "md"},
		"b/notes.md": {ID: "b/notes.md", Title: "Plan for 2025", Text: "intro\n\nbody text", Ext: "md"},
		"plain.txt":  {ID: "plain.txt", Title: "plain", Text: "# not a heading in text files\n", Ext: "txt"},
		"c/bad.txt":  {ID: "c/bad.txt", Title: "bad", Text: "caf\uFFFD au lait", Ext: "txt", InvalidUTF8: true},
	} {
		if !reflect.DeepEqual(got[id], w) {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	if len(docs) != 4 || len(skipped) != 2 || !strings.Contains(skipped[0], "big.rst") || !strings.Contains(skipped[0], "200 bytes") ||
		!strings.Contains(skipped[1], "bin.txt") || !strings.Contains(skipped[1], "binary") {
		t.Errorf("%d read, skipped %q", len(docs), skipped)
	}
	if !reflect.DeepEqual(invalid, []string{"c/bad.txt"}) {
		t.Errorf("invalid UTF-8 reported: %q", invalid)
	}
}

func TestFolderErrors(t *testing.T) {
	if _, err := Files(context.Background(), filepath.Join(t.TempDir(), "nope"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing folder: %v", err)
	}
	f := filepath.Join(t.TempDir(), "f.txt")
	os.WriteFile(f, []byte("x"), 0o644)
	if _, err := Files(context.Background(), f, Options{}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a file as the root: %v", err)
	}
	root := t.TempDir()
	for i := range 50 {
		write(t, root, filepath.Join("d", strings.Repeat("x", i+1)+".txt"), "text")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Files(ctx, root, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled listing: %v", err)
	}
	files, _ := Files(context.Background(), root, Options{})
	n := 0
	ctx, cancel = context.WithCancel(context.Background())
	start := time.Now()
	err := Walk(ctx, root, files, Options{}, func(int, Doc) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 3 || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled walk: %v after %d files", err, n)
	}
}
