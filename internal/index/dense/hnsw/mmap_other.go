//go:build !unix

package hnsw

import (
	"fmt"
	"io"
	"os"
)

type fileMapping struct{}

// mapFloats reads the count float32 at off of f into memory (no mmap on
// this platform).
func mapFloats(f *os.File, off int64, count int) (*fileMapping, []float32, error) {
	v, err := readRaw[float32](io.NewSectionReader(f, off, 4*int64(count)), count, 4*int64(count))
	if err != nil {
		return nil, nil, fmt.Errorf("read vectors of %s: %w", f.Name(), err)
	}
	return nil, v, nil
}
