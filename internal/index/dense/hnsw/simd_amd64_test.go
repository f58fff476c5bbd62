//go:build !purego

package hnsw

import (
	"math/rand"
	"testing"
)

// i8Kernels are the int8 dot kernels this CPU runs, by name.
func i8Kernels() map[string]func(a *uint8, s *int8, c *int8, n int) int32 {
	k := map[string]func(a *uint8, s *int8, c *int8, n int) int32{}
	if useAVX2 {
		k["avx2"] = func(a *uint8, s *int8, c *int8, n int) int32 { return dotI8Asm(a, s, c, n, false) }
	}
	if useVNNI {
		k["vnni"] = func(a *uint8, s *int8, c *int8, n int) int32 { return dotI8Asm(a, s, c, n, true) }
	}
	return k
}

// Each assembly kernel equals the exact integer sum over multiples of 32
// up to 512 (its 64- and 32-wide steps), values at the ends of the range
// included.
func TestDotI8Kernels(t *testing.T) {
	ks := i8Kernels()
	t.Logf("int8 kernels on this CPU: %d (avx2 %v, vnni %v)", len(ks), ks["avx2"] != nil, ks["vnni"] != nil)
	rng := rand.New(rand.NewSource(5))
	for n := 32; n <= 512; n += 32 {
		a, s, c := randI8(rng, n)
		want := dotI8Generic(s, c)
		for name, k := range ks {
			if got := k(&a[0], &s[0], &c[0], n); got != want {
				t.Fatalf("%s, n=%d: %d, want %d", name, n, got, want)
			}
		}
	}
}

// BenchmarkDotI8Kernels_384 times each kernel on 384-d codes, side by side.
func BenchmarkDotI8Kernels_384(b *testing.B) {
	a, s, c := randI8(rand.New(rand.NewSource(1)), 384)
	for name, k := range i8Kernels() {
		b.Run(name, func(b *testing.B) {
			var d int32
			for b.Loop() {
				d += k(&a[0], &s[0], &c[0], 384)
			}
			_ = d
		})
	}
}
