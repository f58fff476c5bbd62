package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/tokenizer"
)

// TestPureGoBuilds builds annactl with CGO_ENABLED=0 for this machine and
// runs it, and compiles it with CGO_ENABLED=0 for darwin/arm64,
// windows/amd64 and linux/arm64 (go list -export: every package compiled,
// no link): every package annactl links must build without cgo (ONNX
// Runtime, the native tokenizer and the CUDA loader stay behind build
// constraints), and the host binary must say that it runs pure Go. The
// go command's cache is shared: warm, the host build takes about 12 s
// (the link) and each cross-compile under a second; cold, a minute or two
// each on two busy cores.
func TestPureGoBuilds(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	for _, target := range []struct{ goos, goarch string }{{"", ""}, {"darwin", "arm64"}, {"windows", "amd64"}, {"linux", "arm64"}} {
		name := "host"
		env := append(os.Environ(), "CGO_ENABLED=0")
		args := []string{"build", "-o", filepath.Join(t.TempDir(), "annactl"), "."}
		if target.goos != "" {
			name = target.goos + "/" + target.goarch
			env = append(env, "GOOS="+target.goos, "GOARCH="+target.goarch)
			args = []string{"list", "-export", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "."}
		}
		start := time.Now()
		cmd := exec.Command(gobin, args...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(b))) > 0 {
			t.Errorf("CGO_ENABLED=0 go %s for %s: %v\n%s", args[0], name, err, b)
			continue
		}
		t.Logf("CGO_ENABLED=0 go %s for %s: %.1f s", args[0], name, time.Since(start).Seconds())
		if name != "host" {
			continue
		}
		b, err = exec.Command(args[2], "--version").CombinedOutput()
		if err != nil {
			t.Errorf("%s --version: %v\n%s", args[2], err, b)
		} else if want := "(inference: go, tokenizer: pure)"; !strings.Contains(string(b), want) {
			t.Errorf("%s --version printed %q, want it to contain %q", args[2], b, want)
		}
	}
}

// TestRuntimeLine: the tokenizer named by --version and stats is the one
// tokenizer.Load gives in this build, and the inference backend is the
// encoder's default.
func TestRuntimeLine(t *testing.T) {
	path := filepath.Join(home.DefaultModel(), "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no installed default model: %v", err)
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	if got := tok.Implementation(); got != tokenizerImpl {
		t.Errorf("tokenizer.Load gives the %s implementation, the runtime line says %s", got, tokenizerImpl)
	}
	if l, want := runtimeLine(), "inference: "+encoder.DefaultBackend()+","; !strings.Contains(l, want) {
		t.Errorf("runtime line %q does not contain %q", l, want)
	}
}
