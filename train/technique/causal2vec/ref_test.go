package causal2vec

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/pyref"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/objective"
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
	b := &decoder.Batch{N: N, T: T, IDs: make([]int32, N*T), Mask: make([]float32, N*T)}
	enc := &recorder{Table: Table{Dim: k, Vecs: map[string][]float32{}}}
	s := &decoder.Step{Q: Q, G: G, Batch: b, Teacher: make([]float32, Q*G)}
	for n := 0; n < N; n++ {
		minL := 2 // BOS, EOS
		if n < Q {
			minL = qp + 2
		}
		L := minL + r.IntN(T-minL+1)
		if n == 0 {
			L = T
		}
		for i := 0; i < T; i++ {
			b.IDs[n*T+i] = int32(r.IntN(vocab))
			if i < L {
				b.Mask[n*T+i] = 1
			}
		}
		text := fmt.Sprintf("text %d", n)
		s.Texts = append(s.Texts, text)
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		enc.Vecs[text] = v
	}
	for i := range s.Teacher {
		s.Teacher[i] = float32(3 * r.NormFloat64())
	}
	return &fixture{step: s, enc: enc}
}

type refCase struct {
	name       string
	lora, bias bool
	insert     bool // random positions through Config.Insert
}

type prepared struct {
	c         refCase
	tech      *Technique
	enc       *recorder
	loss      float64
	trainable []string
	dir       string
}

// TestCausal2VecGradientsMatchPyTorch compares the loss (InfoNCE with
// in-batch negatives plus soft-label distillation over [h_C; h_EOS]) and
// every trainable gradient — the MLP's weights (and biases), the decoder's
// LoRA factors or all of its weights, and the encoder's vectors — of a tiny
// random Llama with causal attention against PyTorch autograd in float64
// (tools/causal2vec_torch_ref.py, transformers' LlamaModel fed
// inputs_embeds).
func TestCausal2VecGradientsMatchPyTorch(t *testing.T) {
	python, script := pyref.Python(t, "torch", "safetensors.torch", "transformers"), pyref.Tool(t, "causal2vec_torch_ref.py")
	cases := []refCase{
		{name: "lora_bias_prefix", lora: true, bias: true},
		{name: "full_nobias_insert", insert: true},
		{name: "full_bias_prefix", bias: true},
	}
	var preps []*prepared
	var dirs []string
	for i, c := range cases {
		p := prepare(t, c, uint64(i+1))
		preps = append(preps, p)
		dirs = append(dirs, p.dir)
	}
	if out, err := exec.Command(python, append([]string{script}, dirs...)...).CombinedOutput(); err != nil {
		t.Fatalf("causal2vec_torch_ref.py: %v\n%s", err, out)
	}
	for _, p := range preps {
		t.Run(p.c.name, func(t *testing.T) { compare(t, p) })
	}
}

func prepare(t *testing.T, c refCase, seed uint64) *prepared {
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
		// B starts at zero, which would make A's gradient zero.
		for _, p := range m.Params {
			if !p.Frozen {
				for i := range p.W {
					p.W[i] = float32(0.05 * r.NormFloat64())
				}
			}
		}
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
				for i := range p.W {
					p.W[i] += float32(0.1 * r.NormFloat64())
				}
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
	loss := l.Value
	b := fx.step.Batch
	ids, mask := make([][]int32, b.N), make([][]float32, b.N)
	for n := 0; n < b.N; n++ {
		ids[n], mask[n] = b.IDs[n*T:n*T+T], b.Mask[n*T:n*T+T]
	}
	vecs, _, _ := fx.enc.Table.Encode(fx.step.Texts)
	enc := make([][]float32, b.N)
	for n := range enc {
		enc[n] = vecs[n*k : n*k+k]
	}
	job["ids"], job["mask"], job["pos"], job["encoder"] = ids, mask, pos, enc
	pr := &prepared{c: c, tech: tech, enc: fx.enc, loss: loss, dir: t.TempDir()}
	pr.trainable = pyref.WriteParams(t, filepath.Join(pr.dir, "model.safetensors"), tech.Params()...)
	job["trainable"] = pr.trainable
	pyref.WriteJSON(t, pr.dir, map[string]any{"config.json": cfg, "batch.json": job})
	return pr
}

func compare(t *testing.T, p *prepared) {
	ref, err := safetensors.ReadFile(filepath.Join(p.dir, "grads.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	refLoss := float64(ref["loss"].Data[0])
	lossRel := pyref.CompareLoss(t, "loss", p.loss, refLoss)
	got := map[string][]float32{"encoder_vecs": p.enc.grad}
	for _, q := range p.tech.Params() {
		if !q.Frozen {
			got[q.Name] = q.G
		}
	}
	names := append([]string{"encoder_vecs"}, p.trainable...)
	worst, worstName := pyref.CompareGrads(t, ref, got, names)
	if lossRel > worst {
		worst, worstName = lossRel, "loss"
	}
	t.Logf("loss %.7g (PyTorch %.7g); %d gradients compared, worst relative error %.3g (%s)", p.loss, refLoss, len(names), worst, worstName)
}
