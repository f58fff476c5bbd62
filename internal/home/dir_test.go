package home

import (
	"path/filepath"
	"testing"
)

// TestDirDefault: with $ANNA_HOME unset, Dir is ~/.cache/anna whatever
// $XDG_CACHE_HOME says — the folder the Makefile, the installer and
// internal/train/cuda use — and $ANNA_HOME, when set, wins.
func TestDirDefault(t *testing.T) {
	h := t.TempDir()
	t.Setenv("HOME", h)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(h, "elsewhere"))
	t.Setenv("ANNA_HOME", "")
	if got, want := Dir(), filepath.Join(h, ".cache", "anna"); got != want {
		t.Errorf("Dir() = %s with ANNA_HOME unset, want %s", got, want)
	}
	t.Setenv("ANNA_HOME", "/some/where")
	if got := Dir(); got != "/some/where" {
		t.Errorf("Dir() = %s, want $ANNA_HOME /some/where", got)
	}
}
