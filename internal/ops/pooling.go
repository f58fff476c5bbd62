package ops

import (
	"fmt"

	"github.com/anna-search/anna/model"
)

// Pooling modes (the manifest's names).
const (
	PoolMean = model.PoolingMean      // the mean over the real tokens
	PoolCLS  = model.PoolingCLS       // the first token's row
	PoolLast = model.PoolingLastToken // the last real token's row (a decoder's EOS)
)

// PoolForward writes one vector per sequence into out (N×C) from hidden
// (N×T×C): for sequence n, over its first lens[n] positions, the mean of
// the rows weighted by mask (N×T, BERT's attention mask, which may leave
// holes; nil: every position before lens[n] is a real token), the first
// row, or the last real one. A mode it does not know is an error.
func PoolForward(out, hidden, mask []float32, lens []int, N, T, C int, mode string) error {
	switch mode {
	case PoolMean, PoolCLS, PoolLast:
	default:
		return fmt.Errorf("pooling %q not supported (want %s, %s or %s)", mode, PoolMean, PoolCLS, PoolLast)
	}
	clear(out[:N*C])
	for n := 0; n < N; n++ {
		o := out[n*C : n*C+C]
		switch mode {
		case PoolMean:
			for t := 0; t < lens[n]; t++ {
				if mk := maskAt(mask, n*T+t); mk != 0 {
					for c, v := range hidden[(n*T+t)*C : (n*T+t)*C+C] {
						o[c] += v * mk
					}
				}
			}
			cnt := maskSum(mask, n*T, lens[n])
			for c := range o {
				o[c] /= cnt
			}
		case PoolCLS:
			copy(o, hidden[n*T*C:n*T*C+C])
		case PoolLast:
			t := lens[n] - 1
			copy(o, hidden[(n*T+t)*C:(n*T+t)*C+C])
		}
	}
	return nil
}

// PoolBackward adds to dhidden (N×T×C) the gradient given dout (N×C), for
// PoolForward's arguments.
func PoolBackward(dhidden, dout, mask []float32, lens []int, N, T, C int, mode string) {
	for n := 0; n < N; n++ {
		d := dout[n*C : n*C+C]
		switch mode {
		case PoolMean:
			cnt := maskSum(mask, n*T, lens[n])
			for t := 0; t < lens[n]; t++ {
				mk := maskAt(mask, n*T+t)
				dh := dhidden[(n*T+t)*C : (n*T+t)*C+C]
				for c, v := range d {
					if mk != 0 {
						dh[c] += v * mk / cnt
					}
				}
			}
		case PoolCLS:
			addRow(dhidden[n*T*C:n*T*C+C], d)
		case PoolLast:
			addRow(dhidden[(n*T+lens[n]-1)*C:(n*T+lens[n])*C], d)
		}
	}
}

// maskSum is the mean's divisor: the mask's sum over the L positions from
// row (L without a mask), at least 1e-9.
func maskSum(mask []float32, row, L int) float32 {
	var cnt float32
	for t := 0; t < L; t++ {
		cnt += maskAt(mask, row+t)
	}
	return max(cnt, 1e-9)
}

// maskAt is mask[i], or 1 when there is no mask.
func maskAt(mask []float32, i int) float32 {
	if mask == nil {
		return 1
	}
	return mask[i]
}
