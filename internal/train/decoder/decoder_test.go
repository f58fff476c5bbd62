package decoder

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

// Merging LoRA into the weights (what export writes) leaves the forward
// pass unchanged, and the LoRA factors did move it.
func TestLoRAMergeKeepsForward(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		cfg := testmodels.Decoder(arch)
		r := rand.New(rand.NewPCG(4, 4))
		m, err := New(cfg, RandomTensors(cfg, 0.1, 4))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.EnableLoRA(LoRAConfig{Rank: 3, Alpha: 6}, 4); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Params {
			if isLoRAName(p.Name) {
				for i := range p.W {
					p.W[i] = float32(0.1 * r.NormFloat64())
				}
			}
		}
		b := randomBatch(r, 4, 9, cfg.VocabSize)
		a, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float32(nil), a.Hidden...)
		merged, err := New(cfg, m.Tensors())
		if err != nil {
			t.Fatal(err)
		}
		a2, _ := merged.Forward(b)
		base, _ := New(cfg, RandomTensors(cfg, 0.1, 4))
		a3, _ := base.Forward(b)
		var maxDiff, moved float64
		for i, v := range want {
			if b.Mask[i/cfg.HiddenSize] == 0 {
				continue
			}
			maxDiff = math.Max(maxDiff, math.Abs(float64(a2.Hidden[i]-v)))
			moved = math.Max(moved, math.Abs(float64(a3.Hidden[i]-v)))
		}
		if maxDiff > 1e-4 || moved < 1e-2 {
			t.Fatalf("%s: merged forward differs by %.3g (want ≤ 1e-4); LoRA moved the output by %.3g (want a visible change)", arch, maxDiff, moved)
		}
	}
}

func TestBadInputRefused(t *testing.T) {
	cfg := testmodels.Decoder("qwen3")
	ts := RandomTensors(cfg, 0.1, 1)
	delete(ts, "layers.1.self_attn.k_norm.weight")
	if _, err := New(cfg, ts); err == nil || !strings.Contains(err.Error(), "layers.1.self_attn.k_norm.weight (missing)") {
		t.Fatalf("missing k_norm: got %v", err)
	}
	ts = RandomTensors(cfg, 0.1, 1)
	ts["layers.0.self_attn.o_proj.bias"] = ts["norm.weight"]
	if _, err := New(cfg, ts); err == nil || !strings.Contains(err.Error(), "layers.0.self_attn.o_proj.bias (not part of a qwen3 model") {
		t.Fatalf("unread o_proj bias: got %v", err)
	}
	bert := &model.Config{ModelType: "bert", VocabSize: 10, HiddenSize: 8, NumHiddenLayers: 1, NumAttentionHeads: 2,
		IntermediateSize: 8, MaxPositionEmbeddings: 8, TypeVocabSize: 2, HiddenAct: "gelu", LayerNormEps: 1e-12, PositionEmbeddingType: "absolute"}
	if _, err := New(bert, nil); err == nil || !strings.Contains(err.Error(), "not a decoder") {
		t.Fatalf("bert config: got %v", err)
	}
	m, err := New(testmodels.Decoder("llama"), RandomTensors(testmodels.Decoder("llama"), 0.1, 1))
	if err != nil {
		t.Fatal(err)
	}
	left := &Batch{N: 1, T: 3, IDs: []int32{1, 2, 3}, Mask: []float32{0, 1, 1}}
	if _, err := m.Forward(left); err == nil || !strings.Contains(err.Error(), "right padding only") {
		t.Fatalf("left padding: got %v", err)
	}
	oov := &Batch{N: 1, T: 2, IDs: []int32{1, 64}, Mask: []float32{1, 1}}
	if _, err := m.Forward(oov); err == nil || !strings.Contains(err.Error(), "position 1 outside the vocabulary") {
		t.Fatalf("id outside the vocabulary: got %v", err)
	}
	ok := &Batch{N: 1, T: 2, IDs: []int32{1, 2}, Mask: []float32{1, 1}}
	a, err := m.Forward(ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pool(a, PoolMultiLayer); err == nil || !strings.Contains(err.Error(), "needs that trainable head") {
		t.Fatalf("multilayer pooling without its head: got %v", err)
	}
	if err := m.EnableHead(HeadConfig{Mode: PoolLatent, Heads: 5}, 1); err == nil {
		t.Fatal("a head count not dividing the hidden size was accepted")
	}
	if err := m.EnableLoRA(LoRAConfig{Targets: []string{"query"}}, 1); err == nil {
		t.Fatal("unknown LoRA target accepted")
	}
	if err := m.EnableLoRA(LoRAConfig{}, 1); err != nil {
		t.Fatal(err)
	}
	if a := m.Param("layers.0.mlp.down_proj.lora_A.weight"); a == nil || a.Shape[0] != 64 || m.Layers[0].Down().LoRA.Scale != 0.5 {
		t.Fatal("default LoRA is not rank 64, alpha 32 on every projection")
	}
}

// Recomputing each layer in the backward (gradient checkpointing) gives
// bit-for-bit the gradients of keeping every layer's activations.
func TestRecomputeSameGradients(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		for _, lora := range []bool{false, true} {
			grads := make([]map[string][]float32, 2)
			for i, recompute := range []bool{false, true} {
				cfg := testmodels.Decoder(arch)
				cfg.NumHiddenLayers = 3
				m, err := New(cfg, RandomTensors(cfg, 0.1, 9))
				if err != nil {
					t.Fatal(err)
				}
				m.Recompute, m.Threads = recompute, 2
				r := rand.New(rand.NewPCG(9, 9))
				pool := PoolLast
				if lora { // and a multilayer head, which reads every layer
					pool = PoolMultiLayer
					if err := m.EnableHead(HeadConfig{Mode: pool, Latents: 3, Heads: 4}, 9); err != nil {
						t.Fatal(err)
					}
					if err := m.EnableLoRA(LoRAConfig{Rank: 3, Alpha: 6}, 9); err != nil {
						t.Fatal(err)
					}
					for _, p := range m.Params {
						if !p.Frozen {
							for j := range p.W {
								p.W[j] = float32(0.05 * r.NormFloat64())
							}
						}
					}
				}
				b := randomBatch(r, 2+2*3, 9, cfg.VocabSize)
				if _, err := objective.ContrastiveGrad(m.Pass(b, pool), b.N, 2, 3, m.Cfg.HiddenSize, nil, objective.ContrastiveConfig{InBatch: true}, 1); err != nil {
					t.Fatal(err)
				}
				grads[i] = map[string][]float32{}
				for _, p := range m.Params {
					if !p.Frozen {
						grads[i][p.Name] = p.G
					}
				}
			}
			for name, g := range grads[0] {
				for j := range g {
					if math.Float32bits(g[j]) != math.Float32bits(grads[1][name][j]) {
						t.Fatalf("%s lora=%v: %s[%d]: %g kept, %g recomputed", arch, lora, name, j, g[j], grads[1][name][j])
					}
				}
			}
		}
	}
}

