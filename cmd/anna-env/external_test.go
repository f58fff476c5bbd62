package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// TestExternalModule builds and runs the README's library example, verbatim,
// as a program in a module of its own outside the repository that requires
// anna through a replace directive to this checkout — what a user who
// `go get`s anna does. It takes the cgo settings from anna-env, as the
// README tells users to. Go ignores the replace directives of dependencies,
// so this fails if anna needs one of its own (it used to, for its HNSW fork).
func TestExternalModule(t *testing.T) {
	if _, err := home.RequireDefaultModel(); err != nil {
		t.Skip(err)
	}
	if testing.Short() {
		t.Skip("builds a module from scratch (about a minute)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	snippet := libraryExample(t, string(readme))
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/annauser\n\ngo 1.26\n\nrequire github.com/anna-search/anna v0.0.0-00010101000000-000000000000\n\nreplace github.com/anna-search/anna => "+root+"\n")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	write("main.go", snippet)

	// As "go get" would: -mod=mod lets the go command add to go.mod what
	// the build needs, reading the module cache first and the environment's
	// GOPROXY for the rest — after anna's own build that is a few go.mod
	// files its graph never loads (roaring/v2's requirements, as a
	// dependency of the user's module), so a machine with a cold module
	// cache fetches them once. The copied go.sum vouches for them. Not
	// "go mod tidy": it would also want the modules that the tests of
	// anna's dependencies import.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	exports := goCmd("run", "github.com/anna-search/anna/cmd/anna-env")
	m := regexp.MustCompile(`^export ANNA_HOME=(\S+) CGO_LDFLAGS=(\S+)\n$`).FindStringSubmatch(exports)
	if m == nil {
		t.Fatalf("anna-env printed %q", exports)
	}
	env = append(env, "ANNA_HOME="+strings.Trim(m[1], "'"), "CGO_LDFLAGS="+strings.Trim(m[2], "'"))
	out := goCmd("run", ".")
	t.Logf("the README's library example, run from %s:\n%s", dir, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "hnsw ") {
		t.Fatalf("unexpected output of the README example:\n%s", out)
	}
}

// libraryExample returns the Go program in the README's library section:
// the first ```go block after the "## The library" heading.
func libraryExample(t *testing.T, readme string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## The library")
	if !ok {
		t.Fatal(`README.md has no "## The library" section`)
	}
	_, code, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatal("README.md's library section has no ```go block")
	}
	code, _, ok = strings.Cut(code, "\n```")
	if !ok || !strings.HasPrefix(code, "package main") {
		t.Fatal("README.md's library example must be a whole program (package main ...), closed by ```")
	}
	return code + "\n"
}
