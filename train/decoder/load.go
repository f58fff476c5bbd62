package decoder

import (
	"fmt"
	"strings"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/gguf"
	"github.com/anna-search/anna/model/onnx"
)

// Load reads a decoder from a llama GGUF file (dequantized, its query and
// key rows un-permuted, by onnx.LlamaFromGGUF — the weights the GGUF import
// writes into model.onnx) or from a Hugging Face checkpoint directory
// (config.json and *.safetensors).
func Load(path string) (*Model, error) {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
		defer f.Close()
		tensors, cfg, err := onnx.LlamaFromGGUF(f)
		if err != nil {
			return nil, fmt.Errorf("decoder: %s: %w", path, err)
		}
		m, err := New(cfg, tensors)
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
