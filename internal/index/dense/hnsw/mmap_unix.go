//go:build unix

package hnsw

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileMapping is a mapping of part of a file; it is unmapped when the
// last graph holding it is garbage-collected (every read of the mapping
// happens in a method holding the graph's lock, so the graph is alive
// meanwhile).
type fileMapping struct {
	data []byte
}

// mapFloats maps count float32 at off (a multiple of 4) of f: private and
// writable, so that a compaction may move vectors in it without touching
// the file (the pages it writes become private copies). The pages are
// advised MADV_RANDOM: a search touches a few vectors at random places,
// and read-ahead would only make more of the file resident.
func mapFloats(f *os.File, off int64, count int) (*fileMapping, []float32, error) {
	if count == 0 {
		return nil, nil, nil
	}
	page := int64(os.Getpagesize())
	base := off &^ (page - 1)
	length := int(off-base) + 4*count
	data, err := syscall.Mmap(int(f.Fd()), base, length, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	_ = unix.Madvise(data, unix.MADV_RANDOM) // advice only (x/sys: package syscall has no Madvise on darwin)
	fm := &fileMapping{data: data}
	runtime.AddCleanup(fm, func(d []byte) { _ = syscall.Munmap(d) }, data)
	floats := unsafe.Slice((*float32)(unsafe.Pointer(&data[off-base])), count)
	return fm, floats, nil
}
