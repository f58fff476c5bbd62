package bert

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

func tinyConfig() *model.Config { return testmodels.BERT() }

// The objectives, as tools/torch_ref.py names them.
const (
	objContrastive = "contrastive"
	objBCE         = "bce"
	objListwise    = "listwise"
)

// randomBatch makes n sequences of length T with random lengths in [3,T]
// (right padding, the first full), [CLS]=1 first; pairs puts token type 1
// on the second half.
func randomBatch(r *rand.Rand, n, T, vocab int, pairs bool) *Batch {
	s := reftest.PaddedZero(r, n, T, 2, vocab, func(int) int { return 3 })
	b := &Batch{N: n, T: T, IDs: s.IDs, Types: make([]int32, n*T), Mask: s.Mask}
	if pairs {
		b.Types = s.PairTypes()
	}
	for i := range n {
		b.IDs[i*T] = 1
	}
	return b
}

type refCase struct {
	name      string
	objective string
	pooling   string
	head      bool
	inBatch   bool
	distill   float64
	lora      *LoRAConfig
	Q, G      int
	act       string
}

// torchRef is tools/torch_ref.py's gradients, committed.
var torchRef = reftest.Suite{Golden: "testdata/torch_ref.golden", Tool: "torch_ref.py", Imports: []string{"torch", "safetensors.torch"}}

// TestGradientsMatchPyTorch compares the loss and every trainable gradient
// of a tiny random BERT — bi-encoder (InfoNCE, in-batch or own group,
// distillation; mean, [CLS] and last-token pooling; erf and tanh GELU) and
// cross-encoder (BCE and listwise, with and without distillation), full and
// LoRA — with PyTorch autograd in float64 (tools/torch_ref.py), read from
// the golden file it wrote (internal/reftest).
func TestGradientsMatchPyTorch(t *testing.T) {
	cases := []refCase{
		{name: "infonce_inbatch_distill_mean", objective: objContrastive, pooling: PoolMean, inBatch: true, distill: 0.5, Q: 3, G: 3},
		{name: "infonce_own_group_cls", objective: objContrastive, pooling: PoolCLS, Q: 2, G: 4},
		{name: "infonce_lasttoken_gelu_tanh", objective: objContrastive, pooling: PoolLast, inBatch: true, Q: 2, G: 2, act: "gelu_new"},
		{name: "cross_encoder_bce", objective: objBCE, head: true, Q: 2, G: 3},
		{name: "cross_encoder_listwise", objective: objListwise, head: true, Q: 3, G: 3},
		{name: "cross_encoder_bce_distill", objective: objBCE, head: true, distill: 0.7, Q: 2, G: 3},
		{name: "cross_encoder_listwise_distill", objective: objListwise, head: true, distill: 1.5, Q: 3, G: 3},
		{name: "lora_infonce_distill", objective: objContrastive, pooling: PoolMean, inBatch: true, distill: 1, Q: 2, G: 3,
			lora: &LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"query", "value", "intermediate.dense"}}},
	}
	torchRef.Run(t, len(cases), func(t *testing.T, i int, dir string) (string, reftest.Check) {
		return cases[i].name, prepare(t, cases[i], uint64(i+1), dir)
	})
}

