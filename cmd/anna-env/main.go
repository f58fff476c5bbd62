// Command anna-env prints the environment a Go program that uses anna needs
// to build and run, and installs what it needs with nothing but Go.
//
// What a program needs depends on how it is built. With cgo (the default)
// and without the annapure tag, anna's engine links Hugging Face's
// tokenizers (a Rust static library, libtokenizers.a) and loads ONNX
// Runtime: the native path. With CGO_ENABLED=0 (or -tags annapure) it
// tokenizes and runs the model in Go: the pure path, which needs only the
// default model. Either way the files live in $ANNA_HOME (default
// ~/.cache/anna), and none of them comes with `go get`. In a module that
// requires github.com/anna-search/anna:
//
//	go run github.com/anna-search/anna/cmd/anna-env setup   # once: installs into $ANNA_HOME
//	eval "$(go run github.com/anna-search/anna/cmd/anna-env)"
//	go run .
//
// or, on the pure path (no cargo, no C toolchain):
//
//	CGO_ENABLED=0 go run github.com/anna-search/anna/cmd/anna-env setup
//	CGO_ENABLED=0 go run .
//
// `setup` installs what a build made like this command's own needs:
// --native or --pure choose. Pure: the default model (its npm tarball,
// converted to ONNX in Go). Native adds ONNX Runtime's shared library
// (from its npm tarball) and libtokenizers.a (cargo build; missing cargo is
// an error naming the pure path). Every download is pinned by URL and
// sha256 and stops on Ctrl-C; internal/setup is the installer, and `make
// setup` (scripts/setup.sh) runs `setup --native`.
//
// The model's converter imports the tokenizer package, which a native
// build links to libtokenizers.a, so this command never imports it: built
// natively, `setup` runs the installer in a pure build of itself (`go run
// -tags annapure github.com/anna-search/anna/cmd/anna-env setup --native`,
// from the current module, or at this command's version outside one).
// That is why `anna-env` builds before libtokenizers.a exists (a test
// checks its dependencies).
//
// Without arguments it prints, for a POSIX shell, the export line with
// ANNA_HOME and CGO_LDFLAGS, and exits 1 (saying what is missing and how to
// install it, on stderr) when something its path needs is not installed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/anna-search/anna/internal/home"
)

const modulePath = "github.com/anna-search/anna"

const usage = `usage: anna-env                         print "export ANNA_HOME=... CGO_LDFLAGS=..." for eval in a shell
       anna-env setup [--native|--pure]  install into $ANNA_HOME what anna needs: the default model (pure),
                                         and ONNX Runtime and libtokenizers.a (native); the default is
                                         the path of this build (` + "`CGO_ENABLED=0 go run`" + `: pure)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return printEnv()
	case args[0] == "setup":
		native, err := setupMode(args[1:])
		if err != nil {
			fmt.Fprintf(stderr, "anna-env setup: %v\n%s\n", err, usage)
			return 2
		}
		if err := install(ctx, native, stderr); err != nil {
			var ce childExit
			if errors.As(err, &ce) { // the installer said why
				return int(ce)
			}
			fmt.Fprintf(stderr, "anna-env: %v\n", err) // the installer's errors start "setup: "
			return 1
		}
		return 0
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help"):
		fmt.Println(usage)
		return 0
	}
	fmt.Fprintf(stderr, "anna-env: unknown arguments %q (see anna-env --help)\n", args)
	return 2
}

// setupMode parses setup's flags: --native or --pure, else this build's
// own path (nativeBuild).
func setupMode(args []string) (native bool, err error) {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Bool("native", false, "")
	p := fs.Bool("pure", false, "")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	switch {
	case fs.NArg() > 0:
		return false, fmt.Errorf("unexpected arguments %q", fs.Args())
	case *n && *p:
		return false, errors.New("--native and --pure exclude each other")
	case *n:
		return true, nil
	case *p:
		return false, nil
	}
	return nativeBuild, nil
}

// childExit is the exit code of an installer that has reported its error.
type childExit int

func (c childExit) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// missing lists what is not installed that this build's path needs.
func missing() []string {
	need := []struct{ what, path string }{
		{"the default model", filepath.Join(home.DefaultModel(), "model.onnx")},
		{"the default model's " + home.DefaultModelQuantization + " form (what embeds when no model is named)", filepath.Join(home.DefaultEmbedModel(), "model.onnx")},
	}
	if nativeBuild {
		need = append(need, struct{ what, path string }{"libtokenizers.a (linked through cgo)", filepath.Join(home.TokenizersLibDir(), "libtokenizers.a")},
			struct{ what, path string }{"the ONNX Runtime library", home.ORTLibrary()})
	}
	var out []string
	for _, f := range need {
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
		fmt.Fprintf(os.Stderr, "anna-env: not installed under %s:\n  %s\ninstall with: go run %s/cmd/anna-env setup (CGO_ENABLED=0 before it for the pure path: the model only)\n", home.Dir(), strings.Join(m, "\n  "), modulePath)
		return 1
	}
	return 0
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
