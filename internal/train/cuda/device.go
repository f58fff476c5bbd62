package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/anna-search/anna/internal/safe"
)

// MathMode selects how float32 matrix products run on the tensor cores.
type MathMode int

const (
	// MathFP32 keeps float32 products in float32 (CUBLAS_COMPUTE_32F).
	MathFP32 MathMode = iota
	// MathTF32 lets cuBLAS round the inputs of float32 products to TF32
	// (CUBLAS_COMPUTE_32F_FAST_TF32): about 3e-4 relative error, several
	// times the throughput.
	MathTF32
)

// Options configure Open.
type Options struct {
	Ordinal int      // device index as the driver numbers them (after CUDA_VISIBLE_DEVICES)
	LibDirs []string // folders searched for the libraries; nil: SearchDirs()
	Math    MathMode
	// Debug synchronises after every launch so that an asynchronous fault
	// is reported by the launch that caused it (slow; for tests and bugs).
	Debug bool
}

// Device is one GPU with its context, cuBLAS handle and compiled kernels.
// A Device is not safe for concurrent use (it keeps a scratch buffer), in
// the way a bert.Model is not.
type Device struct {
	Name           string
	Major, Minor   int    // compute capability
	SMs            int    // multiprocessors
	Memory         uint64 // bytes of device memory
	DriverVersion  int    // e.g. 13000 for CUDA 13.0
	CublasVersion  int    // e.g. 130401
	NVRTCVersion   [2]int // major, minor
	Program        *Program
	DriverLib      string // the files the libraries were loaded from
	CublasLib      string
	NVRTCLib       string
	Math           MathMode
	debug          bool
	dev            int32
	ctx, blas, mod unsafe.Pointer
	scratch        *Buffer
	closed         bool
	be             backend
}

// backend is what the ops need from a device: memory, copies, launches,
// products. gpu is the real one; the tests also run every op on a host
// emulator of the kernels to check the Go side where no GPU is.
type backend interface {
	alloc(bytes int) (uint64, error)
	free(p uint64) error
	htod(dst uint64, src unsafe.Pointer, n int) error
	dtoh(dst unsafe.Pointer, src uint64, n int) error
	dtod(dst, src uint64, n int) error
	memset32(dst uint64, v uint32, words int) error
	sync() error
	launch(name string, grid, block [3]uint32, shmem uint32, args []arg) error
	gemm(g *gemmArgs) error
}

// gpu is the backend over the CUDA driver and cuBLAS.
type gpu struct {
	ctx, blas unsafe.Pointer
	fns       map[string]unsafe.Pointer
}

func (g *gpu) alloc(n int) (uint64, error) { return memAlloc(g.ctx, n) }
func (g *gpu) free(p uint64) error         { return memFree(g.ctx, p) }
func (g *gpu) htod(dst uint64, src unsafe.Pointer, n int) error {
	return htod(g.ctx, dst, src, n)
}
func (g *gpu) dtoh(dst unsafe.Pointer, src uint64, n int) error {
	return dtoh(g.ctx, dst, src, n)
}
func (g *gpu) dtod(dst, src uint64, n int) error { return dtod(g.ctx, dst, src, n) }
func (g *gpu) memset32(dst uint64, v uint32, words int) error {
	return memset32(g.ctx, dst, v, words)
}
func (g *gpu) sync() error { return ctxSync(g.ctx) }
func (g *gpu) launch(name string, grid, block [3]uint32, shmem uint32, args []arg) error {
	slots := make([]uint64, len(args))
	for i, a := range args {
		slots[i] = a.v
	}
	return launch(g.ctx, g.fns[name], grid, block, shmem, slots, name)
}
func (g *gpu) gemm(a *gemmArgs) error { return blasGemm(g.ctx, g.blas, a) }

// Device attributes (CUdevice_attribute).
const (
	attrMultiprocessors = 16
	attrCCMajor         = 75
	attrCCMinor         = 76
)

// ErrNoGPU is wrapped by Open's error when the driver loads but sees no
// device; errors.Is tells "no GPU here" apart from a broken installation.
var ErrNoGPU = errors.New("no GPU visible")

