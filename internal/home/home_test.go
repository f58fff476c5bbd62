package home

import (
	"strings"
	"testing"
)

// The message must help a program outside this repository, where there is
// no Makefile: it names cmd/anna-env.
func TestRequireDefaultModelNamesAnnaEnv(t *testing.T) {
	t.Setenv("ANNA_HOME", t.TempDir())
	_, err := RequireDefaultModel()
	if err == nil {
		t.Fatal("no error for an empty ANNA_HOME")
	}
	if msg := err.Error(); !strings.Contains(msg, "cmd/anna-env setup") || strings.Contains(msg, "make setup") {
		t.Errorf("error should name `anna-env setup` and not `make setup`: %q", msg)
	}
}
