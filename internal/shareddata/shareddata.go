// Package shareddata finds the project's shared data folder for tests and
// benchmarks: ../shared beside the repository root (the nearest folder above
// the working directory that holds go.mod), where the public datasets
// (shared/datasets) and reference files live. It is the one place that
// knows where that folder is; it imports nothing from anna, so every test
// can use it.
package shareddata

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the shared folder, or an error saying why there is none.
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s, so no ../shared data", dir)
		}
		dir = parent
	}
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if _, err := os.Stat(shared); err != nil {
		return "", fmt.Errorf("shared data not found at %s (expected ../shared next to the repository root): %w", shared, err)
	}
	return shared, nil
}

// Path returns Dir() joined with rel when that path exists; otherwise it
// skips tb, saying what is missing.
func Path(tb testing.TB, rel ...string) string {
	tb.Helper()
	dir, err := Dir()
	if err != nil {
		tb.Skip(err)
	}
	p := filepath.Join(append([]string{dir}, rel...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared data %s absent: %v", p, err)
	}
	return p
}