// prepare takes case tc's gradient step, writes the model (raw, unmerged
// tensors) and the batch into dir for the reference, and returns the
// comparison. A few gradients are zero in exact arithmetic (the key bias:
// softmax ignores a shift of all scores; the classifier bias under the
// listwise softmax), so their reference is rounding noise: reftest.Grads
// floors the denominator at 1e-3 of the largest tensor gradient.
func prepare(t *testing.T, tc refCase, seed uint64, dir string) reftest.Check {
	t.Helper()
	cfg := tinyConfig()
	if tc.act != "" {
		cfg.HiddenAct = tc.act
	}
	r := rand.New(rand.NewPCG(seed, 99))
	m, err := NewModel(cfg, RandomTensors(cfg, tc.head, 0.1, seed), tc.head, seed)
	if err != nil {
		t.Fatal(err)
	}
	m.Threads = 2
	if tc.lora != nil {
		if err := m.EnableLoRA(*tc.lora, seed); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Params {
			if filepath.Ext(p.Name) == ".weight" && isLoRAName(p.Name) {
				reftest.Fill(r, 0.05, p.W)
			}
		}
	}
	T := 12
	var b *Batch
	job := map[string]any{"objective": tc.objective, "Q": tc.Q, "G": tc.G}
	var teacher, labels []float32
	switch tc.objective {
	case objContrastive:
		b = randomBatch(r, tc.Q+tc.Q*tc.G, T, cfg.VocabSize, false)
		job["pooling"], job["temperature"], job["in_batch"] = tc.pooling, 0.05, tc.inBatch
	default:
		b = randomBatch(r, tc.Q*tc.G, T, cfg.VocabSize, true)
		labels = make([]float32, tc.Q*tc.G)
		for i := range labels {
			if i%tc.G == 0 {
				labels[i] = 1
			}
		}
		job["labels"] = labels
	}
	if tc.distill > 0 {
		teacher = reftest.Randn(r, tc.Q*tc.G, 3)
		job["distill_weight"], job["teacher_temperature"], job["teacher"] = tc.distill, 2.0, teacher
	}
	job["ids"], job["types"], job["mask"] = reftest.Rows(b.IDs, T), reftest.Rows(b.Types, T), reftest.Rows(b.Mask, T)
	if tc.lora != nil {
		job["lora"] = map[string]any{"rank": tc.lora.Rank, "alpha": tc.lora.Alpha}
	}
	var l objective.Loss
	if tc.objective == objContrastive {
		l, err = m.ContrastiveGrad(b, tc.Q, tc.G, tc.pooling, teacher,
			objective.ContrastiveConfig{Temperature: 0.05, InBatch: tc.inBatch, DistillWeight: tc.distill, TeacherTemperature: 2}, 1)
	} else {
		l, err = m.CrossEncoderGrad(b, tc.objective, labels, teacher, objective.CrossConfig{DistillWeight: tc.distill, TeacherTemperature: 2}, tc.Q, tc.G, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	trainable := reftest.WriteParams(t, filepath.Join(dir, "model.safetensors"), m.Params...)
	job["trainable"] = trainable
	reftest.WriteJSON(t, dir, map[string]any{"config.json": cfg, "batch.json": job})
	return func(t *testing.T, dir string) {
		got := make(map[string][]float32, len(trainable))
		for _, name := range trainable {
			got[name] = m.Param(name).G
		}
		reftest.Step(t, dir, l.Value, got, trainable)
	}
}

// Merging LoRA into the weights (what export writes) leaves the forward
// pass unchanged.
func TestLoRAMergeKeepsForward(t *testing.T) {
	cfg := tinyConfig()
	r := rand.New(rand.NewPCG(4, 4))
	m, err := NewModel(cfg, RandomTensors(cfg, false, 0.1, 4), false, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.EnableLoRA(LoRAConfig{Rank: 3, Alpha: 6, Targets: []string{"query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"}}, 4); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params {
		if isLoRAName(p.Name) {
			for i := range p.W {
				p.W[i] = float32(0.1 * r.NormFloat64())
			}
		}
	}
	b := randomBatch(r, 4, 12, cfg.VocabSize, false)
	a, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), a.Hidden...)
	merged, err := NewModel(cfg, m.Tensors(), false, 4)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := merged.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	var maxDiff, changed float64
	base, _ := NewModel(cfg, RandomTensors(cfg, false, 0.1, 4), false, 4)
	a3, _ := base.Forward(b)
	for i, v := range want {
		if b.Mask[i/cfg.HiddenSize] == 0 {
			continue
		}
		maxDiff = math.Max(maxDiff, math.Abs(float64(a2.Hidden[i]-v)))
		changed = math.Max(changed, math.Abs(float64(a3.Hidden[i]-v)))
	}
	if maxDiff > 1e-5 || changed < 1e-2 {
		t.Fatalf("merged forward differs by %.3g (want ≤ 1e-5); LoRA moved the output by %.3g (want a visible change)", maxDiff, changed)
	}
}
