package tensor

import (
	"testing"
	"time"
)

// TestMeasurePeaks: every peak loop this CPU has runs and gives a rate
// (logged with -v), and the int8 kernel the products run has its loop.
func TestMeasurePeaks(t *testing.T) {
	ps := MeasurePeaks(20 * time.Millisecond)
	f32, i8 := Kernels()
	t.Logf("kernels: float32 %s, int8 %s", f32, i8)
	seen := map[string]bool{}
	for _, p := range ps {
		t.Logf("%-12s %8.1f G op/s per core", p.Name, p.OpsPerSec/1e9)
		if !(p.OpsPerSec > 0) {
			t.Errorf("%s: rate %v", p.Name, p.OpsPerSec)
		}
		seen[p.Name] = true
	}
	want := map[string]string{"amx": "amx-int8", "avx512vnni": "avx512-vnni", "avx2": "avx2-int8"}[i8]
	if want != "" && !seen[want] {
		t.Errorf("int8 kernel %s has no peak loop %s", i8, want)
	}
}
