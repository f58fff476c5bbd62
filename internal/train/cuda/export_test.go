package cuda

import (
	"context"
	"testing"
)

// NewEmulatedDevice is the host emulator of the kernels (emu_test.go) for
// the external tests that compare with the train package.
func NewEmulatedDevice() *Device {
	d, _ := newEmuDevice()
	return d
}

// OpenOrSkip opens the GPU with opts for a test that checks what on it,
// closed when the test ends; without a GPU the test is skipped, saying so.
func OpenOrSkip(t testing.TB, opts Options, what string) *Device {
	t.Helper()
	d, err := Open(context.Background(), opts)
	if err != nil {
		t.Skipf("no GPU here; %s is checked on a machine with one: %v", what, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
