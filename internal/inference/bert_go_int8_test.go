package inference

import (
	"strings"
	"testing"

	"github.com/anna-search/anna/model"
)

// TestGoSupportsInt8: the Go backend takes a BERT model's int8 graph
// (embedding models and cross-encoders) and still refuses other
// quantizations with the reason named.
func TestGoSupportsInt8(t *testing.T) {
	dir := func(task, quant string) *model.Dir {
		return &model.Dir{Manifest: &model.Manifest{Task: task, Pooling: "mean", Quantization: quant},
			Config: &model.Config{ModelType: "bert"}}
	}
	if err := goSupports(dir(model.TaskEmbed, model.QuantizeInt8), model.OutputHidden, false); err != nil {
		t.Errorf("int8 BERT embedding model: %v", err)
	}
	if err := goSupports(dir(model.TaskRerank, model.QuantizeInt8), model.OutputLogits, false); err != nil {
		t.Errorf("int8 BERT cross-encoder: %v", err)
	}
	err := goSupports(dir(model.TaskEmbed, model.QuantizeInt4), model.OutputHidden, false)
	if err == nil || !strings.Contains(err.Error(), "quantized (int4)") {
		t.Errorf("int4 BERT: %v, want a refusal naming int4", err)
	}
}
