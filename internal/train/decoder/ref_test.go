package decoder

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/objective"
)

// randomBatch makes n right-padded sequences of length T with random
// lengths in [2,T] (the first one full).
func randomBatch(r *rand.Rand, n, T, vocab int) *Batch {
	s := reftest.Padded(r, n, T, 0, vocab, nil)
	return &Batch{N: n, T: T, IDs: s.IDs, Mask: s.Mask}
}

type refCase struct {
	arch, pooling string
	causal, lora  bool
}

func (c refCase) name() string {
	att, tr := "bidirectional", "full"
	if c.causal {
		att = "causal"
	}
	if c.lora {
		tr = "lora"
	}
	return fmt.Sprintf("%s_%s_%s_%s", c.arch, c.pooling, att, tr)
}

// torchRef is tools/decoder_torch_ref.py's gradients, committed.
var torchRef = reftest.Suite{Golden: "testdata/decoder_torch_ref.golden", Tool: "decoder_torch_ref.py",
	Imports: []string{"torch", "safetensors.torch", "transformers"}}

// TestLlamaGradientsMatchPyTorch compares the loss (InfoNCE with in-batch
// negatives plus a soft-label KL term) and every trainable gradient of tiny
// random Llama, Qwen2 and Qwen3 models, under last-token and mean pooling,
// causal and bidirectional attention, full fine-tuning and LoRA on all
// seven projections, with PyTorch autograd in float64
// (tools/decoder_torch_ref.py: transformers' LlamaModel and Qwen2Model, a
// hand-written Qwen3), read from the golden file it wrote (internal/reftest).
func TestLlamaGradientsMatchPyTorch(t *testing.T) {
	var cases []refCase
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		cases = append(cases,
			refCase{arch, PoolLast, true, false},
			refCase{arch, PoolMean, false, true},
			refCase{arch, PoolLast, false, true},
			refCase{arch, PoolMean, true, false})
	}
	// The trainable pooling heads, with and without LoRA on the decoder.
	cases = append(cases,
		refCase{"llama", PoolLatent, true, true},
		refCase{"llama", PoolMultiLayer, true, false},
		refCase{"qwen2", PoolMultiLayer, false, true},
		refCase{"qwen3", PoolLatent, false, false},
		refCase{"qwen3", PoolMultiLayer, true, true})
	torchRef.Run(t, len(cases), func(t *testing.T, i int, dir string) (string, reftest.Check) {
		return cases[i].name(), prepare(t, cases[i], uint64(i+1), dir)
	})
}

// prepare takes a gradient step of case c's model, writes the model and
// the step into dir for the reference, and returns the comparison.
func prepare(t *testing.T, c refCase, seed uint64, dir string) reftest.Check {
	t.Helper()
	cfg := testmodels.Decoder(c.arch)
	r := rand.New(rand.NewPCG(seed, 99))
	m, err := New(cfg, RandomTensors(cfg, 0.1, seed))
	if err != nil {
		t.Fatal(err)
	}
	m.Threads, m.Causal = 2, c.causal
	job := map[string]any{"Q": 2, "G": 3, "pooling": c.pooling, "causal": c.causal, "temperature": 0.05}
	if c.pooling == PoolLatent || c.pooling == PoolMultiLayer {
		// Before LoRA, which must leave the head trainable. Its zero
		// biases and layer weights get values so their paths are checked.
		if err := m.EnableHead(HeadConfig{Mode: c.pooling, Latents: 4, Heads: 4}, seed); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.head.params {
			reftest.Jitter(r, 0.1, p.W)
		}
		job["head"] = map[string]any{"heads": 4}
	}
	if c.lora {
		lc := LoRAConfig{Rank: 4, Alpha: 8}
		if err := m.EnableLoRA(lc, seed); err != nil {
			t.Fatal(err)
		}
		reftest.FillTrainable(r, 0.05, m.Params...) // B starts at zero: A's gradient would be too
		job["lora"] = map[string]any{"rank": lc.Rank, "alpha": lc.Alpha}
	}
	const Q, G, T = 2, 3, 10
	b := randomBatch(r, Q+Q*G, T, cfg.VocabSize)
	teacher := reftest.Randn(r, Q*G, 3)
	job["distill_weight"], job["teacher_temperature"], job["teacher"] = 0.5, 2.0, teacher
	cc := objective.ContrastiveConfig{Temperature: 0.05, InBatch: true, DistillWeight: 0.5, TeacherTemperature: 2}
	l, err := objective.ContrastiveGrad(m.Pass(b, c.pooling), b.N, Q, G, m.Cfg.HiddenSize, teacher, cc, 1)
	if err != nil {
		t.Fatal(err)
	}
	job["ids"], job["mask"] = reftest.Rows(b.IDs, T), reftest.Rows(b.Mask, T)
	trainable := reftest.WriteParams(t, filepath.Join(dir, "model.safetensors"), m.Params...)
	job["trainable"] = trainable
	reftest.WriteJSON(t, dir, map[string]any{"config.json": cfg, "batch.json": job})
	return func(t *testing.T, dir string) {
		got := map[string][]float32{}
		for _, name := range trainable {
			got[name] = m.Param(name).G
		}
		reftest.Step(t, dir, l.Value, got, trainable)
	}
}