// Open loads the CUDA driver, cuBLAS and NVRTC, takes the device's primary
// context, and compiles and loads the kernels for it. Each missing piece is
// a clear error naming the library and the files tried, never a panic:
//
//	no CUDA driver (libcuda.so.1) found: tried ...
//	no GPU visible: ...
//	cuBLAS not found (set ANNA_CUDA_LIBS to the folder holding libcublas.so.13): tried ...
//	NVRTC not found (set ANNA_CUDA_LIBS to the folder holding libnvrtc.so.13): tried ...
func Open(ctx context.Context, opts Options) (d *Device, err error) {
	ctx = safe.Ctx(ctx)
	dirs := opts.LibDirs
	if dirs == nil {
		dirs = SearchDirs()
	}
	drvPath, err := load(driverSpec, dirs)
	if err != nil {
		return nil, err
	}
	if err := drvInit(); err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Code == errNoDevice {
			return nil, fmt.Errorf("%w: the CUDA driver (%s) found no device (CUDA_VISIBLE_DEVICES=%q): %v", ErrNoGPU, drvPath, os.Getenv("CUDA_VISIBLE_DEVICES"), err)
		}
		return nil, fmt.Errorf("cuda: the CUDA driver (%s) failed to initialise: %w", drvPath, err)
	}
	n, err := deviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the CUDA driver (%s) sees 0 devices (CUDA_VISIBLE_DEVICES=%q)", ErrNoGPU, drvPath, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	if opts.Ordinal < 0 || opts.Ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d asked for, the driver sees %d (0…%d)", opts.Ordinal, n, n-1)
	}
	d = &Device{DriverLib: drvPath, Math: opts.Math, debug: opts.Debug}
	if d.DriverVersion, err = drvVersion(); err != nil {
		return nil, err
	}
	if d.dev, err = deviceGet(opts.Ordinal); err != nil {
		return nil, err
	}
	if d.Name, err = deviceName(d.dev); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		dst  *int
		attr int
	}{{&d.Major, attrCCMajor}, {&d.Minor, attrCCMinor}, {&d.SMs, attrMultiprocessors}} {
		if *a.dst, err = deviceAttr(d.dev, a.attr); err != nil {
			return nil, err
		}
	}
	if d.Memory, err = deviceMem(d.dev); err != nil {
		return nil, err
	}
	if d.ctx, err = primaryRetain(d.dev); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
			d = nil
		}
	}()

	if d.CublasLib, err = load(cublasSpec, dirs); err != nil {
		return d, err
	}
	if d.blas, err = blasCreate(d.ctx); err != nil {
		return d, err
	}
	if d.CublasVersion, err = blasVersion(d.ctx, d.blas); err != nil {
		return d, err
	}

	if d.NVRTCVersion[0], d.NVRTCVersion[1], d.NVRTCLib, err = NVRTCVersion(dirs); err != nil {
		return d, err
	}
	if drvMajor := d.DriverVersion / 1000; d.NVRTCVersion[0] > drvMajor {
		return d, fmt.Errorf("cuda: NVRTC %d.%d (%s) is newer than the driver's CUDA %d.%d: its code will not load; "+
			"point %s at an NVRTC of major version %d or older",
			d.NVRTCVersion[0], d.NVRTCVersion[1], d.NVRTCLib, drvMajor, d.DriverVersion%1000/10, EnvLibs, drvMajor)
	}
	archs, err := rtcArchs()
	if err != nil {
		return d, err
	}
	arch, cubin, err := pickArch(d.Major*10+d.Minor, archs)
	if err != nil {
		return d, fmt.Errorf("cuda: %s: %w", d.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return d, err
	}
	if d.Program, err = Compile(arch, cubin, dirs); err != nil {
		return d, err
	}
	if err := ctx.Err(); err != nil {
		return d, err
	}
	if d.mod, err = moduleLoad(d.ctx, d.Program.Image); err != nil {
		return d, fmt.Errorf("cuda: loading the kernels compiled for sm_%d: %w", arch, err)
	}
	fns := make(map[string]unsafe.Pointer, len(kernelSigs))
	for name := range kernelSigs {
		if fns[name], err = moduleFunction(d.ctx, d.mod, name); err != nil {
			return d, err
		}
	}
	d.be = &gpu{ctx: d.ctx, blas: d.blas, fns: fns}
	return d, nil
}

