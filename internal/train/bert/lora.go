package bert

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/ops"
)

// LoRAConfig chooses low-rank adaptation: each target matrix W (out×in)
// becomes W + Alpha/Rank · B·A with A (Rank×in) and B (out×Rank) trained
// and W frozen. Targets name the matrices by their Hugging Face suffix.
type LoRAConfig struct {
	Rank    int
	Alpha   float64
	Targets []string // e.g. "query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"
}

// DefaultLoRATargets are the attention projections, as peft does for BERT.
var DefaultLoRATargets = []string{"query", "value"}

func isLoRAName(n string) bool {
	return strings.Contains(n, ".lora_A.") || strings.Contains(n, ".lora_B.")
}

// loraSuffixes maps a target name to the per-layer weight it adapts.
var loraSuffixes = map[string]string{
	"query":                  arch.EncQuery.Module() + ".weight",
	"key":                    arch.EncKey.Module() + ".weight",
	"value":                  arch.EncValue.Module() + ".weight",
	arch.EncAttnOut.Module(): arch.EncAttnOut.Module() + ".weight",
	arch.EncInter.Module():   arch.EncInter.Module() + ".weight",
	arch.EncOut.Module():     arch.EncOut.Module() + ".weight",
}

// EnableLoRA freezes the encoder and adds LoRA factors to the target
// matrices of every layer (A: uniform ±1/√in as peft's Kaiming init, B: 0).
// A classifier head, when present, stays trainable.
func (m *Model) EnableLoRA(cfg LoRAConfig, seed uint64) error {
	if cfg.Rank <= 0 {
		return fmt.Errorf("bert: lora rank must be positive, got %d", cfg.Rank)
	}
	if cfg.Alpha <= 0 {
		cfg.Alpha = float64(cfg.Rank)
	}
	if len(cfg.Targets) == 0 {
		cfg.Targets = DefaultLoRATargets
	}
	if m.lora != nil {
		return fmt.Errorf("bert: lora already enabled")
	}
	for _, t := range cfg.Targets {
		if _, ok := loraSuffixes[t]; !ok {
			return fmt.Errorf("bert: lora target %q unknown (want one of query, key, value, attention.output.dense, intermediate.dense, output.dense)", t)
		}
	}
	for _, p := range m.Params {
		if p != m.clsW && p != m.clsB && p != m.poolW && p != m.poolB || !m.HasClassifier() {
			p.Frozen = true
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x10a))
	m.lora = map[*Param]*ops.LoRA{}
	for l := range m.layers {
		for _, t := range cfg.Targets {
			w := m.byName[m.prefix+arch.EncoderLayer(l)+loraSuffixes[t]]
			out, in := w.Shape[0], w.Shape[1]
			base := strings.TrimSuffix(w.Name, ".weight")
			a := &Param{Name: base + ".lora_A.weight", Shape: []int{cfg.Rank, in}, W: make([]float32, cfg.Rank*in), G: make([]float32, cfg.Rank*in)}
			bound := 1 / math.Sqrt(float64(in))
			for i := range a.W {
				a.W[i] = float32((2*rng.Float64() - 1) * bound)
			}
			b := &Param{Name: base + ".lora_B.weight", Shape: []int{out, cfg.Rank}, W: make([]float32, out*cfg.Rank), G: make([]float32, out*cfg.Rank)}
			m.Params = append(m.Params, a, b)
			m.byName[a.Name], m.byName[b.Name] = a, b
			m.lora[w] = &ops.LoRA{A: a, B: b, Rank: cfg.Rank, Scale: float32(cfg.Alpha / float64(cfg.Rank))}
		}
	}
	return nil
}
