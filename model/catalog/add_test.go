package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/model"
)

// TestAdd installs a model directory under a name, refuses one whose files
// no longer match its manifest (leaving what was installed), and replaces
// an older install.
func TestAdd(t *testing.T) {
	ctx := context.Background()
	src, models := filepath.Join(t.TempDir(), "trained"), t.TempDir()
	write := func(graph string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(src, "context"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(src, "model.onnx"), []byte(graph), 0o644)
		os.WriteFile(filepath.Join(src, "context", "note.txt"), []byte("a subdirectory goes too"), 0o644)
		sum, err := fileSHA256(filepath.Join(src, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		fp := model.NewFingerprinter()
		fp.Write([]byte(graph))
		m := &model.Manifest{Name: "trained", Architecture: "bert", Task: model.TaskRerank, NumLabels: 1, Dim: 8, MaxLength: 16,
			Fingerprint: fp.Sum("", false, 16), Files: map[string]string{"model.onnx": sum}}
		if err := model.WriteManifest(src, m); err != nil {
			t.Fatal(err)
		}
	}
	write("graph one")
	m, err := Add(ctx, src, models, "rr")
	if err != nil {
		t.Fatal(err)
	}
	back, err := model.LoadManifest(filepath.Join(models, "rr"))
	if err != nil || back.Name != "rr" || m.Name != "rr" || back.Fingerprint != m.Fingerprint {
		t.Fatalf("installed manifest %+v, %v", back, err)
	}
	if b, _ := os.ReadFile(filepath.Join(models, "rr", "context", "note.txt")); string(b) != "a subdirectory goes too" {
		t.Errorf("subdirectory not copied: %q", b)
	}

	// A file changed after the manifest was written: refused, nothing replaced.
	os.WriteFile(filepath.Join(src, "model.onnx"), []byte("graph tampered"), 0o644)
	if _, err := Add(ctx, src, models, "rr"); err == nil || !strings.Contains(err.Error(), "model.onnx: sha256") {
		t.Fatalf("tampered source: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(models, "rr", "model.onnx")); string(b) != "graph one" {
		t.Fatalf("a refused add changed the install: %q", b)
	}
	for _, bad := range []string{"", "a/b", "..", "."} {
		if _, err := Add(ctx, src, models, bad); err == nil || !strings.Contains(err.Error(), "one path element") {
			t.Errorf("name %q: %v", bad, err)
		}
	}

	write("graph two")
	if _, err := Add(ctx, src, models, "rr"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(models, "rr", "model.onnx")); string(b) != "graph two" {
		t.Fatalf("not replaced: %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(models, "rr.*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := Add(ctx, filepath.Join(models, "rr"), models, "rr"); err == nil || !strings.Contains(err.Error(), "already installed") {
		t.Errorf("adding an install onto itself: %v", err)
	}
}
