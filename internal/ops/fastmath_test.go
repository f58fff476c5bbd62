package ops

import (
	"math"
	"testing"
)

func TestFastMath(t *testing.T) {
	var maxErf, maxExp float64
	for x := -10.0; x <= 10; x += 1e-4 {
		maxErf = math.Max(maxErf, math.Abs(float64(Erf32(float32(x)))-math.Erf(float64(float32(x)))))
	}
	for x := -87.0; x <= 88; x += 1e-3 {
		want := math.Exp(float64(float32(x)))
		maxExp = math.Max(maxExp, math.Abs(float64(Exp32(float32(x)))-want)/want)
	}
	if maxErf > 1e-6 || maxExp > 5e-7 {
		t.Fatalf("erf32 max abs error %.3g (want ≤ 1e-6), exp32 max relative error %.3g (want ≤ 5e-7)", maxErf, maxExp)
	}
	t.Logf("erf32 max abs error %.3g, exp32 max relative error %.3g", maxErf, maxExp)
	if Exp32(-100) != 0 {
		t.Fatal("Exp32(-100) != 0")
	}
}

// exp32Floor is Exp32 as it was written first, with math.Floor: the
// reference that the faster rounding must reproduce bit for bit.
func exp32Floor(x float32) float32 {
	if x < -87 {
		return 0
	}
	if x > 88 {
		return float32(math.Inf(1))
	}
	k := float32(math.Floor(float64(float32(x*1.44269504088896341) + 0.5)))
	r := x - float32(k*0.693359375) - float32(k*-2.12194440e-4)
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(float32(p*r)*r) + r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// TestExp32MatchesFloorForm: Exp32 and expSubSum give exactly the values
// of the math.Floor form (the trainer's numbers must not move), on a
// dense sweep of [−90, 90] and on the float32 neighbours of every point
// where k changes (x·log2e + 0.5 an integer), where a rounding slip would
// show.
func TestExp32MatchesFloorForm(t *testing.T) {
	var xs []float32
	for x := -90.0; x <= 90; x += 7e-4 {
		xs = append(xs, float32(x))
	}
	for k := -130; k <= 130; k++ {
		c := float32((float64(k) - 0.5) / 1.44269504088896341)
		for _, d := range []float32{c, math.Nextafter32(c, -200), math.Nextafter32(c, 200),
			math.Nextafter32(math.Nextafter32(c, -200), -200), math.Nextafter32(math.Nextafter32(c, 200), 200)} {
			xs = append(xs, d)
		}
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), -87, 88, float32(math.Inf(-1)))
	for _, x := range xs {
		if got, want := Exp32(x), exp32Floor(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("Exp32(%v) = %v, the math.Floor form gives %v", x, got, want)
		}
	}
	row := append([]float32(nil), xs...)
	var want float32
	for _, x := range xs {
		want += exp32Floor(x - 1.5)
	}
	if got := expSubSum(row, 1.5); math.Float32bits(got) != math.Float32bits(want) {
		t.Fatalf("expSubSum's sum %v, the scalar loop's %v", got, want)
	}
	for j, x := range xs {
		if w := exp32Floor(x - 1.5); math.Float32bits(row[j]) != math.Float32bits(w) {
			t.Fatalf("expSubSum: e^(%v − 1.5) = %v, want %v", x, row[j], w)
		}
	}
}

func BenchmarkSoftmaxRow(b *testing.B) {
	row := make([]float32, 256)
	src := make([]float32, 256)
	for i := range src {
		src[i] = float32(i%37) * 0.3
	}
	for range b.N {
		copy(row, src)
		SoftmaxPrefix(row, len(row))
	}
}

// TestSoftmaxMaskedMatchesScalar: the masked softmax (BERT's key mask,
// holes included) gives, bit for bit, what Exp32 one key at a time gives.
func TestSoftmaxMaskedMatchesScalar(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 31, 64, 133} {
		row := make([]float32, n+3)
		msk := make([]float32, n)
		for j := range row {
			row[j] = float32((j*37)%23)*0.7 - 5
		}
		for j := range msk {
			if j%5 != 3 || j == 0 {
				msk[j] = 1
			}
		}
		want := append([]float32(nil), row...)
		mx := float32(math.Inf(-1))
		for j := range msk {
			if msk[j] != 0 {
				mx = max(mx, want[j])
			}
		}
		var sum float32
		for j := range msk {
			if msk[j] == 0 {
				want[j] = 0
				continue
			}
			want[j] = exp32Floor(want[j] - mx)
			sum += want[j]
		}
		for j := range msk {
			want[j] *= 1 / sum
		}
		clear(want[n:])
		softmaxMasked(row, n, msk)
		for j := range row {
			if math.Float32bits(row[j]) != math.Float32bits(want[j]) {
				t.Fatalf("n=%d: p[%d] = %v, the scalar softmax gives %v", n, j, row[j], want[j])
			}
		}
	}
}
