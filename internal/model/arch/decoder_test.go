package arch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/anna-search/anna/model"
)

// TestDecoderLayout: a layer's tensors for each Llama-family variant are
// transformers' names and nn.Linear shapes, in the checkpoint's order
// (the trainer's parameter order): Qwen2 adds the q/k/v biases after
// their weights, Qwen3 the per-head q/k norms (of its own head width).
func TestDecoderLayout(t *testing.T) {
	cfg := func(mt string) *model.Config {
		c := &model.Config{ModelType: mt, VocabSize: 64, HiddenSize: 32, NumHiddenLayers: 2, NumAttentionHeads: 4,
			NumKeyValueHeads: 2, IntermediateSize: 48, MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000}
		if mt == "qwen3" {
			c.HeadDimField = 12
		}
		return c
	}
	for _, c := range []struct {
		arch string
		want []string
	}{
		{"llama", []string{"input_layernorm.weight[32]", "self_attn.q_proj.weight[32 32]", "self_attn.k_proj.weight[16 32]",
			"self_attn.v_proj.weight[16 32]", "self_attn.o_proj.weight[32 32]", "mlp.gate_proj.weight[48 32]",
			"mlp.up_proj.weight[48 32]", "mlp.down_proj.weight[32 48]", "post_attention_layernorm.weight[32]"}},
		{"qwen2", []string{"input_layernorm.weight[32]", "self_attn.q_proj.weight[32 32]", "self_attn.q_proj.bias[32]",
			"self_attn.k_proj.weight[16 32]", "self_attn.k_proj.bias[16]", "self_attn.v_proj.weight[16 32]", "self_attn.v_proj.bias[16]",
			"self_attn.o_proj.weight[32 32]", "mlp.gate_proj.weight[48 32]", "mlp.up_proj.weight[48 32]", "mlp.down_proj.weight[32 48]",
			"post_attention_layernorm.weight[32]"}},
		{"qwen3", []string{"input_layernorm.weight[32]", "self_attn.q_proj.weight[48 32]", "self_attn.k_proj.weight[24 32]",
			"self_attn.v_proj.weight[24 32]", "self_attn.o_proj.weight[32 48]", "mlp.gate_proj.weight[48 32]",
			"mlp.up_proj.weight[48 32]", "mlp.down_proj.weight[32 48]", "self_attn.q_norm.weight[12]", "self_attn.k_norm.weight[12]",
			"post_attention_layernorm.weight[32]"}},
	} {
		d := DecoderOf(cfg(c.arch))
		var got []string
		for _, w := range d.Weights {
			got = append(got, fmt.Sprintf("%s%v", w.Name, w.Shape))
			if w.Module()+map[bool]string{false: ".weight", true: ".bias"}[w.Bias] != w.Name {
				t.Errorf("%s: %s's module is %s", c.arch, w.Name, w.Module())
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s layer:\n got %v\nwant %v", c.arch, got, c.want)
		}
	}
	if got := Layer("model.", 3) + ProjModule(6); got != "model.layers.3.mlp.down_proj" {
		t.Errorf("Layer/ProjModule: %s", got)
	}
	if QNorm.GGUFModule() != "" || DownProj.GGUFModule() != "ffn_down" {
		t.Errorf("GGUF names: q_norm %q, down_proj %q", QNorm.GGUFModule(), DownProj.GGUFModule())
	}
}
