package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/onnx"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/technique/autoregembed"
	"github.com/anna-search/anna/train/technique/causal2vec"
)

// ExportSettings name the exported model.
type ExportSettings struct {
	Name      string
	Pooling   string // bi-encoders; default: what the source's sentence-transformers files say
	MaxLength int    // default: the import path's (sentence-transformers files, else min(512, positions))
	// Normalize, when set, decides the served vectors' normalisation
	// (default: the import path's).
	Normalize *bool
	// Context is a Causal2Vec model's paired encoder (ExportCausal2Vec).
	Context *model.ContextModel
	// Memory is an AutoRegEmbed model's input layout (ExportAutoRegEmbed).
	Memory *model.MemoryTokens
}

// Export writes the trained model (LoRA merged) as a Hugging Face
// checkpoint in outDir/hf — config.json, model.safetensors, and the
// tokenizer and sentence-transformers files copied from srcDir — and
// converts it through the import path (model/onnx) into the anna model
// directory outDir/model, whose manifest carries the new fingerprint.
func Export(ctx context.Context, m *Model, srcDir, outDir string, s ExportSettings) (hfDir, modelDir string, err error) {
	cfgJSON, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	task := model.TaskEmbed
	if m.HasClassifier() {
		task = model.TaskRerank
		var raw map[string]any
		if err := json.Unmarshal(cfgJSON, &raw); err != nil {
			return "", "", fmt.Errorf("train: export: config.json: %w", err)
		}
		raw["architectures"] = []string{"BertForSequenceClassification"}
		raw["num_labels"] = m.clsW.Shape[0]
		if cfgJSON, err = json.MarshalIndent(raw, "", "  "); err != nil {
			return "", "", fmt.Errorf("train: export: %w", err)
		}
	}
	return writeExport(ctx, srcDir, outDir, cfgJSON, m.Tensors(), task, s)
}

// ExportDecoder is Export for a decoder (LoRA merged): srcDir gives the
// tokenizer (with the EOS the encoder pools) and config.json; pooling
// defaults to the last token. A model trained with bidirectional attention
// is exported with anna_attention "bidirectional" in its config.json, and
// one with a trainable pooling head with anna_pooling_head (its weights in
// model.safetensors); the ONNX graph (and a later training run) follows
// both.
func ExportDecoder(ctx context.Context, m *decoder.Model, srcDir, outDir string, s ExportSettings) (hfDir, modelDir string, err error) {
	cfgJSON, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	attention := model.AttentionCausal
	if !m.Causal {
		attention = model.AttentionBidirectional
	}
	if cfgJSON, err = setJSONField(cfgJSON, "anna_attention", attention); err != nil {
		return "", "", fmt.Errorf("train: export: %s: %w", filepath.Join(srcDir, "config.json"), err)
	}
	// A trainable pooling head is exported in the checkpoint ("pooling.…")
	// and described in config.json; the graph applies it, so it is the
	// model's pooling.
	if hc := m.HeadConfig(); hc != nil {
		if s.Pooling != "" && s.Pooling != hc.Mode {
			return "", "", fmt.Errorf("train: export: pooling %q: the model has a trained %s head", s.Pooling, hc.Mode)
		}
		s.Pooling = hc.Mode
		cfgJSON, err = setJSONField(cfgJSON, "anna_pooling_head", hc)
	} else {
		cfgJSON, err = setJSONField(cfgJSON, "anna_pooling_head", nil)
	}
	if err != nil {
		return "", "", fmt.Errorf("train: export: %s: %w", filepath.Join(srcDir, "config.json"), err)
	}
	if s.Pooling == "" {
		s.Pooling = model.PoolingLastToken
	}
	return writeExport(ctx, srcDir, outDir, cfgJSON, m.Tensors(), model.TaskEmbed, s)
}

