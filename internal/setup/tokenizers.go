package setup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/safe"
)

// cargo returns the cargo command's path, or ErrNoCargo naming the pure
// path.
func (o Options) cargo() (string, error) {
	name := o.Cargo
	if name == "" {
		name = "cargo"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("setup: %w: libtokenizers.a, the Rust tokenizer that cgo builds of anna link, is built with cargo (%v); install Rust (https://rustup.rs, or Debian: apt-get install cargo), or take the pure path, which needs nothing but Go: `anna-env setup --pure`, and build with CGO_ENABLED=0 (or -tags annapure)", ErrNoCargo, err)
	}
	return p, nil
}

// Tokenizers builds libtokenizers.a into Paths.TokenizersLib unless it is
// there, and returns its path: TokenizersModule's source (Options.
// TokenizersSource, else the module cache's copy, downloaded by `go mod
// download` if needed) is copied to Paths.Build, built with `cargo build
// --release --locked --lib`, and the library copied into place through a
// temporary file. The build folder is removed after, built or not.
func Tokenizers(ctx context.Context, o Options) (string, error) {
	ctx = safe.Ctx(ctx)
	dest := filepath.Join(o.Paths.TokenizersLib, "libtokenizers.a")
	if exists(dest) {
		o.logf("libtokenizers: %s (installed)", dest)
		return dest, nil
	}
	cargo, err := o.cargo()
	if err != nil {
		return "", err
	}
	src := o.TokenizersSource
	if src == "" {
		if src, err = o.moduleDir(ctx, TokenizersModule, home.TokenizersVersion); err != nil {
			return "", err
		}
	}
	build := filepath.Join(o.Paths.Build, "tokenizers-"+home.TokenizersVersion)
	if err := os.RemoveAll(build); err != nil {
		return "", fmt.Errorf("setup: %w", err)
	}
	defer os.RemoveAll(build)
	if err := copyTree(ctx, src, build); err != nil {
		return "", fmt.Errorf("setup: copying %s: %w", src, err)
	}
	o.logf("building libtokenizers.a with cargo from %s@%s (a few minutes, once)", TokenizersModule, home.TokenizersVersion)
	cmd := exec.CommandContext(ctx, cargo, "build", "--release", "--locked", "--lib")
	cmd.Dir = build
	var tail bytes.Buffer
	out := io.Writer(&tail)
	if o.Log != nil {
		out = io.MultiWriter(o.Log, &tail)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return "", cerr
		}
		return "", fmt.Errorf("setup: cargo build of %s in %s: %w\n%s", TokenizersModule, build, err, lastLines(tail.String(), 20))
	}
	lib := filepath.Join(build, "target", "release", "libtokenizers.a")
	if err := atomicfile.Copy(dest, lib); err != nil {
		return "", fmt.Errorf("setup: installing %s: %w", dest, err)
	}
	o.logf("libtokenizers: %s", dest)
	return dest, nil
}

// moduleDir returns the module cache folder of path@version (`go mod
// download -json`, which fetches it through the module proxy if needed).
func (o Options) moduleDir(ctx context.Context, path, version string) (string, error) {
	goCmd := o.Go
	if goCmd == "" {
		goCmd = "go"
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", path+"@"+version)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil || info.Dir == "" {
		msg := strings.TrimSpace(info.Error + " " + stderr.String())
		return "", fmt.Errorf("setup: go mod download %s@%s: %v %s", path, version, runErr, msg)
	}
	return info.Dir, nil
}

// copyTree copies the folder src to dst (files 0644, folders 0755: the
// module cache's copies are read-only).
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, to)
		default:
			return errors.New(p + ": not a regular file or folder")
		}
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
