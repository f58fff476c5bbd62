//go:build !amd64

package tensor

import "time"

// peakLoops is empty: no peak loop is written for this architecture.
func peakLoops() []peakLoop { return nil }

func measurePeak(l peakLoop, d time.Duration) float64 { return 0 }
