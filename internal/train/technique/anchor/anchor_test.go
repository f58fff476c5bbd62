package anchor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

const eosID = 1 // the tiny vocabulary's EOS

// tinyConfig is train/decoder's test decoder (2 layers, 4 query heads over
// 2 key/value heads), its embeddings tied to the LM head as SmolLM2's.
func tinyConfig(modelType string, tied bool) *model.Config {
	c := testmodels.Decoder(modelType)
	c.TieWordEmbeddings, c.EOSTokenID = tied, eosID
	return c
}

// randomStep makes Q queries and Q·G documents, right-padded to T, of
// random lengths in [2, T] (the first full), each ending in the EOS.
func randomStep(r *rand.Rand, Q, G, T, vocab int) *decoder.Step {
	n := Q + Q*G
	s := reftest.Padded(r, n, T, 2, vocab, nil) // padding ids are arbitrary too
	for i, L := range s.Lens {
		s.IDs[i*T+L-1] = eosID
	}
	return &decoder.Step{Q: Q, G: G, Texts: make([]string, n), Batch: &decoder.Batch{N: n, T: T, IDs: s.IDs, Mask: s.Mask}}
}

type refCase struct {
	arch             string
	tied, lora, reco bool
	alpha            float64
}

func (c refCase) name() string {
	tr, head := "full", "untied"
	if c.lora {
		tr = "lora"
	}
	if c.tied {
		head = "tied"
	}
	s := fmt.Sprintf("%s_%s_%s_alpha%g", c.arch, head, tr, c.alpha)
	if c.reco {
		s += "_recompute"
	}
	return s
}

// newModel builds a case's random decoder (an untied one gets a frozen
// lm_head), LoRA factors given values when enabled.
func newModel(t *testing.T, c refCase, seed uint64) *decoder.Model {
	t.Helper()
	cfg := tinyConfig(c.arch, c.tied)
	r := rand.New(rand.NewPCG(seed, 77))
	tensors := decoder.RandomTensors(cfg, 0.1, seed)
	if !c.tied {
		w := reftest.Randn(r, cfg.VocabSize*cfg.HiddenSize, 0.1)
		tensors["lm_head.weight"] = &safetensors.Tensor{Name: "lm_head.weight", DType: "F32", Shape: []int{cfg.VocabSize, cfg.HiddenSize}, Data: w}
	}
	m, err := decoder.New(cfg, tensors)
	if err != nil {
		t.Fatal(err)
	}
	m.Threads, m.Recompute = 2, c.reco
	if c.lora {
		if err := m.EnableLoRA(decoder.LoRAConfig{Rank: 4, Alpha: 8}, seed); err != nil {
			t.Fatal(err)
		}
		reftest.FillTrainable(r, 0.05, m.Params...) // B starts at zero: A's gradient would be too
	}
	return m
}

// torchRef is tools/anchor_torch_ref.py's losses and gradients, committed.
var torchRef = reftest.Suite{Golden: "testdata/anchor_torch_ref.golden", Tool: "anchor_torch_ref.py",
	Imports: []string{"torch", "safetensors.torch", "transformers"}}

// TestAnchorGradientsMatchPyTorch compares the stage I loss, its two
// cross-entropies and every trainable gradient of tiny random Llama and
// Qwen2 decoders — LM head tied to the embedding (SmolLM2) or a frozen
// lm_head, full fine-tuning and LoRA on all seven projections, with and
// without recomputation, α ≠ 1/2 so that a swapped direction would show —
// with PyTorch autograd in float64 on transformers' LlamaForCausalLM /
// Qwen2ForCausalLM (tools/anchor_torch_ref.py, which writes the loss as the
// authors' code does), read from the golden file it wrote (internal/reftest).
func TestAnchorGradientsMatchPyTorch(t *testing.T) {
	cases := []refCase{
		{"llama", true, false, false, 0.3},
		{"llama", true, true, false, 0.8},
		{"qwen2", false, false, true, 0.3},
		{"qwen2", true, true, true, 0.2},
		{"llama", true, false, false, 1}, // the paper's OnlyQ2D ablation
	}
	torchRef.Run(t, len(cases), func(t *testing.T, i int, dir string) (string, reftest.Check) {
		return cases[i].name(), prepare(t, cases[i], uint64(i+1), dir)
	})
}

