package bert

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/model"
)

// Export writes the trained model (LoRA merged) as a Hugging Face
// checkpoint in outDir/hf — config.json (a cross-encoder's as
// BertForSequenceClassification), model.safetensors, and the tokenizer and
// sentence-transformers files copied from srcDir — and converts it through
// the import path (internal/model/onnx) into the anna model directory outDir/model,
// whose manifest carries the new fingerprint.
func (m *Model) Export(ctx context.Context, srcDir, outDir string, s export.Settings) (hfDir, modelDir string, err error) {
	ctx = safe.Ctx(ctx)
	cfgJSON, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err != nil {
		return "", "", fmt.Errorf("bert: export: %w", err)
	}
	task := model.TaskEmbed
	if m.HasClassifier() {
		task = model.TaskRerank
		var raw map[string]any
		if err := json.Unmarshal(cfgJSON, &raw); err != nil {
			return "", "", fmt.Errorf("bert: export: config.json: %w", err)
		}
		raw["architectures"] = []string{"BertForSequenceClassification"}
		raw["num_labels"] = m.clsW.Shape[0]
		if cfgJSON, err = json.MarshalIndent(raw, "", "  "); err != nil {
			return "", "", fmt.Errorf("bert: export: %w", err)
		}
	}
	return export.Write(ctx, srcDir, outDir, cfgJSON, m.Tensors(), task, s)
}
