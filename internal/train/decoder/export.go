package decoder

import (
	"context"
	"fmt"
	"maps"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/model"
)

// Export writes the trained decoder (LoRA merged) as outDir/hf and the
// anna model outDir/model: config.json is srcDir's with anna_attention
// (bidirectional when the model was trained so) and anna_pooling_head (its
// trainable head, whose weights go into model.safetensors, or none) set,
// and fields set as well (a nil value removes one); extra tensors join the
// model's (a technique's own). srcDir also gives the tokenizer, with the
// EOS the encoder pools. Pooling defaults to the head's mode, else the
// last token; the ONNX graph (and a later training run) follows
// config.json.
func (m *Model) Export(ctx context.Context, srcDir, outDir string, s export.Settings, fields map[string]any, extra map[string]*safetensors.Tensor) (hfDir, modelDir string, err error) {
	ctx = safe.Ctx(ctx)
	attention := model.AttentionCausal
	if !m.Causal {
		attention = model.AttentionBidirectional
	}
	set := map[string]any{"anna_attention": attention, "anna_pooling_head": nil}
	// A trainable pooling head is exported in the checkpoint ("pooling.…")
	// and described in config.json; the graph applies it, so it is the
	// model's pooling.
	if hc := m.HeadConfig(); hc != nil {
		if s.Pooling != "" && s.Pooling != hc.Mode {
			return "", "", fmt.Errorf("decoder: export: pooling %q: the model has a trained %s head", s.Pooling, hc.Mode)
		}
		s.Pooling = hc.Mode
		set["anna_pooling_head"] = hc
	}
	maps.Copy(set, fields)
	cfgJSON, err := export.Config(srcDir, set)
	if err != nil {
		return "", "", fmt.Errorf("decoder: %w", err)
	}
	if s.Pooling == "" {
		s.Pooling = model.PoolingLastToken
	}
	tensors := m.Tensors()
	maps.Copy(tensors, extra)
	return export.Write(ctx, srcDir, outDir, cfgJSON, tensors, model.TaskEmbed, s)
}
