// Package export writes a trained model out of the trainer: a Hugging Face
// checkpoint directory (the source's tokenizer and sentence-transformers
// files, config.json, model.safetensors) converted through the import
// path (internal/model/onnx) into an anna model directory with a new fingerprint.
// Each architecture says what goes into config.json and the checkpoint
// (internal/train/bert, internal/train/decoder, the techniques); this package writes it.
//
// Invariants: Write replaces outDir/hf whole; the source's weights, ONNX
// graphs and anna manifest are never copied (the import writes a new
// manifest). A nil context.Context is context.Background().
package export

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Settings name the exported model.
type Settings struct {
	Name      string
	Pooling   string // bi-encoders; default: what the source's sentence-transformers files say
	MaxLength int    // default: the import path's (sentence-transformers files, else min(512, positions))
	// Normalize, when set, decides the served vectors' normalisation
	// (default: the import path's).
	Normalize *bool
	// Context is a Causal2Vec model's paired encoder.
	Context *model.ContextModel
	// Memory is an AutoRegEmbed model's input layout.
	Memory *model.MemoryTokens
}

// Config reads srcDir's config.json and sets fields in it (a nil value
// removes the field), keeping the others as they are.
func Config(srcDir string, fields map[string]any) ([]byte, error) {
	path := filepath.Join(srcDir, "config.json")
	cfg, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if len(fields) == 0 {
		return cfg, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &m); err != nil {
		return nil, fmt.Errorf("export: %s: %w", path, err)
	}
	for key, value := range fields {
		if value == nil {
			delete(m, key)
			continue
		}
		v, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("export: %s: %s: %w", path, key, err)
		}
		m[key] = v
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export: %s: %w", path, err)
	}
	return out, nil
}

// Write writes outDir/hf (srcDir's side files, cfgJSON as config.json, the
// tensors as model.safetensors) and converts it through the import path
// into outDir/model, for task (model.TaskEmbed or model.TaskRerank).
func Write(ctx context.Context, srcDir, outDir string, cfgJSON []byte, tensors map[string]*safetensors.Tensor, task string, s Settings) (hfDir, modelDir string, err error) {
	ctx = safe.Ctx(ctx)
	hfDir, modelDir = filepath.Join(outDir, "hf"), filepath.Join(outDir, "model")
	if err := os.RemoveAll(hfDir); err != nil {
		return "", "", fmt.Errorf("export: %w", err)
	}
	if err := os.MkdirAll(hfDir, 0o755); err != nil {
		return "", "", fmt.Errorf("export: %w", err)
	}
	// Side files: tokenizer, sentence-transformers modules; never weights,
	// ONNX graphs or anna's manifest (the import writes a new one).
	if err := copySideFiles(srcDir, hfDir); err != nil {
		return "", "", fmt.Errorf("export: %w", err)
	}
	if task == model.TaskRerank {
		// A bi-encoder source's sentence-transformers files (pooling,
		// normalisation, query prompt) say nothing true of a cross-encoder.
		for _, name := range []string{"modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "1_Pooling", "2_Normalize"} {
			if err := os.RemoveAll(filepath.Join(hfDir, name)); err != nil {
				return "", "", fmt.Errorf("export: %w", err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(hfDir, "config.json"), cfgJSON, 0o644); err != nil {
		return "", "", fmt.Errorf("export: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(hfDir, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return "", "", fmt.Errorf("export: %w", err)
	}
	st := onnx.Settings{Name: s.Name, Task: task, MaxLength: s.MaxLength, Context: s.Context, Memory: s.Memory}
	if task == model.TaskEmbed {
		st.Pooling, st.Normalize = s.Pooling, s.Normalize
	}
	if _, err := onnx.Import(ctx, hfDir, modelDir, st); err != nil {
		return "", "", fmt.Errorf("export: %w", err)
	}
	return hfDir, modelDir, nil
}

func copySideFiles(src, dst string) error {
	return filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if info.IsDir() {
			if rel != "." && (strings.HasPrefix(info.Name(), ".") || info.Name() == "onnx") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		switch ext := filepath.Ext(path); {
		case ext == ".safetensors", ext == ".bin", ext == ".onnx", ext == ".pt", ext == ".h5", ext == ".msgpack",
			info.Name() == model.ManifestFile, info.Name() == "config.json" && rel == "config.json":
			return nil
		}
		_, err = onnx.CopyFile(path, filepath.Join(dst, rel))
		return err
	})
}
