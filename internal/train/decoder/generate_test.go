package decoder

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/internal/testmodels"
)

// fullLogits runs Forward over whole sequences and returns each one's
// logits at every real position (a reference for the cached path).
func fullLogits(t *testing.T, m *Model, seqs [][]int32) [][][]float32 {
	t.Helper()
	T := 0
	for _, s := range seqs {
		T = max(T, len(s))
	}
	b := &Batch{N: len(seqs), T: T, IDs: make([]int32, len(seqs)*T), Mask: make([]float32, len(seqs)*T)}
	for n, s := range seqs {
		copy(b.IDs[n*T:], s)
		for i := range s {
			b.Mask[n*T+i] = 1
		}
	}
	a, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	C, V := m.Cfg.HiddenSize, m.Cfg.VocabSize
	out := make([][][]float32, len(seqs))
	for n, s := range seqs {
		for p := range s {
			row := make([]float32, V)
			r := n*T + p
			tensor.Gemm(false, true, 1, V, C, 1, a.Hidden[r*C:r*C+C], C, m.LMHead().W, C, 0, row, V, 1)
			out[n] = append(out[n], row)
		}
	}
	return out
}

func maxDiff(a, b []float32) (d, scale float64) {
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		scale = max(scale, math.Abs(float64(b[i])))
	}
	return d, scale
}

// TestStepMatchesForward: decoding with the key/value cache (Extend over
// the prompts in two chunks, then Step one token at a time, each sequence
// at its own position) gives the logits Forward gives the whole sequences
// at the same positions, for tiny random Llama, Qwen2 (QKV biases) and
// Qwen3 (q/k norms) models, with and without LoRA.
func TestStepMatchesForward(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, lora := range []bool{false, true} {
			cfg := testmodels.Decoder(arch)
			r := rand.New(rand.NewPCG(7, 7))
			m, err := New(cfg, RandomTensors(cfg, 0.2, 7))
			if err != nil {
				t.Fatal(err)
			}
			if lora {
				if err := m.EnableLoRA(LoRAConfig{Rank: 3, Alpha: 6}, 7); err != nil {
					t.Fatal(err)
				}
				for _, p := range m.Params {
					if isLoRAName(p.Name) {
						for i := range p.W {
							p.W[i] = float32(0.1 * r.NormFloat64())
						}
					}
				}
			}
			var seqs, prompts [][]int32
			maxNew := 0
			for _, L := range []int{14, 9, 20} {
				s := make([]int32, L)
				for i := range s {
					s[i] = int32(r.IntN(cfg.VocabSize))
				}
				P := 1 + r.IntN(L-1)
				seqs, prompts = append(seqs, s), append(prompts, s[:P])
				maxNew = max(maxNew, L-P)
			}
			ref := fullLogits(t, m, seqs)
			c, err := m.NewCache(len(seqs), 32)
			if err != nil {
				t.Fatal(err)
			}
			// The prompts in two chunks each (the first may be empty), so
			// that a chunk attends to what an earlier one cached.
			split := make([][]int32, len(prompts))
			for n, p := range prompts {
				split[n] = p[:len(p)/2]
			}
			if _, err := m.Extend(c, split); err != nil {
				t.Fatal(err)
			}
			for n, p := range prompts {
				split[n] = p[len(p)/2:]
			}
			logits, err := m.Extend(c, split)
			if err != nil {
				t.Fatal(err)
			}
			V := cfg.VocabSize
			worst := 0.0
			check := func(step int) {
				for n, s := range seqs {
					p := len(prompts[n]) - 1 + step // the position whose logits these are
					if p >= len(s) {
						continue
					}
					d, scale := maxDiff(logits[n*V:n*V+V], ref[n][p])
					worst = max(worst, d/(1+scale))
				}
			}
			check(0)
			for step := 1; step <= maxNew; step++ {
				ids := make([]int32, len(seqs))
				for n, s := range seqs {
					if p := len(prompts[n]) - 1 + step; p < len(s) {
						ids[n] = s[p]
					}
				}
				if logits, err = m.Step(c, ids); err != nil {
					t.Fatal(err)
				}
				check(step)
			}
			if worst > 1e-5 {
				t.Errorf("%s lora=%v: cached decoding's logits differ from Forward's by %.3g (relative)", arch, lora, worst)
			}
			t.Logf("%s lora=%v: max relative difference %.2g", arch, lora, worst)
		}
	}
}