// String describes the device and the libraries in use, for logs.
func (d *Device) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %d SMs, %.1f GiB; driver CUDA %d.%d, cuBLAS %d, NVRTC %d.%d)",
		d.Name, d.Major, d.Minor, d.SMs, float64(d.Memory)/(1<<30), d.DriverVersion/1000, d.DriverVersion%1000/10,
		d.CublasVersion, d.NVRTCVersion[0], d.NVRTCVersion[1])
}

// Sync waits for all work queued on the device and reports the first
// asynchronous error.
func (d *Device) Sync() error {
	if err := d.usable(); err != nil {
		return err
	}
	return d.be.sync()
}

// MemInfo reports the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	if err := d.usable(); err != nil {
		return 0, 0, err
	}
	if d.ctx == nil {
		return 0, 0, errors.New("cuda: no CUDA context")
	}
	return memInfo(d.ctx)
}

// Close releases the kernels, the cuBLAS handle, the scratch buffer and the
// context. Buffers still allocated are freed with the context's last
// release. Close is idempotent.
func (d *Device) Close() error {
	if d == nil || d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	if d.be != nil {
		errs = append(errs, d.be.sync())
		if d.scratch != nil {
			errs = append(errs, d.be.free(d.scratch.ptr))
			d.scratch = nil
		}
	}
	d.be = nil
	if d.mod != nil {
		errs = append(errs, moduleUnload(d.ctx, d.mod))
		d.mod = nil
	}
	if d.blas != nil {
		errs = append(errs, blasDestroy(d.ctx, d.blas))
		d.blas = nil
	}
	if d.ctx != nil {
		errs = append(errs, primaryRelease(d.dev))
		d.ctx = nil
	}
	return errors.Join(errs...)
}

func (d *Device) usable() error {
	if d == nil || d.closed || d.be == nil {
		return errors.New("cuda: device is closed")
	}
	return nil
}

// Buffer is device memory: an allocation, or a view into one (View). Sizes
// are in bytes; most ops take float32 buffers and check that they hold the
// elements the op touches.
type Buffer struct {
	d     *Device
	ptr   uint64
	size  int
	owned bool
}

// Alloc allocates bytes of device memory (contents undefined).
func (d *Device) Alloc(bytes int) (*Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: allocating %d bytes", bytes)
	}
	p, err := d.be.alloc(bytes)
	if err != nil {
		return nil, err
	}
	return &Buffer{d: d, ptr: p, size: bytes, owned: true}, nil
}

// AllocF32 allocates n float32s.
func (d *Device) AllocF32(n int) (*Buffer, error) { return d.Alloc(4 * n) }

// Bytes is the buffer's size.
func (b *Buffer) Bytes() int { return b.size }

// Len32 is the number of 4-byte elements (float32 or int32) it holds.
func (b *Buffer) Len32() int { return b.size / 4 }

// View returns the bytes [off, off+n) of b, sharing its memory; freeing a
// view does nothing.
func (b *Buffer) View(off, n int) (*Buffer, error) {
	if off < 0 || n <= 0 || off+n > b.size {
		return nil, fmt.Errorf("cuda: view [%d, %d) of a %d-byte buffer", off, off+n, b.size)
	}
	return &Buffer{d: b.d, ptr: b.ptr + uint64(off), size: n}, nil
}

// View32 is View in 4-byte elements.
func (b *Buffer) View32(off, n int) (*Buffer, error) { return b.View(4*off, 4*n) }

