package cuda

import (
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLaunchersBesideKernels: each op's launcher sits beside its kernel —
// the kernels of kernels/X.cu are launched from X.go (named as the CPU's op
// in internal/ops where there is one) — and kernelSigs lists exactly the
// kernels the sources define.
func TestLaunchersBesideKernels(t *testing.T) {
	defined := regexp.MustCompile(`extern "C" __global__ void (\w+)\(`)
	launched := regexp.MustCompile(`\.launch\("(\w+)"`)
	home := map[string]string{} // kernel → the .cu file defining it
	names, err := fs.Glob(kernelFS, "kernels/*.cu")
	if err != nil || len(names) == 0 {
		t.Fatalf("no kernels: %v", err)
	}
	for _, n := range names {
		src, err := fs.ReadFile(kernelFS, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range defined.FindAllStringSubmatch(string(src), -1) {
			if f, dup := home[m[1]]; dup {
				t.Errorf("kernel %s is defined in %s and %s", m[1], f, n)
			}
			home[m[1]] = path.Base(n)
		}
	}
	for k := range kernelSigs {
		if home[k] == "" {
			t.Errorf("kernelSigs lists %s, which no kernels/*.cu defines", k)
		}
	}
	for k, f := range home {
		if _, ok := kernelSigs[k]; !ok {
			t.Errorf("%s defines %s, which kernelSigs does not list", f, k)
		}
	}
	goFiles, err := fs.Glob(os.DirFS("."), "*.go")
	if err != nil {
		t.Fatal(err)
	}
	from := map[string][]string{} // kernel → the Go files launching it
	for _, g := range goFiles {
		if strings.HasSuffix(g, "_test.go") {
			continue
		}
		src, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range launched.FindAllStringSubmatch(string(src), -1) {
			from[m[1]] = append(from[m[1]], g)
		}
	}
	for k, f := range home {
		launcher := strings.TrimSuffix(f, ".cu") + ".go"
		if !slices.Contains(from[k], launcher) {
			t.Errorf("kernels/%s's %s is launched from %v, not from %s beside it", f, k, from[k], launcher)
		}
	}
	for k, gs := range from {
		if home[k] == "" {
			t.Errorf("%v launch %s, which no kernels/*.cu defines", gs, k)
		}
	}
}
