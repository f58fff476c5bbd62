package tensor

import (
	"runtime"
	"time"

	"golang.org/x/sys/cpu"
)

// The peak loops in peak_amd64.s (12 independent instructions a round)
// and amx_amd64.s (4 TDPBUSD a round).
//
//go:noescape
func peakFMA512(n int)

//go:noescape
func peakFMA256(n int)

//go:noescape
func peakVNNI512(n int)

//go:noescape
func peakAVX2Int8(n int)

//go:noescape
func peakAMX(n int, cfg *byte, buf *byte)

var peakAMXBuf [1024]byte

func peakLoops() []peakLoop {
	var ls []peakLoop
	avx512 := cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
	if avx512 {
		ls = append(ls, peakLoop{"avx512-fma", false, 12 * 16 * 2, peakFMA512})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ls = append(ls, peakLoop{"avx2-fma", false, 12 * 8 * 2, peakFMA256})
	}
	for _, k := range int8Kernels() {
		switch k.name {
		case "amx":
			ls = append(ls, peakLoop{"amx-int8", true, 4 * 16 * 16 * 64 * 2, func(n int) { peakAMX(n, &amxTileConfig[0], &peakAMXBuf[0]) }})
		case "avx512vnni":
			ls = append(ls, peakLoop{"avx512-vnni", true, 12 * 64 * 2, peakVNNI512})
		case "avx2":
			// 4 VPMADDUBSW of 32 products each, 3 instructions per 32.
			ls = append(ls, peakLoop{"avx2-int8", true, 4 * 32 * 2, peakAVX2Int8})
		}
	}
	return ls
}

// measurePeak runs l for about d on a locked thread and returns its ops
// per second of that thread's CPU time.
func measurePeak(l peakLoop, d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 1 << 10
	for {
		c0 := threadCPU()
		l.rounds(n)
		t := threadCPU() - c0
		if t >= d {
			return float64(n) * l.opsPerRound / t.Seconds()
		}
		if t < d/16 {
			n *= 8
		} else {
			n = int(float64(n) * 1.2 * float64(d) / float64(max(t, 1)))
		}
	}
}
