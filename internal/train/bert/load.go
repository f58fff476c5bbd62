package bert

import (
	"fmt"
	"path/filepath"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// LoadCheckpoint reads a Hugging Face BERT checkpoint directory: config.json
// and every *.safetensors file in it. A config that is not BERT is refused
// with the reason.
func LoadCheckpoint(dir string) (*model.Config, map[string]*safetensors.Tensor, error) {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("bert: %s is not a usable BERT checkpoint: %w", dir, err)
	}
	if cfg.ModelType != "bert" {
		return nil, nil, fmt.Errorf("bert: %s: model_type %q: not a BERT encoder (decoders: internal/train/decoder)", dir, cfg.ModelType)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, nil, fmt.Errorf("bert: listing %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("bert: %s has no *.safetensors weights (the trainer needs the Hugging Face checkpoint, not model.onnx)", dir)
	}
	tensors := map[string]*safetensors.Tensor{}
	for _, f := range files {
		ts, err := safetensors.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("bert: %w", err)
		}
		for k, v := range ts {
			tensors[k] = v
		}
	}
	return cfg, tensors, nil
}

// LoadModel loads a checkpoint directory as a bi-encoder (withHead false) or
// a cross-encoder (withHead true; a missing head is initialised from seed).
func LoadModel(dir string, withHead bool, seed uint64) (*Model, error) {
	cfg, ts, err := LoadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	m, err := NewModel(cfg, ts, withHead, seed)
	if err != nil {
		return nil, fmt.Errorf("bert: %s: %w", dir, err)
	}
	return m, nil
}
