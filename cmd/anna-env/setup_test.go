package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDepsBuildWithoutNativeLibraries: anna-env (each build: cgo, no cgo,
// annapure) imports neither the native tokenizer nor ONNX Runtime's
// binding, so `go run .../cmd/anna-env setup` builds before
// libtokenizers.a exists.
func TestDepsBuildWithoutNativeLibraries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"cgo", []string{"CGO_ENABLED=1"}, nil},
		{"no cgo", []string{"CGO_ENABLED=0"}, nil},
		{"annapure", []string{"CGO_ENABLED=1"}, []string{"-tags", "annapure"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"list", "-deps"}, c.args...), ".")...)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("%s: go list: %v", c.name, err)
		}
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, "github.com/daulet/tokenizers") || strings.HasPrefix(p, "github.com/yalue/onnxruntime_go") {
				t.Errorf("%s build of anna-env imports %s", c.name, p)
			}
		}
		if c.name != "cgo" && !strings.Contains(string(out), "github.com/anna-search/anna/internal/setup\n") {
			t.Errorf("%s build of anna-env does not import internal/setup", c.name)
		}
	}
}

func TestSetupMode(t *testing.T) {
	for _, c := range []struct {
		args   []string
		native bool
		err    string
	}{
		{nil, nativeBuild, ""},
		{[]string{"--native"}, true, ""},
		{[]string{"--pure"}, false, ""},
		{[]string{"-pure"}, false, ""},
		{[]string{"--pure", "--native"}, false, "exclude each other"},
		{[]string{"--fast"}, false, "not defined: -fast"},
		{[]string{"models"}, false, `unexpected arguments ["models"]`},
	} {
		native, err := setupMode(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || native != c.native {
			t.Errorf("%q: native %v, %v; want %v", c.args, native, err, c.native)
		}
	}
}

// TestSetupNeedsNoNativeLibraries runs `go run . setup` with cgo on, in an
// empty ANNA_HOME and without libtokenizers.a on the linker's path: the
// default (native) path without cargo on PATH fails naming the pure path
// before any download; --pure gets as far as the registry (refused here
// by a proxy that is not listening), so the installer was built and ran.
func TestSetupNeedsNoNativeLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds anna-env twice (seconds warm)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler for a cgo build:", err)
	}
	anna := t.TempDir()
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, append([]string{"run", "."}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"CGO_ENABLED=1", "CGO_LDFLAGS=", "ANNA_HOME=" + anna, "ANNA_ORT_LIB="}, env...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("go run . %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String(), code
	}

	// PATH: the go command's folder and the C compiler's, no cargo.
	path := filepath.Dir(goBin) + string(os.PathListSeparator) + "/usr/bin" + string(os.PathListSeparator) + "/bin"
	_, err1 := os.Stat("/usr/bin/cargo")
	_, err2 := os.Stat("/bin/cargo")
	if err1 != nil && err2 != nil {
		out, code := run([]string{"PATH=" + path}, "setup")
		if code != 1 || !strings.Contains(out, "-tags annapure github.com/anna-search/anna/cmd/anna-env setup --native") ||
			!strings.Contains(out, "cargo (Rust) not found") || !strings.Contains(out, "anna-env setup --pure") {
			t.Errorf("native setup without cargo: exit %d\n%s", code, out)
		}
		if strings.Contains(out, "downloading") {
			t.Errorf("native setup without cargo downloaded:\n%s", out)
		}
	} else {
		t.Log("cargo is in /usr/bin or /bin: the native path without cargo is not tried")
	}

	proxy := []string{"HTTPS_PROXY=http://127.0.0.1:1", "https_proxy=http://127.0.0.1:1", "NO_PROXY=", "no_proxy="}
	out, code := run(proxy, "setup", "--pure")
	if code != 1 || !strings.Contains(out, "downloading all-MiniLM-L6-v2") || !strings.Contains(out, "https://registry.npmjs.org/") {
		t.Errorf("pure setup through a closed proxy: exit %d\n%s", code, out)
	}
	if es, _ := os.ReadDir(filepath.Join(anna, "downloads")); len(es) != 0 {
		t.Errorf("downloads kept after the failure: %v", es)
	}
}
