package cuda

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// driverPresent reports whether the system loader finds a CUDA driver, in
// which case the "absent" messages cannot be produced with the real names.
func driverPresent() bool {
	h, err := dlopen("libcuda.so.1", false)
	return err == nil && h != nil
}

// TestOpenWithoutDriver checks Open's exact error on a machine with no
// CUDA driver (this project's build and CI machines).
func TestOpenWithoutDriver(t *testing.T) {
	if driverPresent() {
		t.Skip("libcuda.so.1 is installed here; the no-driver message is checked on machines without one")
	}
	dir := t.TempDir()
	_, err := Open(context.Background(), Options{LibDirs: []string{dir}})
	if err == nil {
		t.Fatal("Open succeeded without a driver")
	}
	want := "no CUDA driver (libcuda.so.1) found: tried " +
		dir + "/libcuda.so.1, " + dir + "/libcuda.so, libcuda.so.1, libcuda.so: " +
		"libcuda.so.1: cannot open shared object file: No such file or directory"
	if err.Error() != want {
		t.Errorf("error\n got %q\nwant %q", err, want)
	}
	if errors.Is(err, ErrNoGPU) {
		t.Error("a missing driver is reported as ErrNoGPU; it should read as a missing library")
	}
	// The default search (SearchDirs) must fail the same way, naming the
	// system sonames last.
	_, err = Open(context.Background(), Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "no CUDA driver (libcuda.so.1) found: tried ") ||
		!strings.Contains(err.Error(), "libcuda.so.1, libcuda.so: ") {
		t.Errorf("default search error: %v", err)
	}
}

// TestMissingLibraryMessages checks the messages for cuBLAS and NVRTC (and
// the driver) when no candidate exists, using names that cannot exist so
// that the test means the same on a machine with CUDA installed.
func TestMissingLibraryMessages(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		s    spec
		want string
	}{
		{spec{lib: libDriver, what: driverSpec.what, sonames: []string{"libcuda-absent.so.1"}, system: true},
			"no CUDA driver (libcuda.so.1) found: tried " + dir + "/libcuda-absent.so.1, libcuda-absent.so.1: " +
				"libcuda-absent.so.1: cannot open shared object file: No such file or directory"},
		{spec{lib: libCublas, what: cublasSpec.what, sonames: []string{"libcublas-absent.so.13", "libcublas-absent.so.12"}, system: true},
			"cuBLAS not found (set ANNA_CUDA_LIBS to the folder holding libcublas-absent.so.13): tried " +
				dir + "/libcublas-absent.so.13, " + dir + "/libcublas-absent.so.12, libcublas-absent.so.13, libcublas-absent.so.12: " +
				"libcublas-absent.so.13: cannot open shared object file: No such file or directory"},
		{spec{lib: libNVRTC, what: nvrtcSpec.what, sonames: []string{"libnvrtc-absent.so.13"}},
			"NVRTC not found (set ANNA_CUDA_LIBS to the folder holding libnvrtc-absent.so.13): tried " + dir + "/libnvrtc-absent.so.13"},
	}
	for _, c := range cases {
		_, err := open(c.s, []string{dir})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.s.what, err, c.want)
		}
	}
}

// TestLibraryWithoutSymbols: a file that loads but is not the library
// asked for names the file and the first missing symbol, and binds nothing.
func TestLibraryWithoutSymbols(t *testing.T) {
	s := spec{lib: libCublas, what: "cuBLAS", sonames: []string{"libm.so.6"}, system: true}
	_, err := open(s, nil)
	want := "cuBLAS at libm.so.6 lacks symbol cublasCreate_v2 (too old a version?)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	// A library found in a folder is named by its full path.
	dir := t.TempDir()
	for _, lib := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"} {
		if _, err := os.Stat(lib); err == nil {
			if err := os.Symlink(lib, filepath.Join(dir, "libnvrtc.so.13")); err != nil {
				t.Fatal(err)
			}
			_, err := open(spec{lib: libNVRTC, what: "NVRTC", sonames: []string{"libnvrtc.so.13"}}, []string{dir})
			want := "NVRTC at " + dir + "/libnvrtc.so.13 lacks symbol nvrtcVersion (too old a version?)"
			if err == nil || err.Error() != want {
				t.Errorf("got %v, want %s", err, want)
			}
			break
		}
	}
}

func TestSearchDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	home := t.TempDir()
	pip := filepath.Join(home, "venv", "lib", "python3.11", "site-packages", "nvidia", "cu13", "lib")
	if err := os.MkdirAll(pip, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvLibs, a+":"+filepath.Join(a, "missing")+"::"+b+":"+a)
	t.Setenv("CUDA_HOME", "")
	t.Setenv("CUDA_PATH", "")
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("ANNA_HOME", home)
	got := SearchDirs()
	if len(got) < 3 || got[0] != a || got[1] != b {
		t.Fatalf("SearchDirs = %v; want %s then %s first (missing and repeated folders dropped)", got, a, b)
	}
	if got[len(got)-1] != pip {
		t.Errorf("SearchDirs = %v; want the pip wheel folder %s last", got, pip)
	}
	for _, d := range got {
		if d == filepath.Join(a, "missing") {
			t.Errorf("a folder that does not exist is kept: %v", got)
		}
	}
}

func TestPickArch(t *testing.T) {
	archs := []int{75, 80, 86, 89, 90, 100, 120}
	for _, c := range []struct {
		cc, arch int
		cubin    bool
		err      bool
	}{
		{90, 90, true, false},  // H100/H200: its own CUBIN
		{87, 86, false, false}, // not in the list: PTX of the newest older one
		{130, 120, false, false},
		{70, 0, false, true}, // older than anything supported
	} {
		arch, cubin, err := pickArch(c.cc, archs)
		if (err != nil) != c.err || arch != c.arch || cubin != c.cubin {
			t.Errorf("pickArch(%d) = %d, %v, %v; want %d, %v, error %v", c.cc, arch, cubin, err, c.arch, c.cubin, c.err)
		}
	}
}
