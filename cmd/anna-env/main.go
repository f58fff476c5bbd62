// Command anna-env prints the environment a Go program that uses anna needs
// to build and run, and installs what it needs.
//
// anna's engine links Hugging Face's tokenizers (a Rust static library,
// libtokenizers.a, through cgo) and loads ONNX Runtime and the default model
// from $ANNA_HOME (default ~/.cache/anna) at run time. None of that comes
// with `go get`. In a module that requires github.com/anna-search/anna:
//
//	go run github.com/anna-search/anna/cmd/anna-env setup   # once: installs into $ANNA_HOME
//	eval "$(go run github.com/anna-search/anna/cmd/anna-env)"
//	go run .
//
// Without arguments it prints, for a POSIX shell, the export line with
// ANNA_HOME and CGO_LDFLAGS, and exits 1 (saying what is missing and how to
// install it, on stderr) when something is not installed. It is plain Go,
// so it builds before libtokenizers.a exists.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/internal/home"
)

const modulePath = "github.com/anna-search/anna"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	switch {
	case len(args) == 0:
		return printEnv()
	case len(args) == 1 && args[0] == "setup":
		if err := setup(); err != nil {
			fmt.Fprintf(os.Stderr, "anna-env setup: %v\n", err)
			return 1
		}
		return 0
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help"):
		fmt.Println(`usage: anna-env          print "export ANNA_HOME=... CGO_LDFLAGS=..." for eval in a shell
       anna-env setup    install ONNX Runtime, the default model and libtokenizers.a into $ANNA_HOME`)
		return 0
	}
	fmt.Fprintf(os.Stderr, "anna-env: unknown arguments %q (see anna-env --help)\n", args)
	return 2
}

// missing lists what is not installed.
func missing() []string {
	var out []string
	for _, f := range []struct{ what, path string }{
		{"libtokenizers.a (linked through cgo)", filepath.Join(home.TokenizersLibDir(), "libtokenizers.a")},
		{"the ONNX Runtime library", home.ORTLibrary()},
		{"the default model", filepath.Join(home.DefaultModel(), "model.onnx")},
	} {
		if _, err := os.Stat(f.path); err != nil {
			out = append(out, fmt.Sprintf("%s: %s", f.what, f.path))
		}
	}
	return out
}

func printEnv() int {
	flags := "-L" + home.TokenizersLibDir()
	if prev := os.Getenv("CGO_LDFLAGS"); prev != "" && !strings.Contains(prev, flags) {
		flags += " " + prev
	}
	fmt.Printf("export ANNA_HOME=%s CGO_LDFLAGS=%s\n", shellQuote(home.Dir()), shellQuote(flags))
	if m := missing(); len(m) > 0 {
		fmt.Fprintf(os.Stderr, "anna-env: not installed under %s:\n  %s\ninstall with: go run %s/cmd/anna-env setup\n", home.Dir(), strings.Join(m, "\n  "), modulePath)
		return 1
	}
	return 0
}

// setup runs the module's own installer (scripts/setup.sh, the one `make
// setup` runs) from wherever the module is: a checkout or the module cache.
func setup() error {
	dir, err := moduleDir()
	if err != nil {
		return err
	}
	script := filepath.Join(dir, "scripts", "setup.sh")
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("the installer is not in the module at %s: %w", dir, err)
	}
	cmd := exec.Command("bash", script)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "ANNA_HOME="+home.Dir())
	return cmd.Run()
}

// moduleDir finds anna's source: the enclosing checkout when run inside
// one, else the module cache entry the current module requires.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go list -m %s: %s", modulePath, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("go list -m %s: %w", modulePath, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: no directory (is the module downloaded?)", modulePath)
	}
	return dir, nil
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
