package decoder

import (
	"fmt"
	"strings"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/gguf"
	"github.com/anna-search/anna/model/onnx"
)

// LoadOptions are Load's choices.
type LoadOptions struct {
	// KeepBase loads the layers' projection weights (q, k, v, o, gate, up,
	// down) frozen and in the type the GGUF file stores them in (Q4_1,
	// Q8_0, float16, …: ops.Param.Base), for LoRA, where the base does not
	// train: SmolLM2's Q4_1 projections take 67 MB instead of 424 MB as
	// float32, and every product is bit for bit the same. Training such a
	// model without EnableLoRA trains the rest (embeddings, norms) only.
	// A checkpoint directory's weights are read as float32 either way.
	KeepBase bool
}

// Load reads a decoder from a llama GGUF file (dequantized, its query and
// key rows un-permuted, by onnx.LlamaFromGGUFKeeping — the weights the
// GGUF import writes into model.onnx) or from a Hugging Face checkpoint
// directory (config.json and *.safetensors).
func Load(path string, o LoadOptions) (*Model, error) {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
		defer f.Close()
		var keep func(string) bool
		if o.KeepBase {
			keep = func(name string) bool { return isProjectionWeight(name) }
		}
		tensors, kept, cfg, err := onnx.LlamaFromGGUFKeeping(f, keep)
		if err != nil {
			return nil, fmt.Errorf("decoder: %s: %w", path, err)
		}
		rows := make(map[string]compactWeight, len(kept))
		for n, k := range kept {
			rows[n] = k
		}
		m, err := newModel(cfg, tensors, rows)
		if err != nil {
			return nil, fmt.Errorf("decoder: %s: %w", path, err)
		}
		return m, nil
	}
	cfg, err := model.LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	tensors, err := onnx.ReadCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("decoder: %s: %w", path, err)
	}
	m, err := New(cfg, tensors)
	if err != nil {
		return nil, fmt.Errorf("decoder: %s: %w", path, err)
	}
	return m, nil
}
