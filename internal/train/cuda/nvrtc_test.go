package cuda

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// nvrtcOrSkip returns NVRTC's version, or skips: NVRTC is a compiler and
// needs no GPU, but it may not be installed (scripts/pydeps.sh installs it
// into $ANNA_HOME/venv; ANNA_CUDA_LIBS can point elsewhere).
func nvrtcOrSkip(t *testing.T) (int, int) {
	t.Helper()
	major, minor, file, err := NVRTCVersion(nil)
	if err != nil {
		t.Skipf("NVRTC not found, kernels not compiled (run scripts/pydeps.sh or set %s): %v", EnvLibs, err)
	}
	t.Logf("NVRTC %d.%d from %s", major, minor, file)
	return major, minor
}

var (
	entryRe = regexp.MustCompile(`(?s)\.visible \.entry (\w+)\(\s*(.*?)\)`)
	paramRe = regexp.MustCompile(`\.param \.(\w+) `)
)

// TestKernelsCompilePTX compiles every embedded kernel for compute_90
// (H100, H200) and checks that NVRTC says nothing (no warning), that the
// PTX holds exactly the kernels the Go side launches, and that each
// kernel's parameters match what its Go wrapper passes.
func TestKernelsCompilePTX(t *testing.T) {
	nvrtcOrSkip(t)
	p, err := Compile(90, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Log != "" {
		t.Errorf("NVRTC log not empty (warnings are errors here):\n%s", p.Log)
	}
	ptx := strings.TrimRight(string(p.Image), "\x00")
	got := map[string]string{}
	for _, m := range entryRe.FindAllStringSubmatch(ptx, -1) {
		var sig strings.Builder
		for _, pm := range paramRe.FindAllStringSubmatch(m[2], -1) {
			switch pm[1] {
			case "u64", "s64", "b64":
				sig.WriteByte('8')
			case "u32", "s32", "b32":
				sig.WriteByte('i')
			case "f32":
				sig.WriteByte('f')
			default:
				sig.WriteString("?" + pm[1])
			}
		}
		got[m[1]] = sig.String()
	}
	for name, want := range kernelSigs {
		// Pointers and 64-bit integers are both .u64 in PTX.
		w := strings.NewReplacer("p", "8", "l", "8").Replace(want)
		if g, ok := got[name]; !ok {
			t.Errorf("kernel %s is launched from Go but not in the PTX", name)
		} else if g != w {
			t.Errorf("kernel %s: PTX parameters %s, Go passes %s (8 = 64-bit, i = 32-bit int, f = float)", name, g, w)
		}
	}
	var extra []string
	for name := range got {
		if _, ok := kernelSigs[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("kernels compiled but never launched from Go: %v", extra)
	}
	if !strings.Contains(ptx, ".target sm_90") {
		t.Errorf("PTX does not target sm_90")
	}
}

// TestKernelsCompileCUBIN compiles the kernels to sm_90 machine code, as
// Open does on an H100/H200, with ptxas's resource report, and fails on any
// warning, register spill or stack frame (a local array or a call that
// should have been inlined).
func TestKernelsCompileCUBIN(t *testing.T) {
	nvrtcOrSkip(t)
	if testing.Short() {
		t.Skip("-short: CUBIN compile (about a second of CPU) skipped; TestKernelsCompilePTX still runs")
	}
	p, err := Compile(90, true, nil, "--ptxas-options=-v")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Image) < 4 || string(p.Image[1:4]) != "ELF" {
		t.Fatalf("CUBIN is not an ELF image (%d bytes)", len(p.Image))
	}
	if !strings.Contains(p.Log, "Compiling entry function") {
		// Seen on a lent H100 with NVRTC 13.0 (PyTorch's wheel): the
		// machine's first compile returned the report (0.7 s); later
		// compiles on the same machine came back in 0.04 s with an empty
		// log, the CUBIN built and correct (TestOpsOnGPU passed with it)
		// — a cached result, by the look of it. Nothing to check then.
		t.Skipf("NVRTC returned no ptxas -v report (log %q): the CUBIN is built, its spills and stack frames go unchecked in this run", p.Log)
	}
	var fn string
	seen := 0
	for _, line := range strings.Split(p.Log, "\n") {
		low := strings.ToLower(line)
		if strings.Contains(low, "warning") || strings.Contains(low, "error") {
			t.Errorf("ptxas: %s", line)
		}
		if m := regexp.MustCompile(`Compiling entry function '(\w+)'`).FindStringSubmatch(line); m != nil {
			fn = m[1]
			seen++
		}
		if m := regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`).FindStringSubmatch(line); m != nil {
			if m[1] != "0" || m[2] != "0" || m[3] != "0" {
				t.Errorf("%s: %s", fn, strings.TrimSpace(line))
			}
		}
	}
	if seen != len(kernelSigs) {
		t.Errorf("ptxas compiled %d entry functions, Go launches %d", seen, len(kernelSigs))
	}
}
