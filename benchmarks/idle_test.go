package benchmarks

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitIdle waits until this process has used under 5% of a core over half
// a second, at most two minutes. After a large ingest, Bleve's scorch may
// still be persisting and merging segments in background goroutines; timing
// queries while it does would measure that work too. (In the runs so far
// the process was idle within half a second; it logs how long it waited.)
//
// Then it waits until the rest of the machine is quiet too — other
// processes together under 10% of one core over a second — for at most
// ANNA_BENCH_QUIET_WAIT (a Go duration, default 2m), so that a long build
// may share the machine with other work while the timed phase does not. It
// logs whether the machine was quiet when the timing began.
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
	idle := false
	for time.Since(start) < 2*time.Minute {
		c0 := cpu()
		time.Sleep(500 * time.Millisecond)
		if cpu()-c0 < 25*time.Millisecond {
			b.Logf("process idle after %s", time.Since(start).Round(100*time.Millisecond))
			idle = true
			break
		}
	}
	if !idle {
		b.Logf("process still busy after %s: timings include background work", time.Since(start).Round(time.Second))
	}

	limit := 2 * time.Minute
	if s := os.Getenv("ANNA_BENCH_QUIET_WAIT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("ANNA_BENCH_QUIET_WAIT=%q: %v", s, err)
		}
		limit = d
	}
	start = time.Now()
	for {
		m0, err := machineBusy()
		if err != nil {
			b.Logf("machine load unknown (%v): timings may include other work", err)
			return
		}
		c0 := cpu()
		time.Sleep(time.Second)
		m1, err := machineBusy()
		if err != nil {
			b.Logf("machine load unknown (%v): timings may include other work", err)
			return
		}
		others := (m1 - m0) - (cpu() - c0)
		if others < 100*time.Millisecond {
			b.Logf("machine quiet after %s (other processes: %.0f%% of a core)", time.Since(start).Round(time.Second), 100*others.Seconds())
			return
		}
		if time.Since(start) >= limit {
			b.Logf("machine still busy after %s (other processes: %.0f%% of a core): timings include other work",
				time.Since(start).Round(time.Second), 100*others.Seconds())
			return
		}
	}
}

// machineBusy is the CPU time every core of the machine has spent outside
// idle and iowait since boot, from /proc/stat's first line.
func machineBusy() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("/proc/stat: empty")
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", sc.Text())
	}
	var busy int64
	for i, s := range fields[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 7 { // guest time is counted in user already
			break
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d: %w", i+1, err)
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / 100, nil // USER_HZ is 100 on Linux
}
