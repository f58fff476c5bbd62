package cuda

// The C side: function-pointer tables filled by dlsym, and thin typed
// trampolines. No CUDA header is included; the few types and enum values
// used are declared here (checked against cuda.h, cublas_api.h,
// library_types.h and nvrtc.h of CUDA 13.2).
//
// Every driver and cuBLAS trampoline first makes the device's context
// current on the calling OS thread: a goroutine can move between threads
// from one cgo call to the next, so binding once would not hold.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;

typedef struct {
	CUresult (*cuInit)(unsigned);
	CUresult (*cuDriverGetVersion)(int *);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemGetInfo)(size_t *, size_t *);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t);
	CUresult (*cuModuleLoadData)(CUmodule *, const void *);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuGetErrorString)(CUresult, const char **);
	CUresult (*cuGetErrorName)(CUresult, const char **);
} cu_fns;

typedef int cublasStatus;
typedef void *cublasHandle;
typedef struct {
	cublasStatus (*cublasCreate)(cublasHandle *);
	cublasStatus (*cublasDestroy)(cublasHandle);
	cublasStatus (*cublasGetVersion)(cublasHandle, int *);
	const char *(*cublasGetStatusString)(cublasStatus);
	cublasStatus (*cublasGemmEx)(cublasHandle, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int, const void *, void *, int, int, int, int);
	cublasStatus (*cublasGemmStridedBatchedEx)(cublasHandle, int, int, int, int, int, const void *, const void *, int, int, long long, const void *, int, int, long long, const void *, void *, int, int, long long, int, int, int);
} cublas_fns;

typedef int nvrtcResult;
typedef void *nvrtcProgram;
typedef struct {
	nvrtcResult (*nvrtcVersion)(int *, int *);
	const char *(*nvrtcGetErrorString)(nvrtcResult);
	nvrtcResult (*nvrtcGetNumSupportedArchs)(int *);
	nvrtcResult (*nvrtcGetSupportedArchs)(int *);
	nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
	nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
	nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
	nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
	nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t *);
	nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char *);
	nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
	nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
} nvrtc_fns;

// The tables are process-global, as the libraries are; each is filled once
// (under a sync.Once on the Go side) and only read afterwards.
static cu_fns cu;
static cublas_fns cublas;
static nvrtc_fns nvrtc;

typedef struct { const char *name; void **slot; } sym_slot;

