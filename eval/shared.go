package eval

import (
	"fmt"
	"os"
	"path/filepath"
)

// SharedDir finds the project's shared data directory: ../shared next to the
// nearest directory above the working directory that holds go.mod. Tests
// call it and t.Skip with the error when the data is absent.
func SharedDir() (string, error) {
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
			return "", fmt.Errorf("no go.mod above the working directory, so no ../shared data")
		}
		dir = parent
	}
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if _, err := os.Stat(filepath.Join(shared, "datasets")); err != nil {
		return "", fmt.Errorf("shared data not found at %s (expected ../shared next to the repository root)", shared)
	}
	return shared, nil
}