// prepare runs Eval and Grad on a random step, writes the model and the
// step into dir for the reference, and returns the comparison.
func prepare(t *testing.T, c refCase, seed uint64, dir string) reftest.Check {
	t.Helper()
	m := newModel(t, c, seed)
	a, err := New(m, c.alpha)
	if err != nil {
		t.Fatal(err)
	}
	const Q, G, T = 3, 2, 10
	s := randomStep(rand.New(rand.NewPCG(seed, 5)), Q, G, T, m.Cfg.VocabSize)
	el, err := a.Eval(s, objective.ContrastiveConfig{})
	if err != nil {
		t.Fatal(err)
	}
	evalQ2D, evalD2Q := a.Losses()
	a.ZeroGrad()
	gl, err := a.Grad(s, objective.ContrastiveConfig{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	q2d, d2q := a.Losses()
	ps := slices.Clone(a.Params())
	if h := m.LMHead(); h.Name == "lm_head.weight" { // frozen: written, not compared
		ps = append(ps, h)
	}
	trainable := reftest.WriteParams(t, filepath.Join(dir, "model.safetensors"), ps...)
	job := map[string]any{"Q": Q, "G": G, "alpha": c.alpha, "ids": reftest.Rows(s.Batch.IDs, T), "mask": reftest.Rows(s.Batch.Mask, T), "trainable": trainable}
	if c.lora {
		job["lora"] = map[string]any{"rank": 4, "alpha": 8}
	}
	reftest.WriteJSON(t, dir, map[string]any{"config.json": &m.Cfg, "batch.json": job})
	return func(t *testing.T, dir string) {
		got := map[string][]float32{}
		for _, q := range a.Params() {
			got[q.Name] = q.G
		}
		ref := reftest.Step(t, dir, gl.Value, got, trainable)
		for _, l := range []struct {
			name      string
			got, eval float64
		}{{"loss", gl.Value, el.Value}, {"q2d", q2d, evalQ2D}, {"d2q", d2q, evalD2Q}} {
			if l.name != "loss" { // Step compared the loss
				want := float64(ref[l.name].Data[0])
				if l.name == "q2d" && c.alpha == 0 || l.name == "d2q" && c.alpha == 1 {
					want = 0 // a direction of weight 0 is not computed
				}
				reftest.Loss(t, l.name, l.got, want)
			}
			if l.eval != l.got {
				t.Errorf("%s: Eval %.9g, Grad %.9g", l.name, l.eval, l.got)
			}
		}
		t.Logf("q2d %.7g, d2q %.7g", q2d, d2q)
	}
}

// TestAnchorBadInput checks that malformed steps and settings are errors
// that say what is wrong.
func TestAnchorBadInput(t *testing.T) {
	c := refCase{"llama", true, false, false, DefaultAlpha}
	m := newModel(t, c, 1)
	a, err := New(m, DefaultAlpha)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *decoder.Step { return randomStep(rand.New(rand.NewPCG(3, 4)), 2, 3, 8, m.Cfg.VocabSize) }
	cases := []struct {
		name, want string
		edit       func(s *decoder.Step) *decoder.Step
	}{
		{"nil step", "without a token batch", func(*decoder.Step) *decoder.Step { return nil }},
		{"no batch", "without a token batch", func(s *decoder.Step) *decoder.Step { s.Batch = nil; return s }},
		{"Q=0", "0 queries", func(s *decoder.Step) *decoder.Step { s.Q = 0; return s }},
		{"G=0", "groups of 0", func(s *decoder.Step) *decoder.Step { s.G = 0; return s }},
		{"G mismatch", "want 2 queries + 2×4 documents = 10", func(s *decoder.Step) *decoder.Step { s.G = 4; return s }},
		{"texts", "7 texts for a batch of 8", func(s *decoder.Step) *decoder.Step { s.Texts = s.Texts[:7]; return s }},
		{"inputs", "must be N×T token ids", func(s *decoder.Step) *decoder.Step {
			s.Batch.Inputs = make([]float32, s.Batch.N*s.Batch.T*m.Cfg.HiddenSize)
			return s
		}},
		{"short ids", "must be N×T token ids", func(s *decoder.Step) *decoder.Step { s.Batch.IDs = s.Batch.IDs[1:]; return s }},
		{"left padding", "right padding only", func(s *decoder.Step) *decoder.Step { s.Batch.Mask[s.Batch.T] = 0; return s }},
		{"empty", "sequence 1 has no tokens", func(s *decoder.Step) *decoder.Step { clear(s.Batch.Mask[s.Batch.T : 2*s.Batch.T]); return s }},
		{"vocabulary", "outside the vocabulary", func(s *decoder.Step) *decoder.Step { s.Batch.IDs[5] = 64; return s }},
		{"nothing to reconstruct", "EBD2Q (document embedding → query) has nothing to reconstruct", func(s *decoder.Step) *decoder.Step {
			T := s.Batch.T
			for q := range s.Q { // queries of only their EOS
				clear(s.Batch.Mask[q*T : (q+1)*T])
				s.Batch.Mask[q*T], s.Batch.IDs[q*T] = 1, eosID
			}
			return s
		}},
		{"too long", "exceeds max_position_embeddings 32", func(s *decoder.Step) *decoder.Step {
			r := rand.New(rand.NewPCG(1, 1))
			long := randomStep(r, 2, 3, 40, m.Cfg.VocabSize)
			return long
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.edit(fresh())
			_, err := a.Grad(s, objective.ContrastiveConfig{}, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Grad: error %v, want one containing %q", err, tc.want)
			}
			if _, err := a.Eval(s, objective.ContrastiveConfig{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Eval: error %v, want one containing %q", err, tc.want)
			}
		})
	}
	for _, alpha := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := New(m, alpha); err == nil || !strings.Contains(err.Error(), "outside [0, 1]") {
			t.Errorf("New(alpha %g): error %v", alpha, err)
		}
	}
	m.Causal = false
	if _, err := a.Grad(fresh(), objective.ContrastiveConfig{}, 1); err == nil || !strings.Contains(err.Error(), "needs causal attention") {
		t.Errorf("bidirectional model: error %v", err)
	}
}
