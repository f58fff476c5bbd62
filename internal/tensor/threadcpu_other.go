//go:build !linux

package tensor

import "time"

// threadCPU is wall time where no thread CPU clock is read.
func threadCPU() time.Duration { return time.Duration(time.Now().UnixNano()) }
