// Package llamaload reads a Llama-family decoder for generation and
// training (llama.Model) from a llama GGUF file or a Hugging Face
// checkpoint directory, through the converter's readers (internal/model/onnx,
// internal/model/gguf). It is apart from internal/model/llama so that serving, which runs
// decoders from their model.onnx (llama.ReadGraph), links no converter.
//
// Bad input is an error naming the file; nothing is written.
package llamaload

import (
	"fmt"
	"strings"

	"github.com/anna-search/anna/internal/model/gguf"
	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// LoadOptions are Load's choices.
type LoadOptions struct {
	// KeepBase loads the model for LoRA or generation, where the base does
	// not train: every weight frozen, with no gradient buffer (the
	// trainer's EnableLoRA adds trainable factors), and the
	// layers' projection weights (q, k, v, o, gate, up, down) in the type
	// the file stores them in (ops.Param.Base: a GGUF file's Q4_1, Q8_0,
	// float16, …; a checkpoint's float16 or bfloat16; float32 is read as
	// float32): SmolLM2's Q4_1 projections take 63 MB instead of 405 MB as
	// float32, and every product is bit for bit the same.
	KeepBase bool
}

// Load reads a decoder from a llama GGUF file (dequantized, its query and
// key rows un-permuted, by onnx.LlamaFromGGUFKeeping — the weights the
// GGUF import writes into model.onnx) or from a Hugging Face checkpoint
// directory (config.json and *.safetensors).
func Load(path string, o LoadOptions) (*llama.Model, error) {
	var keep func(string) bool
	if o.KeepBase {
		keep = llama.IsProjectionWeight
	}
	var (
		cfg     *model.Config
		tensors map[string]*safetensors.Tensor
		rows    map[string]llama.StoredWeight
		err     error
	)
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("llama: %w", err)
		}
		defer f.Close()
		var kept map[string]*gguf.Matrix
		if tensors, kept, cfg, err = onnx.LlamaFromGGUFKeeping(f, keep); err != nil {
			return nil, fmt.Errorf("llama: %s: %w", path, err)
		}
		rows = compact(kept)
	} else {
		if cfg, err = model.LoadConfig(path); err != nil {
			return nil, fmt.Errorf("llama: %w", err)
		}
		var kept map[string]*safetensors.Half
		if tensors, kept, err = onnx.ReadCheckpointKeeping(path, keep); err != nil {
			return nil, fmt.Errorf("llama: %s: %w", path, err)
		}
		rows = compact(kept)
	}
	m, err := llama.NewStored(cfg, tensors, rows, o.KeepBase)
	if err != nil {
		return nil, fmt.Errorf("llama: %s: %w", path, err)
	}
	return m, nil
}

func compact[W llama.StoredWeight](kept map[string]W) map[string]llama.StoredWeight {
	out := make(map[string]llama.StoredWeight, len(kept))
	for n, k := range kept {
		out[n] = k
	}
	return out
}
