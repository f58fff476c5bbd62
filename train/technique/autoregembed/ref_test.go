package autoregembed

import (
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/pyref"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/objective"
)

// tinyConfig is train/decoder's tiny Llama (2 layers, 4 query heads over 2
// key/value heads) with tied word embeddings: the frozen decoder's LM head
// is its input embedding.
func tinyConfig() *model.Config {
	c := testmodels.Decoder("llama")
	c.TieWordEmbeddings = true
	return c
}

const testEOS = 2

func testConfig(stage Stage) Config {
	return Config{Stage: stage, Prefix: []int32{1}, EOS: testEOS, QueryInstruction: []int32{5, 6, 7},
		DocInstruction: []int32{8, 9}, Threads: 2, Seed: 7}
}

// randomStep makes Q queries and Q·G documents of 1–8 random tokens, EOS
// appended (but for the last query, whose EOS was cut), right-padded.
func randomStep(r *rand.Rand, Q, G, V int) *decoder.Step {
	N, T := Q+Q*G, 9
	b := &decoder.Batch{N: N, T: T, IDs: make([]int32, N*T), Mask: make([]float32, N*T)}
	for n := 0; n < N; n++ {
		L := 1 + r.IntN(8)
		for p := 0; p < T; p++ {
			b.IDs[n*T+p] = int32(3 + r.IntN(V-3)) // padding ids are arbitrary too
			if p <= L {
				b.Mask[n*T+p] = 1
			}
		}
		if n != Q-1 {
			b.IDs[n*T+L] = testEOS
		}
	}
	return &decoder.Step{Q: Q, G: G, Texts: make([]string, N), Batch: b}
}

type refCase struct {
	stage  Stage
	lora   bool
	untied bool // the frozen decoder has an lm_head of its own
}

func (c refCase) name() string {
	n := c.stage.String() + "_full"
	if c.lora {
		n = c.stage.String() + "_lora"
	}
	if c.untied {
		n += "_untied"
	}
	return n
}

type prepared struct {
	c         refCase
	t         *Technique
	loss      float64
	trainable []string
	dir       string
}

// TestAutoRegEmbedGradientsMatchPyTorch compares the loss and every
// trainable gradient (memory tokens, and E's weights or LoRA factors) of
// both stages, full and LoRA, with tied word embeddings and with a frozen
// decoder that has an lm_head of its own, with PyTorch autograd in float64 over
// transformers' LlamaModel (E, over inputs_embeds) and LlamaForCausalLM
// (the frozen D) (tools/autoregembed_torch_ref.py).
func TestAutoRegEmbedGradientsMatchPyTorch(t *testing.T) {
	python, script := pyref.Python(t, "torch", "safetensors.torch", "transformers"), pyref.Tool(t, "autoregembed_torch_ref.py")
	cases := []refCase{{Compression, false, false}, {Compression, true, false}, {Alignment, false, false},
		{Alignment, true, false}, {Compression, true, true}, {Alignment, false, true}}
	var preps []*prepared
	var dirs []string
	for i, c := range cases {
		p := prepare(t, c, uint64(i+1))
		preps = append(preps, p)
		dirs = append(dirs, p.dir)
	}
	if out, err := exec.Command(python, append([]string{script}, dirs...)...).CombinedOutput(); err != nil {
		t.Fatalf("autoregembed_torch_ref.py: %v\n%s", err, out)
	}
	for _, p := range preps {
		t.Run(p.c.name(), func(t *testing.T) { compare(t, p) })
	}
}

