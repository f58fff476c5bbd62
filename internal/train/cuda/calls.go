package cuda

// Go faces of the C trampolines in dl.go. Handles cross into pure-Go files
// as unsafe.Pointer (contexts, modules, functions, cuBLAS handles) and
// device addresses as uint64, so only this file and dl.go use cgo types.

/*
#include <stdlib.h>
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef void *CUmodule;
typedef void *CUfunction;
typedef int cublasStatus;
typedef void *cublasHandle;
typedef int nvrtcResult;
typedef void *nvrtcProgram;

CUresult anna_cu_init(void);
CUresult anna_cu_driver_version(int *v);
CUresult anna_cu_device_count(int *n);
CUresult anna_cu_device_get(CUdevice *d, int ordinal);
CUresult anna_cu_device_name(char *buf, int n, CUdevice d);
CUresult anna_cu_device_attr(int *v, int attr, CUdevice d);
CUresult anna_cu_device_mem(size_t *b, CUdevice d);
CUresult anna_cu_primary_retain(CUcontext *c, CUdevice d);
CUresult anna_cu_primary_release(CUdevice d);
CUresult anna_cu_sync(CUcontext c);
CUresult anna_cu_alloc(CUcontext c, CUdeviceptr *p, size_t n);
CUresult anna_cu_free(CUcontext c, CUdeviceptr p);
CUresult anna_cu_mem_info(CUcontext c, size_t *free, size_t *total);
CUresult anna_cu_htod(CUcontext c, CUdeviceptr dst, const void *src, size_t n);
CUresult anna_cu_dtoh(CUcontext c, void *dst, CUdeviceptr src, size_t n);
CUresult anna_cu_dtod(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult anna_cu_memset32(CUcontext c, CUdeviceptr dst, unsigned v, size_t n);
CUresult anna_cu_module_load(CUcontext c, CUmodule *m, const void *image);
CUresult anna_cu_module_unload(CUcontext c, CUmodule m);
CUresult anna_cu_function(CUcontext c, CUfunction *f, CUmodule m, const char *name);
CUresult anna_cu_launch(CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned shmem, unsigned long long *slots, int n);
const char *anna_cu_error_string(CUresult r);
const char *anna_cu_error_name(CUresult r);

cublasStatus anna_cublas_create(CUcontext c, cublasHandle *h);
cublasStatus anna_cublas_destroy(CUcontext c, cublasHandle h);
cublasStatus anna_cublas_version(CUcontext c, cublasHandle h, int *v);
const char *anna_cublas_status(cublasStatus s);
cublasStatus anna_cublas_gemm(CUcontext c, cublasHandle h, int opA, int opB, int m, int n, int k,
		float alpha, CUdeviceptr A, int Atype, int lda, CUdeviceptr B, int Btype, int ldb,
		float beta, CUdeviceptr C, int Ctype, int ldc, int compute);
cublasStatus anna_cublas_gemm_batched(CUcontext c, cublasHandle h, int opA, int opB, int m, int n, int k,
		float alpha, CUdeviceptr A, int Atype, int lda, long long sA, CUdeviceptr B, int Btype, int ldb, long long sB,
		float beta, CUdeviceptr C, int Ctype, int ldc, long long sC, int batch, int compute);

nvrtcResult anna_nvrtc_version(int *major, int *minor);
const char *anna_nvrtc_error(nvrtcResult r);
nvrtcResult anna_nvrtc_num_archs(int *n);
nvrtcResult anna_nvrtc_archs(int *a);
nvrtcResult anna_nvrtc_create(nvrtcProgram *p, const char *src, const char *name);
nvrtcResult anna_nvrtc_destroy(nvrtcProgram *p);
nvrtcResult anna_nvrtc_compile(nvrtcProgram p, int n, char **opts);
nvrtcResult anna_nvrtc_log_size(nvrtcProgram p, size_t *n);
nvrtcResult anna_nvrtc_log(nvrtcProgram p, char *buf);
nvrtcResult anna_nvrtc_ptx_size(nvrtcProgram p, size_t *n);
nvrtcResult anna_nvrtc_ptx(nvrtcProgram p, char *buf);
nvrtcResult anna_nvrtc_cubin_size(nvrtcProgram p, size_t *n);
nvrtcResult anna_nvrtc_cubin(nvrtcProgram p, char *buf);
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

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

func cuErr(r C.CUresult, op string, args ...any) error {
	if r == 0 {
		return nil
	}
	if len(args) > 0 {
		op = fmt.Sprintf(op, args...)
	}
	return &Error{Op: op, Code: int(r), Name: C.GoString(C.anna_cu_error_name(r)), Desc: C.GoString(C.anna_cu_error_string(r))}
}

func blasErr(s C.cublasStatus, op string) error {
	if s == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(s), Name: fmt.Sprintf("cublasStatus %d", int(s)), Desc: C.GoString(C.anna_cublas_status(s))}
}

func rtcErr(r C.nvrtcResult, op string) error {
	if r == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(r), Name: fmt.Sprintf("nvrtcResult %d", int(r)), Desc: C.GoString(C.anna_nvrtc_error(r))}
}

// --- driver ---

func drvInit() error { return cuErr(C.anna_cu_init(), "cuInit") }

func drvVersion() (int, error) {
	var v C.int
	err := cuErr(C.anna_cu_driver_version(&v), "cuDriverGetVersion")
	return int(v), err
}

func deviceCount() (int, error) {
	var n C.int
	err := cuErr(C.anna_cu_device_count(&n), "cuDeviceGetCount")
	return int(n), err
}

func deviceGet(ordinal int) (int32, error) {
	var d C.CUdevice
	err := cuErr(C.anna_cu_device_get(&d, C.int(ordinal)), "cuDeviceGet(%d)", ordinal)
	return int32(d), err
}

func deviceName(dev int32) (string, error) {
	buf := make([]byte, 256)
	if err := cuErr(C.anna_cu_device_name((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), C.CUdevice(dev)), "cuDeviceGetName"); err != nil {
		return "", err
	}
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

func deviceAttr(dev int32, attr int) (int, error) {
	var v C.int
	err := cuErr(C.anna_cu_device_attr(&v, C.int(attr), C.CUdevice(dev)), "cuDeviceGetAttribute(%d)", attr)
	return int(v), err
}

func deviceMem(dev int32) (uint64, error) {
	var b C.size_t
	err := cuErr(C.anna_cu_device_mem(&b, C.CUdevice(dev)), "cuDeviceTotalMem")
	return uint64(b), err
}

func primaryRetain(dev int32) (unsafe.Pointer, error) {
	var c C.CUcontext
	err := cuErr(C.anna_cu_primary_retain(&c, C.CUdevice(dev)), "cuDevicePrimaryCtxRetain")
	return unsafe.Pointer(c), err
}

func primaryRelease(dev int32) error {
	return cuErr(C.anna_cu_primary_release(C.CUdevice(dev)), "cuDevicePrimaryCtxRelease")
}

func ctxSync(ctx unsafe.Pointer) error {
	return cuErr(C.anna_cu_sync(C.CUcontext(ctx)), "cuCtxSynchronize")
}

func memAlloc(ctx unsafe.Pointer, n int) (uint64, error) {
	var p C.CUdeviceptr
	err := cuErr(C.anna_cu_alloc(C.CUcontext(ctx), &p, C.size_t(n)), "cuMemAlloc(%d bytes)", n)
	return uint64(p), err
}

func memFree(ctx unsafe.Pointer, p uint64) error {
	return cuErr(C.anna_cu_free(C.CUcontext(ctx), C.CUdeviceptr(p)), "cuMemFree")
}

func memInfo(ctx unsafe.Pointer) (free, total uint64, err error) {
	var f, t C.size_t
	err = cuErr(C.anna_cu_mem_info(C.CUcontext(ctx), &f, &t), "cuMemGetInfo")
	return uint64(f), uint64(t), err
}

// htod and dtoh copy n bytes; the host side is Go memory holding no Go
// pointers, pinned by cgo for the call (the copies are synchronous).
func htod(ctx unsafe.Pointer, dst uint64, src unsafe.Pointer, n int) error {
	return cuErr(C.anna_cu_htod(C.CUcontext(ctx), C.CUdeviceptr(dst), src, C.size_t(n)), "cuMemcpyHtoD(%d bytes)", n)
}

func dtoh(ctx unsafe.Pointer, dst unsafe.Pointer, src uint64, n int) error {
	return cuErr(C.anna_cu_dtoh(C.CUcontext(ctx), dst, C.CUdeviceptr(src), C.size_t(n)), "cuMemcpyDtoH(%d bytes)", n)
}

func dtod(ctx unsafe.Pointer, dst, src uint64, n int) error {
	return cuErr(C.anna_cu_dtod(C.CUcontext(ctx), C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n)), "cuMemcpyDtoD(%d bytes)", n)
}

func memset32(ctx unsafe.Pointer, dst uint64, v uint32, n int) error {
	return cuErr(C.anna_cu_memset32(C.CUcontext(ctx), C.CUdeviceptr(dst), C.uint(v), C.size_t(n)), "cuMemsetD32(%d words)", n)
}

func moduleLoad(ctx unsafe.Pointer, image []byte) (unsafe.Pointer, error) {
	var m C.CUmodule
	err := cuErr(C.anna_cu_module_load(C.CUcontext(ctx), &m, unsafe.Pointer(&image[0])), "cuModuleLoadData")
	return unsafe.Pointer(m), err
}

func moduleUnload(ctx, mod unsafe.Pointer) error {
	return cuErr(C.anna_cu_module_unload(C.CUcontext(ctx), C.CUmodule(mod)), "cuModuleUnload")
}

func moduleFunction(ctx, mod unsafe.Pointer, name string) (unsafe.Pointer, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var f C.CUfunction
	err := cuErr(C.anna_cu_function(C.CUcontext(ctx), &f, C.CUmodule(mod), cn), "cuModuleGetFunction(%s)", name)
	return unsafe.Pointer(f), err
}

func launch(ctx, fn unsafe.Pointer, grid, block [3]uint32, shmem uint32, slots []uint64, name string) error {
	var p *C.ulonglong
	if len(slots) > 0 {
		p = (*C.ulonglong)(unsafe.Pointer(&slots[0]))
	}
	r := C.anna_cu_launch(C.CUcontext(ctx), C.CUfunction(fn), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), C.uint(shmem), p, C.int(len(slots)))
	return cuErr(r, "launch %s grid %v block %v", name, grid, block)
}

// --- cuBLAS ---

func blasCreate(ctx unsafe.Pointer) (unsafe.Pointer, error) {
	var h C.cublasHandle
	err := blasErr(C.anna_cublas_create(C.CUcontext(ctx), &h), "cublasCreate")
	return unsafe.Pointer(h), err
}

func blasDestroy(ctx, h unsafe.Pointer) error {
	return blasErr(C.anna_cublas_destroy(C.CUcontext(ctx), C.cublasHandle(h)), "cublasDestroy")
}

func blasVersion(ctx, h unsafe.Pointer) (int, error) {
	var v C.int
	err := blasErr(C.anna_cublas_version(C.CUcontext(ctx), C.cublasHandle(h), &v), "cublasGetVersion")
	return int(v), err
}

// gemmArgs are cublasGemm(StridedBatched)Ex's arguments in column-major
// terms; batch ≤ 1 calls the plain GemmEx.
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

func blasGemm(ctx, h unsafe.Pointer, g *gemmArgs) error {
	if g.batch <= 1 {
		return blasErr(C.anna_cublas_gemm(C.CUcontext(ctx), C.cublasHandle(h), C.int(g.opA), C.int(g.opB),
			C.int(g.m), C.int(g.n), C.int(g.k), C.float(g.alpha), C.CUdeviceptr(g.a), C.int(g.aType), C.int(g.lda),
			C.CUdeviceptr(g.b), C.int(g.bType), C.int(g.ldb), C.float(g.beta), C.CUdeviceptr(g.c), C.int(g.cType),
			C.int(g.ldc), C.int(g.compute)), fmt.Sprintf("cublasGemmEx m=%d n=%d k=%d", g.m, g.n, g.k))
	}
	return blasErr(C.anna_cublas_gemm_batched(C.CUcontext(ctx), C.cublasHandle(h), C.int(g.opA), C.int(g.opB),
		C.int(g.m), C.int(g.n), C.int(g.k), C.float(g.alpha), C.CUdeviceptr(g.a), C.int(g.aType), C.int(g.lda), C.longlong(g.sa),
		C.CUdeviceptr(g.b), C.int(g.bType), C.int(g.ldb), C.longlong(g.sb), C.float(g.beta), C.CUdeviceptr(g.c), C.int(g.cType),
		C.int(g.ldc), C.longlong(g.sc), C.int(g.batch), C.int(g.compute)),
		fmt.Sprintf("cublasGemmStridedBatchedEx m=%d n=%d k=%d batch=%d", g.m, g.n, g.k, g.batch))
}

// --- NVRTC ---

func rtcVersion() (major, minor int, err error) {
	var a, b C.int
	err = rtcErr(C.anna_nvrtc_version(&a, &b), "nvrtcVersion")
	return int(a), int(b), err
}

// rtcArchs lists the sm_XY numbers (e.g. 90) NVRTC can compile for.
func rtcArchs() ([]int, error) {
	var n C.int
	if err := rtcErr(C.anna_nvrtc_num_archs(&n), "nvrtcGetNumSupportedArchs"); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	a := make([]C.int, int(n))
	if err := rtcErr(C.anna_nvrtc_archs(&a[0]), "nvrtcGetSupportedArchs"); err != nil {
		return nil, err
	}
	out := make([]int, len(a))
	for i, v := range a {
		out[i] = int(v)
	}
	return out, nil
}

// rtcCompile compiles one CUDA C++ source; it returns the PTX (NUL
// terminated, as cuModuleLoadData wants it) or the CUBIN, and the log,
// which may be non-empty on success (warnings).
func rtcCompile(src, name string, opts []string, cubin bool) (image []byte, log string, err error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	var prog C.nvrtcProgram
	if err := rtcErr(C.anna_nvrtc_create(&prog, csrc, cname), "nvrtcCreateProgram"); err != nil {
		return nil, "", err
	}
	defer C.anna_nvrtc_destroy(&prog)
	copts := make([]*C.char, len(opts))
	for i, o := range opts {
		copts[i] = C.CString(o)
	}
	defer func() {
		for _, p := range copts {
			C.free(unsafe.Pointer(p))
		}
	}()
	// The option array lives in C memory: it holds C pointers only, but cgo
	// forbids passing Go memory that holds pointers of any kind.
	arr := (**C.char)(C.malloc(C.size_t(max(len(opts), 1)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(arr))
	copy(unsafe.Slice(arr, len(opts)), copts)
	compileErr := rtcErr(C.anna_nvrtc_compile(prog, C.int(len(opts)), arr), "nvrtcCompileProgram "+name)

	var n C.size_t
	if e := rtcErr(C.anna_nvrtc_log_size(prog, &n), "nvrtcGetProgramLogSize"); e != nil {
		return nil, "", e
	}
	if n > 1 {
		buf := make([]byte, int(n))
		if e := rtcErr(C.anna_nvrtc_log(prog, (*C.char)(unsafe.Pointer(&buf[0]))), "nvrtcGetProgramLog"); e != nil {
			return nil, "", e
		}
		log = strings.TrimRight(string(buf), "\x00\n ")
	}
	if compileErr != nil {
		return nil, log, fmt.Errorf("%w:\n%s", compileErr, log)
	}
	if cubin {
		if e := rtcErr(C.anna_nvrtc_cubin_size(prog, &n), "nvrtcGetCUBINSize"); e != nil {
			return nil, log, e
		}
		image = make([]byte, int(n))
		if n > 0 {
			if e := rtcErr(C.anna_nvrtc_cubin(prog, (*C.char)(unsafe.Pointer(&image[0]))), "nvrtcGetCUBIN"); e != nil {
				return nil, log, e
			}
		}
		return image, log, nil
	}
	if e := rtcErr(C.anna_nvrtc_ptx_size(prog, &n), "nvrtcGetPTXSize"); e != nil {
		return nil, log, e
	}
	image = make([]byte, int(n)) // includes the terminating NUL
	if e := rtcErr(C.anna_nvrtc_ptx(prog, (*C.char)(unsafe.Pointer(&image[0]))), "nvrtcGetPTX"); e != nil {
		return nil, log, e
	}
	return image, log, nil
}
