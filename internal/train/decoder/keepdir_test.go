package decoder

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/model/safetensors/safetensorstest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/objective"
)

// writeHalfCheckpoint writes a Hugging Face directory for cfg whose 2-D
// tensors are stored as float16 (random float16 values: the embeddings and
// layer 0) or bfloat16 (layer 1), and whose norms are float32 ones.
func writeHalfCheckpoint(t *testing.T, modelType string) string {
	t.Helper()
	cfg := testmodels.Decoder(modelType)
	dir := t.TempDir()
	cj, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	ts := RandomTensors(cfg, 0.05, 5)
	dtype := func(name string) string {
		switch {
		case len(ts[name].Shape) != 2:
			return "F32"
		case strings.Contains(name, "layers.1."):
			return "BF16"
		}
		return "F16"
	}
	for name, tn := range ts {
		if dtype(name) == "F16" { // sign, exponent 2^-7..2^-3, random mantissa
			for i := range tn.Data {
				tn.Data[i] = safetensors.HalfToFloat(uint16(r.UintN(2))<<15 | uint16(8+r.UintN(5))<<10 | uint16(r.UintN(1024)))
			}
		}
	}
	safetensorstest.WriteHalf(t, filepath.Join(dir, "model.safetensors"), ts, dtype)
	return dir
}

// TestKeepBaseFromCheckpointMatchesFloat: a checkpoint directory whose
// projections are float16 and bfloat16, loaded with KeepBase (the
// projections kept as stored, half the bytes), trains exactly as the
// float32 model: loss, every LoRA gradient and the merged export bit for
// bit equal, for Llama and Qwen3 (q/k norms, a head width that is not
// hidden/heads), causal and bidirectional.
func TestKeepBaseFromCheckpointMatchesFloat(t *testing.T) {
	for _, mt := range []string{"llama", "qwen3"} {
		dir := writeHalfCheckpoint(t, mt)
		for _, causal := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/causal=%v", mt, causal), func(t *testing.T) {
				var models [2]*Model
				for i, keep := range []bool{false, true} {
					m, err := Load(dir, LoadOptions{KeepBase: keep})
					if err != nil {
						t.Fatal(err)
					}
					if err := m.EnableLoRA(LoRAConfig{Rank: 4, Alpha: 8}, 3); err != nil {
						t.Fatal(err)
					}
					r := rand.New(rand.NewPCG(1, 2))
					for _, p := range m.Params {
						if !p.Frozen {
							for j := range p.W {
								p.W[j] = float32(0.05 * r.NormFloat64())
							}
						}
					}
					m.Causal, m.Threads = causal, 2
					models[i] = m
				}
				dense, _ := models[0].BaseBytes()
				_, kept := models[1].BaseBytes()
				if kept*2 != dense {
					t.Fatalf("kept projections take %d bytes, want half of %d", kept, dense)
				}
				var loss [2]float64
				for i, m := range models {
					b := randomBatch(rand.New(rand.NewPCG(4, 4)), 2+2*3, 9, m.Cfg.VocabSize)
					l, err := objective.ContrastiveGrad(m.Pass(b, PoolMean), b.N, 2, 3, m.Cfg.HiddenSize, nil, objective.ContrastiveConfig{InBatch: true}, 1)
					if err != nil {
						t.Fatal(err)
					}
					loss[i] = l.Value
				}
				if loss[0] != loss[1] || math.IsNaN(loss[0]) {
					t.Fatalf("loss %v as float32, %v kept", loss[0], loss[1])
				}
				n := 0
				for _, p := range models[0].Params {
					if q := models[1].Param(p.Name); !p.Frozen && (q == nil || !slices.Equal(p.G, q.G)) {
						t.Fatalf("%s: gradient differs with the base kept", p.Name)
					}
					if !p.Frozen {
						n++
					}
				}
				a, k := models[0].Tensors(), models[1].Tensors()
				for name, ta := range a {
					if tk := k[name]; tk == nil || !slices.Equal(ta.Data, tk.Data) {
						t.Fatalf("export of %s differs with the base kept", name)
					}
				}
				if n != 2*7*2 || len(a) != len(k) {
					t.Fatalf("%d trainable params (want 28), export %d vs %d tensors", n, len(a), len(k))
				}
			})
		}
	}
}
