package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuantizeFlag: a --quantize other than int8 or int4 is a usage error
// naming the flag and the value, exit 2, for import and install, before
// anything is read, downloaded or written; int4 for an encoder is refused
// before its archive is downloaded.
func TestQuantizeFlag(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"models", "import", "--quantize", "int3", "no-such-src", dest},
		{"models", "import", "--quantize", "INT8", "no-such-src", dest},
		{"models", "install", "all-MiniLM-L6-v2", "--quantize", "fp16"},
	} {
		r := annactl(t, "", args...)
		value := ""
		for i, a := range args {
			if a == "--quantize" {
				value = args[i+1]
			}
		}
		if r.code != 2 || !strings.Contains(r.stderr, `--quantize "`+value+`"`) || !strings.Contains(r.stderr, "want int8") {
			t.Errorf("annactl %s: want exit 2 naming --quantize and int8, got %s", strings.Join(args, " "), r)
		}
	}
	if _, err := os.Stat(dest); err == nil {
		t.Error("a refused import created its destination")
	}
	home := ownHome(t)
	r := annactl(t, "", "models", "install", "bge-small-en-v1.5", "--quantize", "int4")
	if r.code == 0 || !strings.Contains(r.stderr, "int4 is for decoders") {
		t.Errorf("int4 bge-small: want a refusal saying int4 is for decoders, got %s", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "downloads")); len(entries) > 0 {
		t.Errorf("a refused install downloaded %d files", len(entries))
	}
}
