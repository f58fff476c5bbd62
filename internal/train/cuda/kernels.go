package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// The kernels cuBLAS does not cover, as CUDA C++ source compiled by NVRTC
// for the device at hand (see kernels/*.cu).
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// Source returns the kernels as one translation unit: kernels/common.cuh,
// then every kernels/*.cu in name order, each under a #line directive so
// that compiler messages name the embedded file and line.
func Source() (string, error) {
	var b strings.Builder
	add := func(name string) error {
		src, err := fs.ReadFile(kernelFS, name)
		if err != nil {
			return fmt.Errorf("cuda: reading embedded %s: %w", name, err)
		}
		fmt.Fprintf(&b, "#line 1 \"%s\"\n%s\n", path.Base(name), src)
		return nil
	}
	if err := add("kernels/common.cuh"); err != nil {
		return "", err
	}
	names, err := fs.Glob(kernelFS, "kernels/*.cu")
	if err != nil {
		return "", fmt.Errorf("cuda: listing kernels: %w", err)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := add(n); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// kernelSigs is every kernel the Go side launches and its parameters, one
// letter each: p a device pointer, l a 64-bit integer, i a 32-bit integer,
// f a float32. launch checks each call against it; the NVRTC test checks
// it against the compiled PTX's entry points. Grouped by kernel file: the
// kernels of kernels/X.cu are launched by X.go (TestLaunchersBesideKernels).
var kernelSigs = map[string]string{
	// activation.cu
	"act_forward":   "ppli",
	"act_backward":  "ppli",
	"tanh_forward":  "ppl",
	"tanh_backward": "ppl",
	// attention.cu
	"permute_heads":         "ppiiii",
	"unpermute_heads":       "ppiiiii",
	"attn_softmax_forward":  "pppiiii",
	"attn_softmax_backward": "ppli",
	"repeat_kv":             "ppiiii",
	"reduce_kv":             "ppiiii",
	// elementwise.cu
	"add_inplace":   "ppl",
	"scale_inplace": "pfl",
	"cast_f32_bf16": "ppl",
	"cast_bf16_f32": "ppl",
	// embedding.cu
	"embedding_forward":  "ppppppiiiii",
	"embedding_backward": "ppppppiiiii",
	"gather_rows":        "pppiii",
	"scatter_add_rows":   "ppppiii",
	// layernorm.cu
	"layernorm_forward":                 "ppppppiif",
	"layernorm_backward_input":          "ppppppii",
	"layernorm_backward_params_partial": "ppppppiii",
	// linear.cu
	"bias_add":       "ppii",
	"colsum_partial": "ppiii",
	"colsum_finish":  "ppii",
	// optim.cu
	"adamw_update":  "pppppl" + "ffffff",
	"sumsq_partial": "ppl",
	// pooling.cu
	"pool_forward":    "ppppiiii",
	"pool_backward":   "ppppiiii",
	"l2norm_forward":  "pppii",
	"l2norm_backward": "ppppii",
	// rmsnorm.cu
	"rmsnorm_forward":        "ppppiif",
	"rmsnorm_backward_input": "pppppii",
	// rope.cu
	"rope_apply": "pppiiiif",
	// swiglu.cu
	"swiglu_forward":  "pppl",
	"swiglu_backward": "pppppl",
}

// Program is the kernels compiled for one GPU architecture.
type Program struct {
	Arch  int    // e.g. 90 for sm_90
	CUBIN bool   // Image is a CUBIN for sm_Arch; otherwise PTX for compute_Arch
	Image []byte // what cuModuleLoadData takes
	Log   string // NVRTC's log; empty when it had nothing to say
}

// NVRTCVersion loads NVRTC (searching dirs, or SearchDirs() when nil) and
// returns its version and the file it was loaded from.
func NVRTCVersion(dirs []string) (major, minor int, file string, err error) {
	if dirs == nil {
		dirs = SearchDirs()
	}
	file, err = load(nvrtcSpec, dirs)
	if err != nil {
		return 0, 0, "", err
	}
	major, minor, err = rtcVersion()
	return major, minor, file, err
}

// Compile compiles the embedded kernels with NVRTC for sm_<arch>: a CUBIN
// when cubin is true (no JIT at load, and loadable by a driver of the same
// major version even when it is older than NVRTC), else PTX for
// compute_<arch>. extra options are appended (the tests ask for ptxas's
// resource report). It needs NVRTC but no GPU.
func Compile(arch int, cubin bool, dirs []string, extra ...string) (*Program, error) {
	if _, _, _, err := NVRTCVersion(dirs); err != nil {
		return nil, err
	}
	src, err := Source()
	if err != nil {
		return nil, err
	}
	target := fmt.Sprintf("compute_%d", arch)
	if cubin {
		target = fmt.Sprintf("sm_%d", arch)
	}
	// No --use_fast_math: erf, exp and division stay IEEE-accurate so the
	// kernels track the CPU reference closely.
	opts := append([]string{"--gpu-architecture=" + target, "--std=c++17"}, extra...)
	img, log, err := rtcCompile(src, "anna_train_kernels.cu", opts, cubin)
	if err != nil {
		return nil, fmt.Errorf("cuda: compiling kernels for %s: %w", target, err)
	}
	return &Program{Arch: arch, CUBIN: cubin, Image: img, Log: log}, nil
}

// pickArch chooses what to compile for a device of compute capability cc
// (major·10+minor) given the architectures NVRTC supports: the device's own
// as a CUBIN when supported; a newer device gets PTX for the newest
// supported architecture, which the driver compiles at load.
func pickArch(cc int, supported []int) (arch int, cubin bool, err error) {
	best := 0
	for _, a := range supported {
		if a == cc {
			return cc, true, nil
		}
		if a < cc && a > best {
			best = a
		}
	}
	if best == 0 {
		return 0, false, fmt.Errorf("NVRTC cannot compile for sm_%d or any older architecture (it supports %v)", cc, supported)
	}
	return best, false, nil
}
