package zap

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSkipFreqNorms (anna): skipFreqNorms against reading each entry with
// ReadUvarint, over entries of every length a uvarint has (1-10 bytes),
// frequencies of 0 (no norm), and chunks cut short.
func TestSkipFreqNorms(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	val := func() uint64 { return rng.Uint64() >> rng.IntN(64) }
	for trial := range 2000 {
		var buf []byte
		var ends []int // the offset after each entry
		for range 1 + rng.IntN(40) {
			f := val() &^ 1
			if rng.IntN(8) == 0 {
				f = uint64(rng.IntN(2)) // frequency 0, locations or not
			}
			buf = binary.AppendUvarint(buf, f)
			if f>>1 != 0 {
				buf = binary.AppendUvarint(buf, val())
			}
			ends = append(ends, len(buf))
		}
		if trial%5 == 0 {
			buf = buf[:rng.IntN(len(buf)+1)] // cut short
		}
		from := rng.IntN(len(ends))
		start := 0
		if from > 0 {
			start = ends[from-1]
		}
		if start > len(buf) {
			continue
		}
		n := rng.IntN(len(ends) - from + 2)
		r := newMemUvarintReader(buf)
		r.C = start
		r.skipFreqNorms(n)
		want := len(buf)
		if from+n-1 < len(ends) && n > 0 {
			want = min(ends[from+n-1], len(buf))
		} else if n == 0 {
			want = start
		}
		if r.C != want {
			t.Fatalf("trial %d: skipping %d entries from byte %d of %d: at %d, want %d", trial, n, start, len(buf), r.C, want)
		}
	}
}
