package decoder

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/pyref"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train/objective"
)

// randomBatch makes n right-padded sequences of length T with random
// lengths in [2,T] (the first one full).
func randomBatch(r *rand.Rand, n, T, vocab int) *Batch {
	b := &Batch{N: n, T: T, IDs: make([]int32, n*T), Mask: make([]float32, n*T)}
	for i := 0; i < n; i++ {
		L := 2 + r.IntN(T-1)
		if i == 0 {
			L = T
		}
		for t := 0; t < T; t++ {
			b.IDs[i*T+t] = int32(r.IntN(vocab)) // padding ids are arbitrary too
			if t < L {
				b.Mask[i*T+t] = 1
			}
		}
	}
	return b
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

// prepared is one case's Go side: the model after its gradient step and
// the trainable names, with the reference's inputs written to dir.
type prepared struct {
	c         refCase
	m         *Model
	loss      float64
	trainable []string
	dir       string
}

// TestLlamaGradientsMatchPyTorch compares the loss (InfoNCE with in-batch
// negatives plus a soft-label KL term) and every trainable gradient of tiny
// random Llama, Qwen2 and Qwen3 models, under last-token and mean pooling,
// causal and bidirectional attention, full fine-tuning and LoRA on all
// seven projections, with PyTorch autograd in float64
// (tools/decoder_torch_ref.py: transformers' LlamaModel and Qwen2Model, a
// hand-written Qwen3). One Python process serves every case.
func TestLlamaGradientsMatchPyTorch(t *testing.T) {
	python, script := pyref.Python(t, "torch", "safetensors.torch", "transformers"), pyref.Tool(t, "decoder_torch_ref.py")
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
	var preps []*prepared
	var dirs []string
	for i, c := range cases {
		p := prepare(t, c, uint64(i+1))
		preps = append(preps, p)
		dirs = append(dirs, p.dir)
	}
	if out, err := exec.Command(python, append([]string{script}, dirs...)...).CombinedOutput(); err != nil {
		t.Fatalf("decoder_torch_ref.py: %v\n%s", err, out)
	}
	for _, p := range preps {
		t.Run(p.c.name(), func(t *testing.T) { compare(t, p) })
	}
}

func prepare(t *testing.T, c refCase, seed uint64) *prepared {
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
			for i := range p.W {
				p.W[i] += float32(0.1 * r.NormFloat64())
			}
		}
		job["head"] = map[string]any{"heads": 4}
	}
	if c.lora {
		lc := LoRAConfig{Rank: 4, Alpha: 8}
		if err := m.EnableLoRA(lc, seed); err != nil {
			t.Fatal(err)
		}
		// B starts at zero, which would make A's gradient zero: give B
		// values so both factors' gradients are checked.
		for _, p := range m.Params {
			if !p.Frozen {
				for i := range p.W {
					p.W[i] = float32(0.05 * r.NormFloat64())
				}
			}
		}
		job["lora"] = map[string]any{"rank": lc.Rank, "alpha": lc.Alpha}
	}
	const Q, G, T = 2, 3, 10
	b := randomBatch(r, Q+Q*G, T, cfg.VocabSize)
	teacher := make([]float32, Q*G)
	for i := range teacher {
		teacher[i] = float32(3 * r.NormFloat64())
	}
	job["distill_weight"], job["teacher_temperature"], job["teacher"] = 0.5, 2.0, teacher
	cc := objective.ContrastiveConfig{Temperature: 0.05, InBatch: true, DistillWeight: 0.5, TeacherTemperature: 2}
	l, err := objective.ContrastiveGrad(m.Pass(b, c.pooling), b.N, Q, G, m.Cfg.HiddenSize, teacher, cc, 1)
	if err != nil {
		t.Fatal(err)
	}
	loss := l.Value
	ids, mask := make([][]int32, b.N), make([][]float32, b.N)
	for n := 0; n < b.N; n++ {
		ids[n], mask[n] = b.IDs[n*T:n*T+T], b.Mask[n*T:n*T+T]
	}
	job["ids"], job["mask"] = ids, mask
	p := &prepared{c: c, m: m, loss: loss, dir: t.TempDir()}
	p.trainable = pyref.WriteParams(t, filepath.Join(p.dir, "model.safetensors"), m.Params...)
	job["trainable"] = p.trainable
	pyref.WriteJSON(t, p.dir, map[string]any{"config.json": cfg, "batch.json": job})
	return p
}

func compare(t *testing.T, p *prepared) {
	ref, err := safetensors.ReadFile(filepath.Join(p.dir, "grads.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	refLoss := float64(ref["loss"].Data[0])
	pyref.CompareLoss(t, "loss", p.loss, refLoss)
	got := map[string][]float32{}
	for _, name := range p.trainable {
		got[name] = p.m.Param(name).G
	}
	worst, worstName := pyref.CompareGrads(t, ref, got, p.trainable)
	t.Logf("loss %.7g (PyTorch %.7g); %d gradients compared, worst relative error %.3g (%s)", p.loss, refLoss, len(p.trainable), worst, worstName)
}
