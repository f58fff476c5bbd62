package cuda

// NewEmulatedDevice is the host emulator of the kernels (emu_test.go) for
// the external tests that compare with the train package.
func NewEmulatedDevice() *Device {
	d, _ := newEmuDevice()
	return d
}
