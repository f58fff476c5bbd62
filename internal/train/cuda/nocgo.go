//go:build !cgo

package cuda

// Without cgo (CGO_ENABLED=0) the CUDA libraries cannot be loaded: every
// call that would reach them returns errNoCgo, so Open fails with that
// error and the rest of anna (the CPU trainer included) builds and runs.

import (
	"errors"
	"fmt"
	"unsafe"
)

var errNoCgo = errors.New("cuda: this build has no cgo (CGO_ENABLED=0), so it cannot load the CUDA libraries; build with cgo on for GPU training")

// Error is a failed CUDA driver, cuBLAS or NVRTC call.
type Error struct {
	Op   string // the call and what it was for
	Code int
	Name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Desc string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%s)", e.Op, e.Desc, e.Name)
}

// CUDA_ERROR_NO_DEVICE: cuInit's answer when the driver sees no GPU.
const errNoDevice = 100

// EnvLibs names folders to search for cuBLAS and NVRTC first.
const EnvLibs = "ANNA_CUDA_LIBS"

// SearchDirs is nil without cgo: no library can be loaded.
func SearchDirs() []string { return nil }

type spec struct{ what string }

var (
	driverSpec = spec{what: "CUDA driver (libcuda.so.1)"}
	cublasSpec = spec{what: "cuBLAS"}
	nvrtcSpec  = spec{what: "NVRTC"}
)

func load(s spec, _ []string) (string, error) {
	return "", fmt.Errorf("loading the %s: %w", s.what, errNoCgo)
}

type gemmArgs struct {
	opA, opB, m, n, k int
	alpha, beta       float32
	a, b, c           uint64
	aType, bType      int
	cType             int
	lda, ldb, ldc     int
	sa, sb, sc        int64
	batch             int
	compute           int
}

func drvInit() error                                         { return errNoCgo }
func drvVersion() (int, error)                               { return 0, errNoCgo }
func deviceCount() (int, error)                              { return 0, errNoCgo }
func deviceGet(int) (int32, error)                           { return 0, errNoCgo }
func deviceName(int32) (string, error)                       { return "", errNoCgo }
func deviceAttr(int32, int) (int, error)                     { return 0, errNoCgo }
func deviceMem(int32) (uint64, error)                        { return 0, errNoCgo }
func primaryRetain(int32) (unsafe.Pointer, error)            { return nil, errNoCgo }
func primaryRelease(int32) error                             { return errNoCgo }
func ctxSync(unsafe.Pointer) error                           { return errNoCgo }
func memAlloc(unsafe.Pointer, int) (uint64, error)           { return 0, errNoCgo }
func memFree(unsafe.Pointer, uint64) error                   { return errNoCgo }
func memInfo(unsafe.Pointer) (free, total uint64, err error) { return 0, 0, errNoCgo }
func htod(unsafe.Pointer, uint64, unsafe.Pointer, int) error { return errNoCgo }
func dtoh(unsafe.Pointer, unsafe.Pointer, uint64, int) error { return errNoCgo }
func dtod(unsafe.Pointer, uint64, uint64, int) error         { return errNoCgo }
func memset32(unsafe.Pointer, uint64, uint32, int) error     { return errNoCgo }
func moduleLoad(unsafe.Pointer, []byte) (unsafe.Pointer, error) {
	return nil, errNoCgo
}
func moduleUnload(_, _ unsafe.Pointer) error { return errNoCgo }
func moduleFunction(_, _ unsafe.Pointer, _ string) (unsafe.Pointer, error) {
	return nil, errNoCgo
}
func launch(_, _ unsafe.Pointer, _, _ [3]uint32, _ uint32, _ []uint64, _ string) error {
	return errNoCgo
}
func blasCreate(unsafe.Pointer) (unsafe.Pointer, error) { return nil, errNoCgo }
func blasDestroy(_, _ unsafe.Pointer) error             { return errNoCgo }
func blasVersion(_, _ unsafe.Pointer) (int, error)      { return 0, errNoCgo }
func blasGemm(_, _ unsafe.Pointer, _ *gemmArgs) error   { return errNoCgo }
func rtcVersion() (major, minor int, err error)         { return 0, 0, errNoCgo }
func rtcArchs() ([]int, error)                          { return nil, errNoCgo }
func rtcCompile(_, _ string, _ []string, _ bool) ([]byte, string, error) {
	return nil, "", errNoCgo
}
