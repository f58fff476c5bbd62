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

// TestEncoderLayout: a BERT layer's tensors are transformers' names and
// nn.Linear shapes in the checkpoint's order, and Bind fills each role's
// weight and bias slots.
func TestEncoderLayout(t *testing.T) {
	e := EncoderOf(&model.Config{ModelType: "bert", HiddenSize: 32, IntermediateSize: 64, NumAttentionHeads: 4})
	var got []string
	for _, w := range e.Weights {
		got = append(got, fmt.Sprintf("%s%v", w.Name, w.Shape))
	}
	want := []string{"attention.self.query.weight[32 32]", "attention.self.query.bias[32]", "attention.self.key.weight[32 32]",
		"attention.self.key.bias[32]", "attention.self.value.weight[32 32]", "attention.self.value.bias[32]",
		"attention.output.dense.weight[32 32]", "attention.output.dense.bias[32]", "attention.output.LayerNorm.weight[32]",
		"attention.output.LayerNorm.bias[32]", "intermediate.dense.weight[64 32]", "intermediate.dense.bias[64]",
		"output.dense.weight[32 64]", "output.dense.bias[32]", "output.LayerNorm.weight[32]", "output.LayerNorm.bias[32]"}
	if !slices.Equal(got, want) {
		t.Errorf("BERT layer:\n got %v\nwant %v", got, want)
	}
	var q, qb, ln, lnb string
	slots := map[Role][2]*string{EncQuery: {&q, &qb}, EncOutNorm: {&ln, &lnb}}
	for r := EncKey; r <= EncOut; r++ {
		slots[r] = [2]*string{new(string), new(string)}
	}
	Bind(e, slots, func(w Weight) string { return w.Name })
	if q != "attention.self.query.weight" || qb != "attention.self.query.bias" || ln != "output.LayerNorm.weight" || lnb != "output.LayerNorm.bias" {
		t.Errorf("Bind: %q %q %q %q", q, qb, ln, lnb)
	}
	if EncAttnNorm.IsProjection() || !EncInter.IsProjection() || EncQuery.GGUFModule() != "" {
		t.Errorf("roles: EncAttnNorm projection %v, EncInter %v, EncQuery's GGUF name %q", EncAttnNorm.IsProjection(), EncInter.IsProjection(), EncQuery.GGUFModule())
	}
}
