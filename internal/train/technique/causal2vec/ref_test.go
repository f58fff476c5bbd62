package causal2vec

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

// tinyConfig is the trainer's tiny test Llama (testmodels.Decoder).
func tinyConfig() *model.Config { return testmodels.Decoder("llama") }

// recorder is a frozen table encoder that keeps what Backward received.
type recorder struct {
	Table
	grad []float32
}

func (r *recorder) Backward(d []float32) error {
	r.grad = append(r.grad[:0], d...)
	return nil
}

// fixture is a step over random texts: Q queries with an instruction of
// qp tokens after a BOS, documents with a BOS, right-padded to T, EOS last,
// and a table encoder of dimension k.
type fixture struct {
	step *decoder.Step
	enc  *recorder
}

func newFixture(r *rand.Rand, Q, G, T, k, vocab, qp int) *fixture {
	N := Q + Q*G
	seqs := reftest.Padded(r, N, T, 0, vocab, func(n int) int {
		if n < Q {
			return qp + 2 // BOS, the instruction, EOS
		}
		return 2 // BOS, EOS
	})
	b := &decoder.Batch{N: N, T: T, IDs: seqs.IDs, Mask: seqs.Mask}
	enc := &recorder{Table: Table{Dim: k, Vecs: map[string][]float32{}}}
	s := &decoder.Step{Q: Q, G: G, Batch: b, Teacher: reftest.Randn(r, Q*G, 3)}
	for n := range N {
		text := fmt.Sprintf("text %d", n)
		s.Texts = append(s.Texts, text)
		enc.Vecs[text] = reftest.Randn(r, k, 1)
	}
	return &fixture{step: s, enc: enc}
}

type refCase struct {
	name       string
	lora, bias bool
	insert     bool // random positions through Config.Insert
}

// torchRef is tools/causal2vec_torch_ref.py's gradients, committed.
var torchRef = reftest.Suite{Golden: "testdata/causal2vec_torch_ref.golden", Tool: "causal2vec_torch_ref.py",
	Imports: []string{"torch", "safetensors.torch", "transformers"}}

// TestCausal2VecGradientsMatchPyTorch compares the loss (InfoNCE with
// in-batch negatives plus soft-label distillation over [h_C; h_EOS]) and
// every trainable gradient — the MLP's weights (and biases), the decoder's
// LoRA factors or all of its weights, and the encoder's vectors — of a tiny
// random Llama with causal attention against PyTorch autograd in float64
// (tools/causal2vec_torch_ref.py, transformers' LlamaModel fed
// inputs_embeds), read from the golden file it wrote (internal/reftest).
func TestCausal2VecGradientsMatchPyTorch(t *testing.T) {
	cases := []refCase{
		{name: "lora_bias_prefix", lora: true, bias: true},
		{name: "full_nobias_insert", insert: true},
		{name: "full_bias_prefix", bias: true},
	}
	torchRef.Run(t, len(cases), func(t *testing.T, i int, dir string) (string, reftest.Check) {
		return cases[i].name, prepare(t, cases[i], uint64(i+1), dir)
	})
}

// prepare takes a gradient step of case c, writes the model and the step
// into dir for the reference, and returns the comparison.
func prepare(t *testing.T, c refCase, seed uint64, dir string) reftest.Check {
	t.Helper()
	const Q, G, T, k, qp = 2, 3, 10, 12, 3
	cfg := tinyConfig()
	r := rand.New(rand.NewPCG(seed, 77))
	m, err := decoder.New(cfg, decoder.RandomTensors(cfg, 0.1, seed))
	if err != nil {
		t.Fatal(err)
	}
	m.Threads = 2
	job := map[string]any{"Q": Q, "G": G, "causal": m.Causal, "temperature": 0.05}
	if c.lora {
		lc := decoder.LoRAConfig{Rank: 4, Alpha: 8}
		if err := m.EnableLoRA(lc, seed); err != nil {
			t.Fatal(err)
		}
		reftest.FillTrainable(r, 0.05, m.Params...) // B starts at zero: A's gradient would be too
		job["lora"] = map[string]any{"rank": lc.Rank, "alpha": lc.Alpha}
	}
	fx := newFixture(r, Q, G, T, k, cfg.VocabSize, qp)
	tc := Config{EncoderModel: "table", EncoderDim: k, DecoderModel: "tiny-llama", Bias: c.bias, Seed: seed, QueryPrefix: 1 + qp, DocPrefix: 1}
	var pos []int // C's position in each sequence, as the forward chose it
	for n := 0; n < Q+Q*G; n++ {
		pos = append(pos, tc.DocPrefix)
		if n < Q {
			pos[n] = tc.QueryPrefix
		}
	}
	if c.insert {
		pos = pos[:0]
		tc.Insert = func(text string, ids []int32, query bool) (int, error) {
			p := r.IntN(len(ids)) // anywhere before EOS, first included
			pos = append(pos, p)
			return p, nil
		}
	}
	tech, err := New(m, fx.enc, tc)
	if err != nil {
		t.Fatal(err)
	}
	if c.bias { // nonzero biases exercise their paths more (they already are, uniform)
		for _, p := range tech.MLPParams() {
			if p.NoDecay {
				reftest.Jitter(r, 0.1, p.W)
			}
		}
	}
	cc := objective.ContrastiveConfig{Temperature: 0.05, InBatch: true, DistillWeight: 0.5, TeacherTemperature: 2}
	job["distill_weight"], job["teacher_temperature"], job["teacher"] = cc.DistillWeight, cc.TeacherTemperature, fx.step.Teacher
	tech.ZeroGrad()
	l, err := tech.Grad(fx.step, cc, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := fx.step.Batch
	vecs, _, _ := fx.enc.Table.Encode(fx.step.Texts)
	job["ids"], job["mask"], job["pos"], job["encoder"] = reftest.Rows(b.IDs, T), reftest.Rows(b.Mask, T), pos, reftest.Rows(vecs, k)
	trainable := reftest.WriteParams(t, filepath.Join(dir, "model.safetensors"), tech.Params()...)
	job["trainable"] = trainable
	reftest.WriteJSON(t, dir, map[string]any{"config.json": cfg, "batch.json": job})
	return func(t *testing.T, dir string) {
		got := map[string][]float32{"encoder_vecs": fx.enc.grad}
		for _, q := range tech.Params() {
			if !q.Frozen {
				got[q.Name] = q.G
			}
		}
		reftest.Step(t, dir, l.Value, got, append([]string{"encoder_vecs"}, trainable...))
	}
}
