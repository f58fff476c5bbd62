package benchmarks

import (
	"syscall"
	"testing"
	"time"
)

// waitIdle waits until this process has used under 5% of a core over half
// a second, at most two minutes. After a large ingest, Bleve's scorch may
// still be persisting and merging segments in background goroutines; timing
// queries while it does would measure that work too. (In the runs so far
// the process was idle within half a second; it logs how long it waited.)
func waitIdle(b *testing.B) {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatalf("getrusage: %v", err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := time.Now()
	for time.Since(start) < 2*time.Minute {
		c0 := cpu()
		time.Sleep(500 * time.Millisecond)
		if cpu()-c0 < 25*time.Millisecond {
			b.Logf("process idle after %s", time.Since(start).Round(100*time.Millisecond))
			return
		}
	}
	b.Logf("process still busy after %s: timings include background work", time.Since(start).Round(time.Second))
}