func prepare(t *testing.T, c refCase, seed uint64) *prepared {
	t.Helper()
	cfg := tinyConfig()
	r := rand.New(rand.NewPCG(seed, 99))
	ac := testConfig(c.stage)
	if c.lora {
		ac.LoRA = &decoder.LoRAConfig{Rank: 4, Alpha: 8}
	}
	enc := decoder.RandomTensors(cfg, 0.1, seed)
	var dec map[string]*safetensors.Tensor
	if c.stage == Alignment { // E starts from stage 1's weights, D is the base
		dec = decoder.RandomTensors(cfg, 0.1, seed+100)
	}
	if c.untied {
		cfg.TieWordEmbeddings = false
		if dec == nil {
			dec = enc
		}
		head := decoder.RandomTensors(cfg, 0.1, seed+200)["embed_tokens.weight"]
		head.Name = "lm_head.weight"
		dec["lm_head.weight"] = head
	}
	tq, err := New(cfg, enc, dec, ac)
	if err != nil {
		t.Fatal(err)
	}
	// Move E and its memory away from where they started (the reference):
	// LoRA factors get values (B starts at zero), full weights noise.
	for _, p := range tq.Params() {
		if p.Frozen {
			continue
		}
		for i := range p.W {
			if c.lora && p.Name != MemoryName {
				p.W[i] = float32(0.05 * r.NormFloat64())
			} else {
				p.W[i] += float32(0.02 * r.NormFloat64())
			}
		}
	}
	const Q, G = 2, 3
	s := randomStep(r, Q, G, cfg.VocabSize)
	cc := objective.ContrastiveConfig{Temperature: 0.1}
	l, err := tq.Grad(s, cc, 1)
	if err != nil {
		t.Fatal(err)
	}
	loss := l.Value
	p := &prepared{c: c, t: tq, loss: loss, dir: t.TempDir()}
	p.trainable = pyref.WriteParams(t, filepath.Join(p.dir, "enc.safetensors"), tq.Params()...)
	var head []*ops.Param
	if c.untied {
		head = append(head, tq.dec.LMHead())
	}
	pyref.WriteParams(t, filepath.Join(p.dir, "dec.safetensors"), append(slices.Clone(tq.dec.Params), head...)...)
	if tq.ref != nil {
		pyref.WriteParams(t, filepath.Join(p.dir, "ref.safetensors"), append(slices.Clone(tq.ref.Params), &ops.Param{Name: MemoryName, Shape: tq.mem.Shape, W: tq.refMem})...)
	}
	b := s.Batch
	ids, mask := make([][]int32, b.N), make([][]float32, b.N)
	for n := 0; n < b.N; n++ {
		ids[n], mask[n] = b.IDs[n*b.T:(n+1)*b.T], b.Mask[n*b.T:(n+1)*b.T]
	}
	job := map[string]any{"stage": int(c.stage), "Q": Q, "G": G, "eos": testEOS, "ids": ids, "mask": mask,
		"prefix": ac.Prefix, "query_instruction": ac.QueryInstruction, "doc_instruction": ac.DocInstruction,
		"causal": tq.enc.Causal, "beta": 0.1, "tau": cc.Temperature, "trainable": p.trainable}
	if c.lora {
		job["lora"] = map[string]any{"rank": ac.LoRA.Rank, "alpha": ac.LoRA.Alpha}
	}
	pyref.WriteJSON(t, p.dir, map[string]any{"config.json": cfg, "job.json": job})
	return p
}

func compare(t *testing.T, p *prepared) {
	ref, err := safetensors.ReadFile(filepath.Join(p.dir, "grads.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	refLoss := float64(ref["loss"].Data[0])
	lossRel := pyref.CompareLoss(t, "loss", p.loss, refLoss)
	got := map[string][]float32{}
	for _, q := range p.t.Params() {
		got[q.Name] = q.G
	}
	if r, ok := ref[MemoryName]; ok && slices.Max(r.Data) == 0 && slices.Min(r.Data) == 0 {
		t.Error("the memory tokens' reference gradient is zero")
	}
	worst, worstName := pyref.CompareGrads(t, ref, got, p.trainable)
	t.Logf("loss %.7g (PyTorch %.7g, relative error %.2g); %d gradients compared, worst relative error %.3g (%s)",
		p.loss, refLoss, lossRel, len(p.trainable), worst, worstName)
}
