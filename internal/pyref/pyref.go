// Package pyref finds the Python references that tests compare against:
// the interpreter of the venv `make pydeps` creates under $ANNA_HOME (torch
// CPU, transformers, gguf-py, ...) and the scripts under tools/. A test that
// needs them is skipped, saying what is missing, when they are not there;
// nothing at run time depends on Python. The comparisons themselves read
// the references from committed golden files (internal/reftest), which
// need Python only to be regenerated.
package pyref

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// Python returns the venv's interpreter after checking that every module of
// imports imports there; otherwise tb is skipped with the reason.
func Python(tb testing.TB, imports ...string) string {
	tb.Helper()
	python, err := Find(imports...)
	if err != nil {
		tb.Skipf("skipping the Python reference: %v", err)
	}
	return python
}

// Clients returns the interpreter of the client packages' venv
// (scripts/pydeps-clients.sh: openai, langchain-openai, cohere,
// huggingface_hub, ollama, mcp) after checking that every module of imports
// imports there; otherwise tb is skipped with the reason.
func Clients(tb testing.TB, imports ...string) string {
	tb.Helper()
	python, err := find("venv-clients", imports)
	if err != nil {
		tb.Skipf("skipping the client test: %v", err)
	}
	return python
}

// Find returns the venv's interpreter after checking that every module of
// imports imports there, or an error that says what is missing.
func Find(imports ...string) (string, error) { return find("venv", imports) }

// find is Find in the venv named venv under $ANNA_HOME.
func find(venv string, imports []string) (string, error) {
	python := filepath.Join(home.Dir(), venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		return "", fmt.Errorf("%s not found (run `make pydeps`)", python)
	}
	for _, m := range imports {
		if out, err := exec.Command(python, "-c", "import "+m).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s does not import in %s (run `make pydeps`): %v\n%s", m, python, err, out)
		}
	}
	return python, nil
}

// Tool returns the absolute path of tools/name in this repository, found
// from the go.mod above the working directory.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "tools", name)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("pyref: go.mod not found above the test directory")
		}
		dir = parent
	}
}
