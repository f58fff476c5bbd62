package cuda

import (
	"fmt"
	"math"
	"strings"
)

// What every op's launcher (embedding.go, layernorm.go, … beside
// kernels/embedding.cu, kernels/layernorm.cu, …) uses: the size checks
// that turn a launch out of bounds into an error, the grid geometry, the
// kernel arguments and launch, which checks them against kernelSigs.
// The ops mirror the CPU's (internal/ops, internal/train/objective, train's AdamW):
// same arguments (device buffers in place of slices), same layouts, same
// math. Ops queue work and return; Sync or a Download waits for it.

// need checks that b holds n 4-byte elements; what names it in the error.
func need(opName, what string, b *Buffer, n int) error {
	if b == nil {
		return fmt.Errorf("cuda: %s: %s is nil", opName, what)
	}
	if b.size < 4*n {
		return fmt.Errorf("cuda: %s: %s holds %d elements, needs %d", opName, what, b.size/4, n)
	}
	return nil
}

// needOpt is need for a buffer that may be nil (frozen parameters, unsaved
// statistics).
func needOpt(opName, what string, b *Buffer, n int) error {
	if b == nil {
		return nil
	}
	return need(opName, what, b, n)
}

func blocks(n int64, per int) uint32 {
	return uint32((n + int64(per) - 1) / int64(per))
}

func grid1(n uint32) [3]uint32      { return [3]uint32{n, 1, 1} }
func block1(n uint32) [3]uint32     { return [3]uint32{n, 1, 1} }
func elementwise(n int64) [3]uint32 { return grid1(blocks(n, 256)) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// arg is one kernel parameter in an 8-byte slot.
type arg struct {
	kind byte // as in kernelSigs
	v    uint64
}

func ptr(b *Buffer) arg {
	if b == nil {
		return arg{'p', 0}
	}
	return arg{'p', b.ptr}
}
func i32(v int) arg     { return arg{'i', uint64(uint32(int32(v)))} }
func i64(v int) arg     { return arg{'l', uint64(int64(v))} }
func f32(v float32) arg { return arg{'f', uint64(math.Float32bits(v))} }

// launch runs kernel name after checking its arguments against
// kernelSigs (the wrappers check sizes and ranges first).
func (d *Device) launch(name string, grid, block [3]uint32, shmem uint32, args ...arg) error {
	if err := d.usable(); err != nil {
		return err
	}
	if n := int64(block[0]) * int64(block[1]) * int64(block[2]); n == 0 || n > 1024 {
		return fmt.Errorf("cuda: %s: block %v has %d threads (1…1024)", name, block, n)
	}
	sig, ok := kernelSigs[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %q", name)
	}
	if err := checkArgs(name, sig, args); err != nil {
		return err
	}
	for _, g := range grid {
		if g == 0 {
			return nil // empty problem
		}
	}
	if err := d.be.launch(name, grid, block, shmem, args); err != nil {
		return err
	}
	if d.debug {
		if err := d.be.sync(); err != nil {
			return fmt.Errorf("cuda: after %s: %w", name, err)
		}
	}
	return nil
}

func checkArgs(name, sig string, args []arg) error {
	if len(args) != len(sig) {
		return fmt.Errorf("cuda: %s takes %d arguments, got %d", name, len(sig), len(args))
	}
	var bad []string
	for i, a := range args {
		if a.kind != sig[i] {
			bad = append(bad, fmt.Sprintf("#%d is %c, want %c", i, a.kind, sig[i]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("cuda: %s: %s", name, strings.Join(bad, ", "))
	}
	return nil
}
