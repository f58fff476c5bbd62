package tensor

import "time"

// Peak is the throughput bound of one kind of kernel on one core: the
// rate of its widest multiply-add instruction, measured by a loop of that
// instruction alone on registers (MeasurePeaks). Ops count a
// multiply-add as two (a FLOP pair in float32).
type Peak struct {
	Name      string  // avx512-fma, avx2-fma, amx-int8, avx512-vnni, avx2-int8
	Int8      bool    // an int8 kernel (else float32)
	OpsPerSec float64 // per core (per goroutine locked to its thread)
}

// Kernels names the micro-kernels this process's products run: the
// float32 inference GEMM's and the int8 GEMM's (for a weight whose values
// every int8 kernel sums exactly), e.g. "avx512" and "amx".
func Kernels() (float32Kernel, int8Kernel string) {
	return inferKernel.name, int8Kernels()[0].name
}

// peakLoop is one peak loop: rounds(n) runs n rounds of opsPerRound ops.
type peakLoop struct {
	name        string
	int8        bool
	opsPerRound float64
	rounds      func(n int)
}

// MeasurePeaks runs each peak loop this CPU has (peakLoops) for about d
// on one thread, best of three, timed by the thread's own CPU time where
// the OS gives it (Linux), so that other processes on a shared machine
// slow it less; the order is float32 kernels widest first, then int8.
func MeasurePeaks(d time.Duration) []Peak {
	var out []Peak
	for _, l := range peakLoops() {
		best := 0.0
		for range 3 {
			best = max(best, measurePeak(l, d))
		}
		out = append(out, Peak{Name: l.name, Int8: l.int8, OpsPerSec: best})
	}
	return out
}