// A Qwen3 config.json as released (Qwen3-0.6B's fields) parses with its own
// head width and q/k norms; another decoder's head_dim must agree with
// hidden_size / num_attention_heads.
func TestQwen3Config(t *testing.T) {
	c, err := model.ParseConfig([]byte(`{"architectures":["Qwen3ForCausalLM"],"attention_bias":false,"bos_token_id":151643,
		"eos_token_id":151645,"head_dim":128,"hidden_act":"silu","hidden_size":1024,"intermediate_size":3072,
		"max_position_embeddings":40960,"model_type":"qwen3","num_attention_heads":16,"num_hidden_layers":28,
		"num_key_value_heads":8,"rms_norm_eps":1e-06,"rope_theta":1000000,"tie_word_embeddings":true,"vocab_size":151936}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsDecoder() || !c.QKNorm() || c.QKVBias() || c.HeadDim() != 128 || c.KVHeads() != 8 || c.RopeTheta != 1e6 {
		t.Fatalf("qwen3 config: decoder %v, q/k norm %v, qkv bias %v, head dim %d, kv heads %d, rope θ %g",
			c.IsDecoder(), c.QKNorm(), c.QKVBias(), c.HeadDim(), c.KVHeads(), c.RopeTheta)
	}
	_, err = model.ParseConfig([]byte(`{"model_type":"llama","head_dim":96,"hidden_size":64,"num_attention_heads":4,
		"num_hidden_layers":1,"intermediate_size":8,"vocab_size":10,"max_position_embeddings":8}`))
	if err == nil || !strings.Contains(err.Error(), "head_dim 96 differs") {
		t.Fatalf("llama with a head_dim of its own: got %v", err)
	}
}

// A batch given as input embeddings (the token rows from EmbedTokens) runs
// and trains exactly as the same batch given as ids, once Backward's
// DInputs are routed into the embedding by EmbedBackward.
func TestInputsEmbedsSameAsIDs(t *testing.T) {
	cfg := testmodels.Decoder("qwen2")
	r := rand.New(rand.NewPCG(4, 4))
	b := randomBatch(r, 5, 7, cfg.VocabSize)
	var hidden [2][]float32
	var grads [2]map[string][]float32
	for i := range 2 {
		m, err := New(cfg, RandomTensors(cfg, 0.1, 4))
		if err != nil {
			t.Fatal(err)
		}
		m.Threads = 2
		in := b
		if i == 1 {
			in = &Batch{N: b.N, T: b.T, Mask: b.Mask, Inputs: make([]float32, b.N*b.T*cfg.HiddenSize)}
			m.EmbedTokens(in.Inputs, b.IDs)
		}
		a, err := m.Forward(in)
		if err != nil {
			t.Fatal(err)
		}
		hidden[i] = append([]float32(nil), a.Hidden...)
		dh := make([]float32, len(a.Hidden))
		m.PoolBackward(a, PoolMean, randn32(rand.New(rand.NewPCG(5, 5)), b.N*cfg.HiddenSize), dh)
		m.Backward(a, dh)
		if i == 1 {
			m.EmbedBackward(b.IDs, a.DInputs)
		}
		grads[i] = map[string][]float32{}
		for _, p := range m.Params {
			grads[i][p.Name] = p.G
		}
	}
	if !slices.Equal(hidden[0], hidden[1]) {
		t.Fatal("hidden states differ between ids and input embeddings")
	}
	for name, g := range grads[0] {
		if !slices.Equal(g, grads[1][name]) {
			t.Fatalf("%s: gradient differs between ids and input embeddings", name)
		}
	}
	m, _ := New(cfg, RandomTensors(cfg, 0.1, 4))
	if _, err := m.Forward(&Batch{N: 1, T: 2, Mask: []float32{1, 1}, Inputs: make([]float32, 3)}); err == nil {
		t.Fatal("input embeddings of the wrong size accepted")
	}
}

func randn32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}
