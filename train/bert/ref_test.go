package bert

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/pyref"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train/objective"
)

func tinyConfig() *model.Config { return testmodels.BERT() }

// The objectives, as tools/torch_ref.py names them.
const (
	objContrastive = "contrastive"
	objBCE         = "bce"
	objListwise    = "listwise"
)

// randomBatch makes n sequences of length T with random lengths in [3,T]
// (right padding), [CLS]=1 first; pairs puts token type 1 on the second half.
func randomBatch(r *rand.Rand, n, T, vocab int, pairs bool) *Batch {
	b := &Batch{N: n, T: T, IDs: make([]int32, n*T), Types: make([]int32, n*T), Mask: make([]float32, n*T)}
	for i := 0; i < n; i++ {
		L := 3 + r.IntN(T-2)
		if i == 0 {
			L = T // at least one unpadded sequence
		}
		for t := 0; t < L; t++ {
			b.IDs[i*T+t] = int32(2 + r.IntN(vocab-2))
			b.Mask[i*T+t] = 1
			if pairs && t >= L/2 {
				b.Types[i*T+t] = 1
			}
		}
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

func TestGradientsMatchPyTorch(t *testing.T) {
	python, script := pyref.Python(t, "torch", "safetensors.torch"), pyref.Tool(t, "torch_ref.py")
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
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkAgainstTorch(t, python, script, tc, uint64(i+1)) })
	}
}

func checkAgainstTorch(t *testing.T, python, script string, tc refCase, seed uint64) {
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
		// B starts at zero, which would make A's gradient zero: give B values
		// so both factors' gradients are checked.
		for _, p := range m.Params {
			if filepath.Ext(p.Name) == ".weight" && isLoRAName(p.Name) {
				for i := range p.W {
					p.W[i] = float32(0.05 * r.NormFloat64())
				}
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
		teacher = make([]float32, tc.Q*tc.G)
		for i := range teacher {
			teacher[i] = float32(r.NormFloat64() * 3)
		}
		job["distill_weight"], job["teacher_temperature"], job["teacher"] = tc.distill, 2.0, teacher
	}
	ids, types, mask := make([][]int32, b.N), make([][]int32, b.N), make([][]float32, b.N)
	for n := 0; n < b.N; n++ {
		ids[n], types[n], mask[n] = b.IDs[n*T:n*T+T], b.Types[n*T:n*T+T], b.Mask[n*T:n*T+T]
	}
	job["ids"], job["types"], job["mask"] = ids, types, mask
	var trainable []string
	for _, p := range m.Params {
		if !p.Frozen {
			trainable = append(trainable, p.Name)
		}
	}
	job["trainable"] = trainable
	if tc.lora != nil {
		job["lora"] = map[string]any{"rank": tc.lora.Rank, "alpha": tc.lora.Alpha}
	}

	// Go: loss and gradients.
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
	loss := l.Value

	// PyTorch: the same model (raw, unmerged tensors) and batch.
	dir := t.TempDir()
	raw := map[string]*safetensors.Tensor{}
	for _, p := range m.Params {
		raw[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: p.Shape, Data: p.W}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), raw, nil); err != nil {
		t.Fatal(err)
	}
	cj, _ := json.Marshal(cfg)
	jb, _ := json.Marshal(job)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.json"), jb, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("torch_ref.py: %v\n%s", err, out)
	}
	ref, err := safetensors.ReadFile(filepath.Join(dir, "grads.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	refLoss := float64(ref["loss"].Data[0])
	pyref.CompareLoss(t, "loss", loss, refLoss)
	// Relative error per tensor in the L2 norm, against the float64
	// reference (pyref.CompareGrads). A few gradients are zero in exact
	// arithmetic (the key bias: softmax ignores a shift of all scores; the
	// classifier bias under the listwise softmax), so their reference is
	// rounding noise; the floor measures those against 1e-3 of the largest
	// tensor gradient instead.
	got := make(map[string][]float32, len(trainable))
	for _, name := range trainable {
		got[name] = m.Param(name).G
	}
	worst, worstName := pyref.CompareGrads(t, ref, got, trainable)
	t.Logf("loss %.7g (PyTorch %.7g); %d gradients compared, worst relative error %.3g (%s)", loss, refLoss, len(trainable), worst, worstName)
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
