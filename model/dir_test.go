package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

func TestOpenDir(t *testing.T) {
	src := home.DefaultModel()
	if _, err := os.Stat(filepath.Join(src, ONNXFile)); err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	d, err := OpenDir(src)
	if err != nil || d.Manifest.Dim != d.Config.HiddenSize || d.ONNXPath != filepath.Join(src, ONNXFile) {
		t.Fatalf("OpenDir(default model): %+v, %v", d, err)
	}
	// A config whose hidden size disagrees with the manifest is refused,
	// naming both numbers; a missing graph is named too.
	dir := t.TempDir()
	for _, f := range []string{ManifestFile, "config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			b = []byte(strings.Replace(string(b), `"hidden_size": 384`, `"hidden_size": 768`, 1))
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "hidden_size 768") || !strings.Contains(err.Error(), "dim 384") {
		t.Fatalf("mismatched hidden size: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(src, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), ONNXFile) {
		t.Fatalf("missing graph: %v", err)
	}
}
