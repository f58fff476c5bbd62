package decoder_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

// TestKeepBaseMatchesFloat: SmolLM2 loaded with its projections kept in
// the GGUF file's stored type (LoadOptions.KeepBase) trains exactly as
// the float32 model: after two LoRA steps' worth of gradients (random B
// factors, so gradients flow through every layer's frozen weights in both
// directions), the loss and every trainable gradient are bit for bit
// equal, and so is the merged export; the kept projections take less than
// a fifth of their float32 size. Skips when SmolLM2 is not downloaded.
func TestKeepBaseMatchesFloat(t *testing.T) {
	path := gguftest.SmolLM2(t, t.TempDir())
	var models [2]*decoder.Model
	for i, keep := range []bool{false, true} {
		m, err := decoder.Load(path, decoder.LoadOptions{KeepBase: keep})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.EnableLoRA(decoder.LoRAConfig{Rank: 8, Alpha: 16}, 7); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, 3))
		for _, p := range m.Params {
			if !p.Frozen && len(p.Shape) == 2 && p.Shape[1] == 8 { // lora_B
				for j := range p.W {
					p.W[j] = float32(0.02 * r.NormFloat64())
				}
			}
		}
		m.Threads = 2
		models[i] = m
	}
	dense, same := models[0].BaseBytes()
	_, keptC := models[1].BaseBytes()
	t.Logf("projections: %d MB as float32, %d MB kept in the file's type", dense>>20, keptC>>20)
	if same != dense {
		t.Fatalf("a float32 model keeps %d bytes of projections, want %d", same, dense)
	}
	if keptC == 0 || keptC*5 > dense {
		t.Fatalf("kept projections take %d bytes against %d as float32: want under a fifth", keptC, dense)
	}
	const Q, G, T = 2, 2, 24
	N := Q + Q*G
	r := rand.New(rand.NewPCG(5, 5))
	b := &decoder.Batch{N: N, T: T, IDs: make([]int32, N*T), Mask: make([]float32, N*T)}
	for i := range b.IDs {
		if i%T < T-3*(i/T%2) { // every other sequence padded
			b.IDs[i], b.Mask[i] = int32(1000+r.IntN(40000)), 1
		}
	}
	var loss [2]float64
	for i, m := range models {
		m.ZeroGrad()
		l, err := objective.ContrastiveGrad(m.Pass(b, decoder.PoolMean), b.N, Q, G, m.Cfg.HiddenSize, nil, objective.ContrastiveConfig{Temperature: 0.05, InBatch: true}, 1)
		if err != nil {
			t.Fatal(err)
		}
		loss[i] = l.Value
	}
	if loss[0] != loss[1] || math.IsNaN(loss[0]) {
		t.Fatalf("loss %v with float32 weights, %v kept", loss[0], loss[1])
	}
	checked := 0
	for _, p := range models[0].Params {
		if p.Frozen {
			continue
		}
		q := models[1].Param(p.Name)
		if q == nil || q.Frozen || !slices.Equal(p.G, q.G) {
			t.Fatalf("%s: gradient differs with the base kept", p.Name)
		}
		checked++
	}
	nonzero := 0
	for _, g := range models[0].Param("layers.0.self_attn.q_proj.lora_B.weight").G {
		if g != 0 {
			nonzero++
		}
	}
	if checked != 30*7*2 || nonzero == 0 {
		t.Fatalf("%d trainable gradients compared (want 420), %d nonzero in layer 0's q lora_B", checked, nonzero)
	}
	a, k := models[0].Tensors(), models[1].Tensors()
	for _, name := range []string{"layers.0.self_attn.q_proj.weight", "layers.29.mlp.down_proj.weight", "embed_tokens.weight"} {
		if a[name] == nil || k[name] == nil || !slices.Equal(a[name].Data, k[name].Data) {
			t.Fatalf("export of %s differs with the base kept", name)
		}
	}
	t.Logf("loss %.6f; %d LoRA gradients and the merged export equal bit for bit", loss[0], checked)
}