#define S(tbl, field, sym) { sym, (void **)&tbl.field }
static sym_slot cu_syms[] = {
	S(cu, cuInit, "cuInit"),
	S(cu, cuDriverGetVersion, "cuDriverGetVersion"),
	S(cu, cuDeviceGetCount, "cuDeviceGetCount"),
	S(cu, cuDeviceGet, "cuDeviceGet"),
	S(cu, cuDeviceGetName, "cuDeviceGetName"),
	S(cu, cuDeviceGetAttribute, "cuDeviceGetAttribute"),
	S(cu, cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
	S(cu, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	S(cu, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
	S(cu, cuCtxSetCurrent, "cuCtxSetCurrent"),
	S(cu, cuCtxSynchronize, "cuCtxSynchronize"),
	S(cu, cuMemAlloc, "cuMemAlloc_v2"),
	S(cu, cuMemFree, "cuMemFree_v2"),
	S(cu, cuMemGetInfo, "cuMemGetInfo_v2"),
	S(cu, cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
	S(cu, cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
	S(cu, cuMemcpyDtoD, "cuMemcpyDtoD_v2"),
	S(cu, cuMemsetD32, "cuMemsetD32_v2"),
	S(cu, cuModuleLoadData, "cuModuleLoadData"),
	S(cu, cuModuleUnload, "cuModuleUnload"),
	S(cu, cuModuleGetFunction, "cuModuleGetFunction"),
	S(cu, cuLaunchKernel, "cuLaunchKernel"),
	S(cu, cuStreamSynchronize, "cuStreamSynchronize"),
	S(cu, cuGetErrorString, "cuGetErrorString"),
	S(cu, cuGetErrorName, "cuGetErrorName"),
	{ NULL, NULL },
};
static sym_slot cublas_syms[] = {
	S(cublas, cublasCreate, "cublasCreate_v2"),
	S(cublas, cublasDestroy, "cublasDestroy_v2"),
	S(cublas, cublasGetVersion, "cublasGetVersion_v2"),
	S(cublas, cublasGetStatusString, "cublasGetStatusString"),
	S(cublas, cublasGemmEx, "cublasGemmEx"),
	S(cublas, cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx"),
	{ NULL, NULL },
};
static sym_slot nvrtc_syms[] = {
	S(nvrtc, nvrtcVersion, "nvrtcVersion"),
	S(nvrtc, nvrtcGetErrorString, "nvrtcGetErrorString"),
	S(nvrtc, nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs"),
	S(nvrtc, nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs"),
	S(nvrtc, nvrtcCreateProgram, "nvrtcCreateProgram"),
	S(nvrtc, nvrtcDestroyProgram, "nvrtcDestroyProgram"),
	S(nvrtc, nvrtcCompileProgram, "nvrtcCompileProgram"),
	S(nvrtc, nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"),
	S(nvrtc, nvrtcGetProgramLog, "nvrtcGetProgramLog"),
	S(nvrtc, nvrtcGetPTXSize, "nvrtcGetPTXSize"),
	S(nvrtc, nvrtcGetPTX, "nvrtcGetPTX"),
	S(nvrtc, nvrtcGetCUBINSize, "nvrtcGetCUBINSize"),
	S(nvrtc, nvrtcGetCUBIN, "nvrtcGetCUBIN"),
	{ NULL, NULL },
};
#undef S

enum { LIB_CU = 0, LIB_CUBLAS = 1, LIB_NVRTC = 2 };

// anna_bind resolves every symbol of table lib in handle h. It returns the
// name of the first one missing, or NULL when all were found; nothing is
// stored unless all were.
const char *anna_bind(void *h, int lib) {
	sym_slot *s = lib == LIB_CU ? cu_syms : lib == LIB_CUBLAS ? cublas_syms : nvrtc_syms;
	for (sym_slot *p = s; p->name; p++) {
		if (!dlsym(h, p->name)) return p->name;
	}
	for (sym_slot *p = s; p->name; p++) *p->slot = dlsym(h, p->name);
	return NULL;
}

#include <string.h>

// anna_dlopen opens path; on failure *err is a malloc'ed copy of dlerror's
// message, taken in the same call (dlerror is per thread, and a goroutine
// may change threads between two cgo calls).
static void *anna_dlopen(const char *path, int global, char **err) {
	void *h = dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
	*err = NULL;
	if (!h) {
		const char *e = dlerror();
		*err = strdup(e ? e : "dlopen failed");
	}
	return h;
}

// --- driver ---
#define BIND(ctx) do { CUresult r_ = cu.cuCtxSetCurrent(ctx); if (r_) return r_; } while (0)

CUresult anna_cu_init(void) { return cu.cuInit(0); }
CUresult anna_cu_driver_version(int *v) { return cu.cuDriverGetVersion(v); }
CUresult anna_cu_device_count(int *n) { return cu.cuDeviceGetCount(n); }
CUresult anna_cu_device_get(CUdevice *d, int ordinal) { return cu.cuDeviceGet(d, ordinal); }
CUresult anna_cu_device_name(char *buf, int n, CUdevice d) { return cu.cuDeviceGetName(buf, n, d); }
CUresult anna_cu_device_attr(int *v, int attr, CUdevice d) { return cu.cuDeviceGetAttribute(v, attr, d); }
CUresult anna_cu_device_mem(size_t *b, CUdevice d) { return cu.cuDeviceTotalMem(b, d); }
CUresult anna_cu_primary_retain(CUcontext *c, CUdevice d) { return cu.cuDevicePrimaryCtxRetain(c, d); }
CUresult anna_cu_primary_release(CUdevice d) { return cu.cuDevicePrimaryCtxRelease(d); }
CUresult anna_cu_sync(CUcontext c) { BIND(c); return cu.cuCtxSynchronize(); }
CUresult anna_cu_alloc(CUcontext c, CUdeviceptr *p, size_t n) { BIND(c); return cu.cuMemAlloc(p, n); }
CUresult anna_cu_free(CUcontext c, CUdeviceptr p) { BIND(c); return cu.cuMemFree(p); }
CUresult anna_cu_mem_info(CUcontext c, size_t *free, size_t *total) { BIND(c); return cu.cuMemGetInfo(free, total); }
CUresult anna_cu_htod(CUcontext c, CUdeviceptr dst, const void *src, size_t n) { BIND(c); return cu.cuMemcpyHtoD(dst, src, n); }
CUresult anna_cu_dtoh(CUcontext c, void *dst, CUdeviceptr src, size_t n) { BIND(c); return cu.cuMemcpyDtoH(dst, src, n); }
CUresult anna_cu_dtod(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n) { BIND(c); return cu.cuMemcpyDtoD(dst, src, n); }
CUresult anna_cu_memset32(CUcontext c, CUdeviceptr dst, unsigned v, size_t n) { BIND(c); return cu.cuMemsetD32(dst, v, n); }
CUresult anna_cu_module_load(CUcontext c, CUmodule *m, const void *image) { BIND(c); return cu.cuModuleLoadData(m, image); }
CUresult anna_cu_module_unload(CUcontext c, CUmodule m) { BIND(c); return cu.cuModuleUnload(m); }
CUresult anna_cu_function(CUcontext c, CUfunction *f, CUmodule m, const char *name) { BIND(c); return cu.cuModuleGetFunction(f, m, name); }

// anna_cu_launch launches f with n parameters, each held in the low bytes
// of one 8-byte slot (little-endian: a 4-byte int or float is read from
// the slot's first 4 bytes). The driver copies the parameters at launch.
CUresult anna_cu_launch(CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned shmem, unsigned long long *slots, int n) {
	void *params[32];
	if (n > 32) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < n; i++) params[i] = &slots[i];
	BIND(c);
	return cu.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, NULL, params, NULL);
}

const char *anna_cu_error_string(CUresult r) {
	const char *s = NULL;
	if (!cu.cuGetErrorString || cu.cuGetErrorString(r, &s) != 0 || !s) return "unknown error";
	return s;
}
const char *anna_cu_error_name(CUresult r) {
	const char *s = NULL;
	if (!cu.cuGetErrorName || cu.cuGetErrorName(r, &s) != 0 || !s) return "CUDA_ERROR_UNKNOWN";
	return s;
}

// --- cuBLAS ---
cublasStatus anna_cublas_create(CUcontext c, cublasHandle *h) { BIND(c); return cublas.cublasCreate(h); }
cublasStatus anna_cublas_destroy(CUcontext c, cublasHandle h) { BIND(c); return cublas.cublasDestroy(h); }
cublasStatus anna_cublas_version(CUcontext c, cublasHandle h, int *v) { BIND(c); return cublas.cublasGetVersion(h, v); }
const char *anna_cublas_status(cublasStatus s) { return cublas.cublasGetStatusString ? cublas.cublasGetStatusString(s) : "unknown status"; }

cublasStatus anna_cublas_gemm(CUcontext c, cublasHandle h, int opA, int opB, int m, int n, int k,
		float alpha, CUdeviceptr A, int Atype, int lda, CUdeviceptr B, int Btype, int ldb,
		float beta, CUdeviceptr C, int Ctype, int ldc, int compute) {
	BIND(c);
	return cublas.cublasGemmEx(h, opA, opB, m, n, k, &alpha, (const void *)A, Atype, lda,
		(const void *)B, Btype, ldb, &beta, (void *)C, Ctype, ldc, compute, -1);
}
cublasStatus anna_cublas_gemm_batched(CUcontext c, cublasHandle h, int opA, int opB, int m, int n, int k,
		float alpha, CUdeviceptr A, int Atype, int lda, long long sA, CUdeviceptr B, int Btype, int ldb, long long sB,
		float beta, CUdeviceptr C, int Ctype, int ldc, long long sC, int batch, int compute) {
	BIND(c);
	return cublas.cublasGemmStridedBatchedEx(h, opA, opB, m, n, k, &alpha, (const void *)A, Atype, lda, sA,
		(const void *)B, Btype, ldb, sB, &beta, (void *)C, Ctype, ldc, sC, batch, compute, -1);
}

// --- NVRTC ---
nvrtcResult anna_nvrtc_version(int *major, int *minor) { return nvrtc.nvrtcVersion(major, minor); }
const char *anna_nvrtc_error(nvrtcResult r) { return nvrtc.nvrtcGetErrorString ? nvrtc.nvrtcGetErrorString(r) : "unknown NVRTC error"; }
nvrtcResult anna_nvrtc_num_archs(int *n) { return nvrtc.nvrtcGetNumSupportedArchs(n); }
nvrtcResult anna_nvrtc_archs(int *a) { return nvrtc.nvrtcGetSupportedArchs(a); }
nvrtcResult anna_nvrtc_create(nvrtcProgram *p, const char *src, const char *name) {
	return nvrtc.nvrtcCreateProgram(p, src, name, 0, NULL, NULL);
}
nvrtcResult anna_nvrtc_destroy(nvrtcProgram *p) { return nvrtc.nvrtcDestroyProgram(p); }
nvrtcResult anna_nvrtc_compile(nvrtcProgram p, int n, char **opts) {
	return nvrtc.nvrtcCompileProgram(p, n, (const char *const *)opts);
}
nvrtcResult anna_nvrtc_log_size(nvrtcProgram p, size_t *n) { return nvrtc.nvrtcGetProgramLogSize(p, n); }
nvrtcResult anna_nvrtc_log(nvrtcProgram p, char *buf) { return nvrtc.nvrtcGetProgramLog(p, buf); }
nvrtcResult anna_nvrtc_ptx_size(nvrtcProgram p, size_t *n) { return nvrtc.nvrtcGetPTXSize(p, n); }
nvrtcResult anna_nvrtc_ptx(nvrtcProgram p, char *buf) { return nvrtc.nvrtcGetPTX(p, buf); }
nvrtcResult anna_nvrtc_cubin_size(nvrtcProgram p, size_t *n) { return nvrtc.nvrtcGetCUBINSize(p, n); }
nvrtcResult anna_nvrtc_cubin(nvrtcProgram p, char *buf) { return nvrtc.nvrtcGetCUBIN(p, buf); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/anna-search/anna/internal/home"
)

// library says which of the three libraries a lookup is for.
type library int

const (
	libDriver library = iota
	libCublas
	libNVRTC
)

// spec is what a library is called in messages and the sonames it goes by,
// newest first.
type spec struct {
	lib     library
	what    string // e.g. "CUDA driver (libcuda.so.1)"
	sonames []string
	// preload are sonames that must be loaded from the same folder first
	// (cuBLAS needs cuBLASLt; its RUNPATH covers that, but a copy without
	// one would not find it).
	preload []string
	// system: also try the bare sonames through the system loader
	// (LD_LIBRARY_PATH, ld.so.cache), after the folders.
	system bool
}

var (
	driverSpec = spec{lib: libDriver, what: "CUDA driver (libcuda.so.1)", sonames: []string{"libcuda.so.1", "libcuda.so"}, system: true}
	cublasSpec = spec{lib: libCublas, what: "cuBLAS", sonames: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
		preload: []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, system: true}
	nvrtcSpec = spec{lib: libNVRTC, what: "NVRTC", sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, system: true}
)

// loaded is one library's process-wide load: the file bound, once one
// was. A failure is not remembered, so a later call (say with
// ANNA_CUDA_LIBS set) tries again; a success is final, as the symbol
// tables it filled are process-global.
type loaded struct {
	mu   sync.Mutex
	path string
}

var libs [3]loaded

// load opens s's library, searching dirs (in order) and then the system
// loader, unless an earlier call already did.
func load(s spec, dirs []string) (string, error) {
	l := &libs[s.lib]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path != "" {
		return l.path, nil
	}
	p, err := open(s, dirs)
	if err != nil {
		return "", err
	}
	l.path = p
	return p, nil
}

// open tries every candidate path of s and binds the symbol table from the
// first that opens. A library that opens but lacks a symbol is an error
// naming the file and the symbol, not a reason to try older copies: a
// mixed set of CUDA libraries is worse than a clear failure.
func open(s spec, dirs []string) (string, error) {
	var tried []string
	var firstErr string
	for _, cand := range candidates(s, dirs) {
		tried = append(tried, cand)
		if filepath.IsAbs(cand) {
			if _, err := os.Stat(cand); err != nil {
				continue // not there: no dlerror worth reporting
			}
			for _, pre := range s.preload {
				p := filepath.Join(filepath.Dir(cand), pre)
				if _, err := os.Stat(p); err == nil {
					if h, _ := dlopen(p, true); h != nil {
						break
					}
				}
			}
		}
		h, err := dlopen(cand, false)
		if err != nil {
			if firstErr == "" {
				firstErr = err.Error()
			}
			continue
		}
		if miss := C.anna_bind(h, C.int(s.lib)); miss != nil {
			return "", fmt.Errorf("%s at %s lacks symbol %s (too old a version?)", s.what, cand, C.GoString(miss))
		}
		return cand, nil
	}
	msg := fmt.Sprintf("tried %s", strings.Join(tried, ", "))
	if firstErr != "" {
		msg += ": " + firstErr
	}
	switch s.lib {
	case libDriver:
		return "", fmt.Errorf("no CUDA driver (libcuda.so.1) found: %s", msg)
	default:
		return "", fmt.Errorf("%s not found (set %s to the folder holding %s): %s", s.what, EnvLibs, s.sonames[0], msg)
	}
}

func dlopen(path string, global bool) (unsafe.Pointer, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	g := C.int(0)
	if global {
		g = 1
	}
	var e *C.char
	h := C.anna_dlopen(cp, g, &e)
	if h == nil {
		msg := "dlopen " + path + " failed"
		if e != nil {
			msg = C.GoString(e)
			C.free(unsafe.Pointer(e))
		}
		return nil, errors.New(msg)
	}
	return h, nil
}

// candidates lists the paths to try for s: each soname in each folder,
// then (for system libraries) each bare soname for the system loader.
func candidates(s spec, dirs []string) []string {
	var out []string
	for _, d := range dirs {
		for _, n := range s.sonames {
			out = append(out, filepath.Join(d, n))
		}
	}
	if s.system {
		out = append(out, s.sonames...)
	}
	return out
}

// EnvLibs names the environment variable holding extra folders (separated
// by ':') searched first for libcuda, cuBLAS and NVRTC, e.g. a pip
// install's site-packages/nvidia/cu13/lib.
const EnvLibs = "ANNA_CUDA_LIBS"

// SearchDirs returns the folders searched for cuBLAS and NVRTC, in order:
// $ANNA_CUDA_LIBS, $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64,
// the driver folders of containers (/usr/local/nvidia/lib64) and the pip
// wheels' folders (nvidia/cu13/lib, nvidia/cublas/lib, nvidia/cuda_nvrtc/lib)
// under $VIRTUAL_ENV and $ANNA_HOME/venv. Only folders that exist are kept.
func SearchDirs() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv(EnvLibs)) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := os.Getenv(env); v != "" {
			dirs = append(dirs, filepath.Join(v, "lib64"), filepath.Join(v, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/nvidia/lib64")
	for _, venv := range []string{os.Getenv("VIRTUAL_ENV"), filepath.Join(home.Dir(), "venv")} {
		if venv == "" {
			continue
		}
		sp, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "nvidia"))
		for _, p := range sp {
			for _, sub := range []string{"cu13/lib", "cublas/lib", "cuda_nvrtc/lib"} {
				dirs = append(dirs, filepath.Join(p, sub))
			}
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}
