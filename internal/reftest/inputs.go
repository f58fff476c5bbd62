package reftest

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
)

// Seqs is a batch of N token sequences right-padded to T positions.
type Seqs struct {
	N, T int
	IDs  []int32   // N×T; padding positions hold ids too, which a model must ignore
	Mask []float32 // N×T: 1 at a sequence's tokens, 0 at its padding
	Lens []int     // each sequence's tokens
}

// Padded draws n sequences of T positions as the reference tests feed
// them: sequence i holds minLen(i) + r.IntN(T−minLen(i)+1) tokens (2 when
// minLen is nil), the first all T so that one sequence is unpadded, and
// every position, padding included, an id uniform in [lo, vocab). Each
// sequence's length is drawn before its ids.
func Padded(r *rand.Rand, n, T, lo, vocab int, minLen func(i int) int) Seqs {
	return padded(r, n, T, lo, vocab, minLen, true)
}

// PaddedZero is Padded with ids drawn for the tokens only, the padding's
// left 0 (BERT's tests).
func PaddedZero(r *rand.Rand, n, T, lo, vocab int, minLen func(i int) int) Seqs {
	return padded(r, n, T, lo, vocab, minLen, false)
}

func padded(r *rand.Rand, n, T, lo, vocab int, minLen func(i int) int, padIDs bool) Seqs {
	s := Seqs{N: n, T: T, IDs: make([]int32, n*T), Mask: make([]float32, n*T), Lens: make([]int, n)}
	for i := range n {
		least := 2
		if minLen != nil {
			least = minLen(i)
		}
		L := least + r.IntN(T-least+1)
		if i == 0 {
			L = T
		}
		s.Lens[i] = L
		for t := range T {
			if t < L {
				s.Mask[i*T+t] = 1
			}
			if t < L || padIDs {
				s.IDs[i*T+t] = int32(lo + r.IntN(vocab-lo))
			}
		}
	}
	return s
}

// PairTypes returns token types for sequence pairs, as BERT's
// cross-encoder tests feed them: 1 on the second half of each sequence's
// tokens, 0 elsewhere.
func (s Seqs) PairTypes() []int32 {
	types := make([]int32, s.N*s.T)
	for i, L := range s.Lens {
		for t := L / 2; t < L; t++ {
			types[i*s.T+t] = 1
		}
	}
	return types
}

// Rows splits x, rows of T, into one slice per row (a job's JSON lists).
func Rows[E any](x []E, T int) [][]E {
	out := make([][]E, 0, len(x)/max(T, 1))
	for i := 0; i+T <= len(x) && T > 0; i += T {
		out = append(out, x[i:i+T])
	}
	return out
}

// Randn returns n values of scale·N(0, 1).
func Randn(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(scale * r.NormFloat64())
	}
	return x
}

// Fill sets every value of ws to scale·N(0, 1): LoRA's B factors start at
// zero, which would make A's gradient zero, so a test gives them values
// to check both factors' gradients.
func Fill(r *rand.Rand, scale float64, ws ...[]float32) {
	for _, w := range ws {
		for i := range w {
			w[i] = float32(scale * r.NormFloat64())
		}
	}
}

// FillTrainable fills the parameters that train (ps not Frozen) as Fill:
// under LoRA, the factors.
func FillTrainable(r *rand.Rand, scale float64, ps ...*ops.Param) {
	for _, p := range ps {
		if !p.Frozen {
			Fill(r, scale, p.W)
		}
	}
}

// Jitter adds scale·N(0, 1) to every value of ws: zero biases and unit
// gains move away from where their paths would be hidden.
func Jitter(r *rand.Rand, scale float64, ws ...[]float32) {
	for _, w := range ws {
		for i := range w {
			w[i] += float32(scale * r.NormFloat64())
		}
	}
}

// WriteParams writes the parameters' current values to path as
// safetensors, for a reference script to load, and returns the names of the
// unfrozen ones in order: the gradients the script must return.
func WriteParams(tb testing.TB, path string, ps ...*ops.Param) (trainable []string) {
	tb.Helper()
	raw := map[string]*safetensors.Tensor{}
	for _, q := range ps {
		raw[q.Name] = &safetensors.Tensor{Name: q.Name, DType: "F32", Shape: q.Shape, Data: q.W}
		if !q.Frozen {
			trainable = append(trainable, q.Name)
		}
	}
	if err := safetensors.WriteFile(path, raw, nil); err != nil {
		tb.Fatal(err)
	}
	return trainable
}

// WriteJSON writes each value as the JSON file of its name in dir (a
// reference job's config.json, batch.json, ...).
func WriteJSON(tb testing.TB, dir string, files map[string]any) {
	tb.Helper()
	for name, v := range files {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