// TestGenerateGreedy: Generate's greedy tokens are those of the plain loop
// that reruns Forward over prompt + tokens so far and takes the most likely
// next token, for prompts of different lengths decoded together; a stop
// token ends a sequence and is not returned; sampling with a seed is
// reproducible and at temperature → 0 agrees with greedy.
func TestGenerateGreedy(t *testing.T) {
	cfg := testmodels.Decoder("qwen2")
	m, err := New(cfg, RandomTensors(cfg, 0.5, 3))
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{{1, 2, 3, 4, 5}, {7}, {9, 8, 7, 6, 5, 4, 3, 2}}
	const maxNew = 10
	argmax := func(v []float32) int32 {
		best := 0
		for i, x := range v {
			if x > v[best] {
				best = i
			}
		}
		return int32(best)
	}
	var want [][]int32
	for _, p := range prompts {
		seq := slices.Clone(p)
		var got []int32
		for range maxNew {
			l := fullLogits(t, m, [][]int32{seq})[0]
			tok := argmax(l[len(l)-1])
			got, seq = append(got, tok), append(seq, tok)
		}
		want = append(want, got)
	}
	out, err := m.Generate(context.Background(), prompts, llama.GenerateOptions{MaxNew: maxNew})
	if err != nil {
		t.Fatal(err)
	}
	for n := range prompts {
		if !slices.Equal(out[n], want[n]) {
			t.Fatalf("prompt %d: greedy %v, the Forward loop %v", n, out[n], want[n])
		}
	}
	// Stop at the second sequence's third token: it ends there, the others
	// at theirs (if it occurs) or at maxNew.
	stop := want[1][2]
	out, err = m.Generate(context.Background(), prompts, llama.GenerateOptions{MaxNew: maxNew, Stop: []int32{stop}})
	if err != nil {
		t.Fatal(err)
	}
	for n := range prompts {
		w := want[n]
		if i := slices.Index(w, stop); i >= 0 {
			w = w[:i]
		}
		if !slices.Equal(out[n], w) {
			t.Fatalf("prompt %d with stop %d: %v, want %v", n, stop, out[n], w)
		}
	}
	o := llama.GenerateOptions{MaxNew: maxNew, Temperature: 0.9, TopP: 0.9, Seed: 5}
	a, _ := m.Generate(context.Background(), prompts, o)
	b, _ := m.Generate(context.Background(), prompts, o)
	o.Temperature = 1e-4
	cold, _ := m.Generate(context.Background(), prompts, o)
	for n := range prompts {
		if !slices.Equal(a[n], b[n]) || !slices.Equal(cold[n], want[n]) {
			t.Fatalf("prompt %d: sampling %v then %v with one seed; at temperature 1e-4 %v, greedy %v", n, a[n], b[n], cold[n], want[n])
		}
	}
	// A shared prefix fed once gives what the prompts with it prepended give.
	prefix := []int32{3, 1, 4, 1, 5}
	var joined [][]int32
	for _, p := range prompts {
		joined = append(joined, append(slices.Clone(prefix), p...))
	}
	withPrefix, err := m.Generate(context.Background(), prompts, llama.GenerateOptions{MaxNew: maxNew, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := m.Generate(context.Background(), joined, llama.GenerateOptions{MaxNew: maxNew})
	for n := range prompts {
		if !slices.Equal(withPrefix[n], whole[n]) {
			t.Fatalf("prompt %d after a shared prefix: %v, with the prefix in the prompt %v", n, withPrefix[n], whole[n])
		}
	}
	// Per-prompt seeds: a prompt samples the same tokens alone as in a batch.
	o = llama.GenerateOptions{MaxNew: maxNew, Temperature: 1.5, Seeds: []uint64{11, 12, 13}}
	all, _ := m.Generate(context.Background(), prompts, o)
	for n := range prompts {
		one, _ := m.Generate(context.Background(), prompts[n:n+1], llama.GenerateOptions{MaxNew: maxNew, Temperature: 1.5, Seeds: o.Seeds[n : n+1]})
		if !slices.Equal(one[0], all[n]) {
			t.Fatalf("prompt %d with its own seed: %v alone, %v in the batch", n, one[0], all[n])
		}
	}
}
