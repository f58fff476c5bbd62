package onnx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
)

// BERTFromONNX recovers a BERT encoder's weights, under Hugging Face's
// BertModel names, from an ONNX graph exported by torch.onnx (optimum,
// Xenova's exports and the like): initializers named after the module
// (embeddings.*, encoder.layer.N.*.bias, *.LayerNorm.*) are taken as they
// are; a linear layer's weight, which the exporter stores transposed under
// an anonymous name (onnx::MatMul_123), is found through the MatMul node
// that reads it, whose name is the module's path
// (/encoder/layer.N/attention/self/query/MatMul), and transposed back.
//
// It also returns the config the weights imply: sizes from the shapes, the
// number of attention heads from the attention's reshape constants (0 when
// the graph does not say), the activation from the FFN's ops (Erf: gelu).
// A graph that is not BERT-shaped is refused, naming what is missing.
func BERTFromONNX(m *ReadModel) (map[string]*safetensors.Tensor, *model.Config, error) {
	out := map[string]*safetensors.Tensor{}
	put := func(name string, t *Tensor, transpose bool) error {
		if t.DataType != Float {
			return fmt.Errorf("initializer %q (%s): element type %d, want float32", t.Name, name, t.DataType)
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("two initializers give %s (the second is %q)", name, t.Name)
		}
		st := &safetensors.Tensor{Name: name, DType: "F32", Shape: append([]int(nil), t.Shape...), Data: t.Float}
		if transpose {
			if len(t.Shape) != 2 {
				return fmt.Errorf("initializer %q (%s): shape %v, want a matrix", t.Name, name, t.Shape)
			}
			st.Shape, st.Data = []int{t.Shape[1], t.Shape[0]}, tensor.Transposed(t.Float, t.Shape[0], t.Shape[1])
		}
		out[name] = st
		return nil
	}
	for name, t := range m.Initializers {
		n := strings.TrimPrefix(name, "bert.")
		if strings.HasPrefix(n, "embeddings.") || strings.HasPrefix(n, "encoder.layer.") || strings.HasPrefix(n, "pooler.") {
			if err := put(n, t, false); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, nd := range m.Nodes {
		if nd.OpType != "MatMul" || len(nd.Inputs) != 2 {
			continue
		}
		t, ok := m.Initializers[nd.Inputs[1]]
		if !ok {
			continue
		}
		mod, ok := strings.CutSuffix(strings.TrimPrefix(nd.Name, "/"), "/MatMul")
		if !ok {
			return nil, nil, fmt.Errorf("MatMul node %q reads weight %q, but its name is no module path (/encoder/layer.N/.../MatMul)", nd.Name, nd.Inputs[1])
		}
		name := strings.TrimPrefix(strings.ReplaceAll(mod, "/", "."), "bert.") + ".weight"
		if err := put(name, t, true); err != nil {
			return nil, nil, err
		}
	}
	word, ok := out["embeddings.word_embeddings.weight"]
	if !ok || len(word.Shape) != 2 {
		return nil, nil, fmt.Errorf("not a BERT-shaped graph: no embeddings.word_embeddings.weight initializer (a [vocab, hidden] matrix)")
	}
	cfg := &model.Config{ModelType: "bert", VocabSize: word.Shape[0], HiddenSize: word.Shape[1], HiddenAct: "gelu", LayerNormEps: 1e-12}
	shape0 := func(name string) (int, error) {
		t, ok := out[name]
		if !ok || len(t.Shape) != 2 {
			return 0, fmt.Errorf("not a BERT-shaped graph: no %s (a matrix)", name)
		}
		return t.Shape[0], nil
	}
	var err error
	if cfg.MaxPositionEmbeddings, err = shape0("embeddings.position_embeddings.weight"); err != nil {
		return nil, nil, err
	}
	if cfg.TypeVocabSize, err = shape0("embeddings.token_type_embeddings.weight"); err != nil {
		return nil, nil, err
	}
	layer := regexp.MustCompile(`^encoder\.layer\.(\d+)\.`)
	layers := map[int]bool{}
	for name := range out {
		if s := layer.FindStringSubmatch(name); s != nil {
			n, _ := strconv.Atoi(s[1])
			layers[n] = true
		}
	}
	for i := range layers {
		if i >= len(layers) {
			return nil, nil, fmt.Errorf("not a BERT-shaped graph: encoder layers are not numbered 0..%d (layer %d)", len(layers)-1, i)
		}
	}
	cfg.NumHiddenLayers = len(layers)
	if cfg.NumHiddenLayers == 0 {
		return nil, nil, fmt.Errorf("not a BERT-shaped graph: no encoder.layer.N weights")
	}
	if cfg.IntermediateSize, err = shape0("encoder.layer.0.intermediate.dense.weight"); err != nil {
		return nil, nil, err
	}
	cfg.NumAttentionHeads = headsFromGraph(m, cfg.HiddenSize)
	for _, nd := range m.Nodes {
		if strings.Contains(nd.Name, "/intermediate/") && nd.OpType == "Tanh" {
			cfg.HiddenAct = "gelu_new"
		}
	}
	return out, cfg, nil
}

// headsFromGraph finds the number of attention heads in layer 0's
// self-attention: the exporter reshapes [batch, seq, hidden] to [batch,
// seq, heads, head_dim] with those two numbers as constants. 0 when no
// such pair is found.
func headsFromGraph(m *ReadModel, hidden int) int {
	consts := map[string]int64{}
	for _, nd := range m.Nodes {
		if nd.OpType == "Constant" && len(nd.Outputs) == 1 {
			if a, ok := nd.Attrs["value"]; ok && a.T != nil && len(a.T.Int64) == 1 {
				consts[nd.Outputs[0]] = a.T.Int64[0]
			}
		}
	}
	for name, t := range m.Initializers {
		if len(t.Int64) == 1 {
			consts[name] = t.Int64[0]
		}
	}
	for _, nd := range m.Nodes {
		if nd.OpType != "Concat" || !strings.Contains(nd.Name, "layer.0/attention/self") || len(nd.Inputs) != 4 {
			continue
		}
		h, ok1 := consts[nd.Inputs[2]]
		d, ok2 := consts[nd.Inputs[3]]
		if ok1 && ok2 && h > 0 && int(h*d) == hidden {
			return int(h)
		}
	}
	return 0
}

// ImportONNX converts a BERT-family encoder exported to ONNX (onnxPath,
// with its tokenizer.json) into a model directory dest, like Import: the
// weights are read out of the graph (BERTFromONNX) and written again by
// anna's own BERT writer, so every model has the one graph shape that the
// encoder, the rerank stage and the trainer share. cfgJSON, the model's
// config.json, may be nil when the graph says everything (heads included);
// when given, every size in it must agree with the weights.
func ImportONNX(ctx context.Context, onnxPath, tokenizerPath string, cfgJSON []byte, dest string, s Settings) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	tensors, cfg, cfgJSON, err := ReadBERT(onnxPath, cfgJSON)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(tokenizerPath); err != nil {
		return nil, fmt.Errorf("import: %s needs its tokenizer.json: %w", onnxPath, err)
	}
	if s.Source == "" {
		if abs, err := filepath.Abs(onnxPath); err == nil {
			s.Source = abs
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return WriteDir(ctx, dest, cfg, cfgJSON, tensors, tokenizerPath, s)
}

// ReadBERT reads the weights of the BERT graph at onnxPath (BERTFromONNX)
// and its config: cfgJSON, the model's config.json, may be nil when the
// graph says everything (heads included), and when given, every size in it
// must agree with the weights. It returns the config.json to write beside
// the weights (cfgJSON, or the one the graph implies).
func ReadBERT(onnxPath string, cfgJSON []byte) (map[string]*safetensors.Tensor, *model.Config, []byte, error) {
	rm, err := ReadFile(onnxPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("import: %w", err)
	}
	tensors, got, err := BERTFromONNX(rm)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("import: %s: %w", onnxPath, err)
	}
	cfg := got
	if cfgJSON != nil {
		if cfg, err = model.ParseConfig(cfgJSON); err != nil {
			return nil, nil, nil, fmt.Errorf("import: config.json for %s: %w", onnxPath, err)
		}
		if err := agree(cfg, got); err != nil {
			return nil, nil, nil, fmt.Errorf("import: config.json disagrees with the weights of %s: %w", onnxPath, err)
		}
	} else {
		if cfg.NumAttentionHeads == 0 {
			return nil, nil, nil, fmt.Errorf("import: %s: the graph does not say how many attention heads the model has; give its config.json", onnxPath)
		}
		if cfgJSON, err = json.MarshalIndent(cfg, "", "  "); err != nil {
			return nil, nil, nil, err
		}
	}
	return tensors, cfg, cfgJSON, nil
}

// agree checks that the sizes in cfg match those the weights imply (heads
// only when the graph says).
func agree(cfg, got *model.Config) error {
	var bad []string
	check := func(field string, a, b int) {
		if a != b && b != 0 {
			bad = append(bad, fmt.Sprintf("%s is %d, the weights say %d", field, a, b))
		}
	}
	check("vocab_size", cfg.VocabSize, got.VocabSize)
	check("hidden_size", cfg.HiddenSize, got.HiddenSize)
	check("num_hidden_layers", cfg.NumHiddenLayers, got.NumHiddenLayers)
	check("num_attention_heads", cfg.NumAttentionHeads, got.NumAttentionHeads)
	check("intermediate_size", cfg.IntermediateSize, got.IntermediateSize)
	check("max_position_embeddings", cfg.MaxPositionEmbeddings, got.MaxPositionEmbeddings)
	check("type_vocab_size", cfg.TypeVocabSize, got.TypeVocabSize)
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}
