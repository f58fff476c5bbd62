package autoregembed

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
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

// randomStep makes Q queries and Q·G documents of 1–8 random tokens (the
// first 8), EOS appended (but for the last query, whose EOS was cut),
// right-padded to 9.
func randomStep(r *rand.Rand, Q, G, V int) *decoder.Step {
	N, T := Q+Q*G, 9
	s := reftest.Padded(r, N, T, 3, V, nil) // padding ids are arbitrary too
	for n, L := range s.Lens {
		if n != Q-1 {
			s.IDs[n*T+L-1] = testEOS
		}
	}
	return &decoder.Step{Q: Q, G: G, Texts: make([]string, N), Batch: &decoder.Batch{N: N, T: T, IDs: s.IDs, Mask: s.Mask}}
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

// torchRef is tools/autoregembed_torch_ref.py's gradients, committed.
var torchRef = reftest.Suite{Golden: "testdata/autoregembed_torch_ref.golden", Tool: "autoregembed_torch_ref.py",
	Imports: []string{"torch", "safetensors.torch", "transformers"}}

// TestAutoRegEmbedGradientsMatchPyTorch compares the loss and every
// trainable gradient (memory tokens, and E's weights or LoRA factors) of
// both stages, full and LoRA, with tied word embeddings and with a frozen
// decoder that has an lm_head of its own, with PyTorch autograd in float64 over
// transformers' LlamaModel (E, over inputs_embeds) and LlamaForCausalLM
// (the frozen D) (tools/autoregembed_torch_ref.py), read from the golden
// file it wrote (internal/reftest).
func TestAutoRegEmbedGradientsMatchPyTorch(t *testing.T) {
	cases := []refCase{{Compression, false, false}, {Compression, true, false}, {Alignment, false, false},
		{Alignment, true, false}, {Compression, true, true}, {Alignment, false, true}}
	torchRef.Run(t, len(cases), func(t *testing.T, i int, dir string) (string, reftest.Check) {
		return cases[i].name(), prepare(t, cases[i], uint64(i+1), dir)
	})
}

// prepare takes a gradient step of case c, writes E, D (and the reference
// encoder) and the step into dir for the reference, and returns the
// comparison.
func prepare(t *testing.T, c refCase, seed uint64, dir string) reftest.Check {
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
		switch {
		case p.Frozen:
		case c.lora && p.Name != MemoryName:
			reftest.Fill(r, 0.05, p.W)
		default:
			reftest.Jitter(r, 0.02, p.W)
		}
	}
	const Q, G = 2, 3
	s := randomStep(r, Q, G, cfg.VocabSize)
	cc := objective.ContrastiveConfig{Temperature: 0.1}
	l, err := tq.Grad(s, cc, 1)
	if err != nil {
		t.Fatal(err)
	}
	trainable := reftest.WriteParams(t, filepath.Join(dir, "enc.safetensors"), tq.Params()...)
	var head []*ops.Param
	if c.untied {
		head = append(head, tq.dec.LMHead())
	}
	reftest.WriteParams(t, filepath.Join(dir, "dec.safetensors"), append(slices.Clone(tq.dec.Params), head...)...)
	if tq.ref != nil {
		reftest.WriteParams(t, filepath.Join(dir, "ref.safetensors"), append(slices.Clone(tq.ref.Params), &ops.Param{Name: MemoryName, Shape: tq.mem.Shape, W: tq.refMem})...)
	}
	b := s.Batch
	job := map[string]any{"stage": int(c.stage), "Q": Q, "G": G, "eos": testEOS, "ids": reftest.Rows(b.IDs, b.T), "mask": reftest.Rows(b.Mask, b.T),
		"prefix": ac.Prefix, "query_instruction": ac.QueryInstruction, "doc_instruction": ac.DocInstruction,
		"causal": tq.enc.Causal, "beta": 0.1, "tau": cc.Temperature, "trainable": trainable}
	if c.lora {
		job["lora"] = map[string]any{"rank": ac.LoRA.Rank, "alpha": ac.LoRA.Alpha}
	}
	reftest.WriteJSON(t, dir, map[string]any{"config.json": cfg, "job.json": job})
	return func(t *testing.T, dir string) {
		got := map[string][]float32{}
		for _, q := range tq.Params() {
			got[q.Name] = q.G
		}
		ref := reftest.Step(t, dir, l.Value, got, trainable)
		if r, ok := ref[MemoryName]; ok && slices.Max(r.Data) == 0 && slices.Min(r.Data) == 0 {
			t.Error("the memory tokens' reference gradient is zero")
		}
	}
}