// Free releases an allocation (not a view). Free on nil is a no-op.
func (b *Buffer) Free() error {
	if b == nil || !b.owned || b.ptr == 0 {
		return nil
	}
	if err := b.d.usable(); err != nil {
		return err
	}
	err := b.d.be.free(b.ptr)
	b.ptr, b.owned = 0, false
	return err
}

// Fill32 sets every 4-byte word of b to bits (0 for zero, 0x7fc00000 for a
// float32 NaN to poison outputs in tests).
func (b *Buffer) Fill32(bits uint32) error {
	if err := b.d.usable(); err != nil {
		return err
	}
	return b.d.be.memset32(b.ptr, bits, b.size/4)
}

// Zero clears b.
func (b *Buffer) Zero() error { return b.Fill32(0) }

// CopyFrom copies src (device to device) into b's first src.Bytes() bytes.
func (b *Buffer) CopyFrom(src *Buffer) error {
	if err := b.d.usable(); err != nil {
		return err
	}
	if src.size > b.size {
		return fmt.Errorf("cuda: copying %d bytes into a %d-byte buffer", src.size, b.size)
	}
	return b.d.be.dtod(b.ptr, src.ptr, src.size)
}

// Elem is what crosses between host slices and device buffers.
type Elem interface{ ~float32 | ~int32 | ~uint16 }

// Upload copies src into the start of b (synchronously).
func Upload[T Elem](b *Buffer, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := len(src) * int(unsafe.Sizeof(src[0]))
	if n > b.size {
		return fmt.Errorf("cuda: uploading %d bytes into a %d-byte buffer", n, b.size)
	}
	if err := b.d.usable(); err != nil {
		return err
	}
	return b.d.be.htod(b.ptr, unsafe.Pointer(&src[0]), n)
}

// Download copies the start of b into dst, waiting for queued work.
func Download[T Elem](dst []T, b *Buffer) error {
	if len(dst) == 0 {
		return nil
	}
	n := len(dst) * int(unsafe.Sizeof(dst[0]))
	if n > b.size {
		return fmt.Errorf("cuda: downloading %d bytes from a %d-byte buffer", n, b.size)
	}
	if err := b.d.usable(); err != nil {
		return err
	}
	return b.d.be.dtoh(unsafe.Pointer(&dst[0]), b.ptr, n)
}

// NewF32 allocates a buffer holding a copy of src.
func (d *Device) NewF32(src []float32) (*Buffer, error) { return newFrom(d, src) }

// NewI32 allocates a buffer holding a copy of src.
func (d *Device) NewI32(src []int32) (*Buffer, error) { return newFrom(d, src) }

func newFrom[T Elem](d *Device, src []T) (*Buffer, error) {
	var z T
	b, err := d.Alloc(max(len(src), 1) * int(unsafe.Sizeof(z)))
	if err != nil {
		return nil, err
	}
	if err := Upload(b, src); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// scratchF32 returns n float32s of the device's scratch memory, growing it
// as needed. Scratch is valid until the next op that uses scratch.
func (d *Device) scratchF32(n int) (*Buffer, error) {
	need := 4 * max(n, 1)
	if d.scratch == nil || d.scratch.size < need {
		if d.scratch != nil {
			// Queued kernels may still read the old scratch.
			if err := d.be.sync(); err != nil {
				return nil, err
			}
			if err := d.be.free(d.scratch.ptr); err != nil {
				return nil, err
			}
			d.scratch = nil
		}
		p, err := d.be.alloc(need + need/4) // some headroom against regrowth
		if err != nil {
			return nil, fmt.Errorf("cuda: scratch: %w", err)
		}
		d.scratch = &Buffer{d: d, ptr: p, size: need + need/4}
	}
	return &Buffer{d: d, ptr: d.scratch.ptr, size: need}, nil
}

// splitF32 cuts b into consecutive views of the given float32 counts.
func splitF32(b *Buffer, ns ...int) []*Buffer {
	out := make([]*Buffer, len(ns))
	off := uint64(0)
	for i, n := range ns {
		out[i] = &Buffer{d: b.d, ptr: b.ptr + off, size: 4 * n}
		off += uint64(4 * n)
	}
	return out
}
