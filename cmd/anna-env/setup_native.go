//go:build cgo && !annapure

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"time"

	"github.com/anna-search/anna/internal/home"
)

// nativeBuild is true: this build's anna links libtokenizers.a and loads
// ONNX Runtime.
const nativeBuild = true

// install runs the installer in a pure build of this command (`go run
// -tags annapure`): the installer converts the model, and the converter
// imports the tokenizer package, which a native build links to the
// libtokenizers.a the installer may be about to build. stdin, stdout and
// the environment pass through; on ctx's cancellation the child is sent
// an interrupt (it cleans up and exits) and killed 5 s later.
func install(ctx context.Context, native bool, stderr io.Writer) error {
	target, err := pureTarget()
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	mode := "--pure"
	if native {
		mode = "--native"
	}
	args := []string{"run", "-tags", "annapure", target, "setup", mode}
	fmt.Fprintf(stderr, "anna-env setup: go %s (the installer, built without the native tokenizer)\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, stderr
	cmd.Env = append(os.Environ(), "ANNA_HOME="+home.Dir())
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 && ctx.Err() == nil {
		return childExit(ee.ExitCode())
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("setup: go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// pureTarget is the package `go run` builds: this command by import path
// in the current module (anna's checkout, or a module that requires anna),
// else at this binary's version of anna.
func pureTarget() (string, error) {
	pkg := modulePath + "/cmd/anna-env"
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		return pkg, nil
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		if bi.Main.Path != modulePath {
			v = ""
			for _, d := range bi.Deps {
				if d.Path == modulePath {
					v = d.Version
				}
			}
		}
		if v != "" && v != "(devel)" {
			return pkg + "@" + v, nil
		}
	}
	why := "no module requires it here"
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		why = strings.TrimSpace(string(ee.Stderr))
	} else if err != nil {
		why = err.Error()
	}
	return "", fmt.Errorf("the installer is run with `go run -tags annapure %s`, but go list -m %s: %s; run anna-env from a module that requires %s, or build it with CGO_ENABLED=0", pkg, modulePath, why, modulePath)
}