// ExportCausal2Vec is ExportDecoder for a Causal2Vec run: the decoder (LoRA
// merged) and the MLP ("causal2vec.mlp.…") in one checkpoint, config.json's
// anna_causal2vec describing the MLP, and an anna model whose graph takes
// the paired encoder's vector (s.Context) and outputs [h_C; h_EOS]; the
// encoder serving it loads the pair.
func ExportCausal2Vec(ctx context.Context, t *causal2vec.Technique, srcDir, outDir string, s ExportSettings) (hfDir, modelDir string, err error) {
	cfgJSON, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	attention := model.AttentionCausal
	if !t.Model.Causal {
		attention = model.AttentionBidirectional
	}
	cfgJSON, err = setJSONField(cfgJSON, "anna_attention", attention)
	if err == nil {
		cfgJSON, err = setJSONField(cfgJSON, "anna_causal2vec", model.Causal2Vec{ContextDim: t.Cfg.EncoderDim, Bias: t.Cfg.Bias})
	}
	if err != nil {
		return "", "", fmt.Errorf("train: export: %s: %w", filepath.Join(srcDir, "config.json"), err)
	}
	tensors := t.Model.Tensors()
	for _, p := range t.MLPParams() {
		tensors[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: slices.Clone(p.Shape), Data: slices.Clone(p.W)}
	}
	s.Pooling = model.PoolingCausal2Vec
	return writeExport(ctx, srcDir, outDir, cfgJSON, tensors, model.TaskEmbed, s)
}

// ExportAutoRegEmbed is ExportDecoder for an AutoRegEmbed run: the
// trained encoder E (LoRA merged) and its memory tokens
// ("autoregembed.memory") in one checkpoint, config.json's
// anna_memory_tokens giving their number, and an anna model whose graph
// appends them to each text and instruction (s.Memory) and outputs the
// mean of their last hidden states.
func ExportAutoRegEmbed(ctx context.Context, t *autoregembed.Technique, srcDir, outDir string, s ExportSettings) (hfDir, modelDir string, err error) {
	cfgJSON, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	mem := t.Memory()
	cfgJSON, err = setJSONField(cfgJSON, "anna_attention", model.AttentionCausal)
	if err == nil {
		cfgJSON, err = setJSONField(cfgJSON, "anna_memory_tokens", mem.Shape[0])
	}
	if err != nil {
		return "", "", fmt.Errorf("train: export: %s: %w", filepath.Join(srcDir, "config.json"), err)
	}
	tensors := t.Encoder().Tensors()
	tensors[onnx.MemoryTensor] = &safetensors.Tensor{Name: onnx.MemoryTensor, DType: "F32", Shape: slices.Clone(mem.Shape), Data: slices.Clone(mem.W)}
	s.Pooling = model.PoolingMemory
	return writeExport(ctx, srcDir, outDir, cfgJSON, tensors, model.TaskEmbed, s)
}

// writeExport writes outDir/hf (srcDir's side files, config.json, the
// weights) and converts it through the import path into outDir/model.
func writeExport(ctx context.Context, srcDir, outDir string, cfgJSON []byte, tensors map[string]*safetensors.Tensor, task string, s ExportSettings) (hfDir, modelDir string, err error) {
	hfDir, modelDir = filepath.Join(outDir, "hf"), filepath.Join(outDir, "model")
	if err := os.RemoveAll(hfDir); err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	if err := os.MkdirAll(hfDir, 0o755); err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	// Side files: tokenizer, sentence-transformers modules; never weights,
	// ONNX graphs or anna's manifest (the import writes a new one).
	if err := copySideFiles(srcDir, hfDir); err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	if task == model.TaskRerank {
		// A bi-encoder source's sentence-transformers files (pooling,
		// normalisation, query prompt) say nothing true of a cross-encoder.
		for _, name := range []string{"modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "1_Pooling", "2_Normalize"} {
			if err := os.RemoveAll(filepath.Join(hfDir, name)); err != nil {
				return "", "", fmt.Errorf("train: export: %w", err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(hfDir, "config.json"), cfgJSON, 0o644); err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(hfDir, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
	}
	st := onnx.Settings{Name: s.Name, Task: task, MaxLength: s.MaxLength, Context: s.Context, Memory: s.Memory}
	if task == model.TaskEmbed {
		st.Pooling, st.Normalize = s.Pooling, s.Normalize
	}
	if _, err := onnx.Import(ctx, hfDir, modelDir, st); err != nil {
		return "", "", fmt.Errorf("train: export: %w", err)
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

// setJSONField sets one top-level field of a JSON object (removes it for a
// nil value), keeping the others as they are.
func setJSONField(obj []byte, key string, value any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	if value == nil {
		delete(m, key)
		return json.MarshalIndent(m, "", "  ")
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	m[key] = v
	return json.MarshalIndent(m, "", "  ")
}
