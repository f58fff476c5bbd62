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

	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
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
// Quantized graphs are read too, their weights dequantized as ONNX
// Runtime's DequantizeLinear does (float32(q − zero point) · scale, the
// scale and zero point per tensor or per output column): the dynamically
// quantized ones of ONNX Runtime's quantize_dynamic (Xenova's
// model_quantized.onnx: a product is a MatMulInteger of
// DynamicQuantizeLinear's output and an int8 or uint8 initializer, whose
// scale the node's output is multiplied by; embedding tables as
// NAME_quantized with NAME_scale and NAME_zero_point, read through a
// DequantizeLinear) and QDQ ones (a MatMul whose weight is a
// DequantizeLinear of an initializer). The activations' quantization is
// the graph's way of running, not part of the model: anna's graphs
// quantize their own (see Int8FromONNX for keeping the source's integer
// weights).
//
// It also returns the config the weights imply: sizes from the shapes, the
// number of attention heads from the attention's reshape constants (0 when
// the graph does not say), the activation from the FFN's ops (Erf: gelu).
// A graph that is not BERT-shaped is refused, naming what is missing.
func BERTFromONNX(m *ReadModel) (map[string]*safetensors.Tensor, *model.Config, error) {
	out, _, cfg, err := bertFromONNX(m)
	return out, cfg, err
}

// Int8FromONNX returns the int8 weights of a quantized BERT graph's
// products (see BERTFromONNX), by Linear module name
// (encoder.layer.N.attention.self.query, ...), in the form anna's int8
// graphs store them (Int8Columns: [in, out], a scale per column,
// symmetric): each product whose integers less their zero point fit in
// ±64, the 7 bits anna's weights use (quantize.go: no saturation on AVX2),
// as ONNX Runtime's quantizer writes them with reduce_range; a product
// whose weights do not fit is absent (it is quantized again from its
// dequantized weights). Empty for a float32 graph.
func Int8FromONNX(m *ReadModel) (map[string]*Int8Columns, error) {
	_, q, _, err := bertFromONNX(m)
	return q, err
}

func bertFromONNX(m *ReadModel) (map[string]*safetensors.Tensor, map[string]*Int8Columns, *model.Config, error) {
	out := map[string]*safetensors.Tensor{}
	int8s := map[string]*Int8Columns{}
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
	moduleTensor := func(n string) bool {
		return strings.HasPrefix(n, "embeddings.") || strings.HasPrefix(n, "encoder.layer.") || strings.HasPrefix(n, "pooler.")
	}
	for name, t := range m.Initializers {
		n := strings.TrimPrefix(name, "bert.")
		if base, ok := strings.CutSuffix(n, "_quantized"); ok && moduleTensor(base) {
			// A quantized table (an embedding), with NAME_scale and
			// NAME_zero_point beside it.
			p := strings.TrimSuffix(name, "_quantized")
			f, err := dequantize(t, m.Initializers[p+"_scale"], m.Initializers[p+"_zero_point"], len(t.Shape)-1, p+"_scale")
			if err != nil {
				return nil, nil, nil, err
			}
			if err := put(base, f, false); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		if t.DataType == onnxfile.Int64 && strings.HasSuffix(n, "position_ids") {
			continue // the exporter's arange buffer, not a weight
		}
		if moduleTensor(n) && !strings.HasSuffix(n, "_scale") && !strings.HasSuffix(n, "_zero_point") {
			if err := put(n, t, false); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	producer := map[string]*Node{} // output name → the node writing it
	consumers := map[string][]*Node{}
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		for _, o := range nd.Outputs {
			producer[o] = nd
		}
		for _, in := range nd.Inputs {
			consumers[in] = append(consumers[in], nd)
		}
	}
	module := func(nd *Node, weight string) (string, error) {
		mod, ok := strings.CutSuffix(strings.TrimPrefix(nd.Name, "/"), "/MatMul")
		if !ok {
			mod, ok = strings.CutSuffix(strings.TrimPrefix(nd.Name, "/"), "/MatMul_quant")
		}
		if !ok {
			return "", fmt.Errorf("%s node %q reads weight %q, but its name is no module path (/encoder/layer.N/.../MatMul)", nd.OpType, nd.Name, weight)
		}
		return strings.TrimPrefix(strings.ReplaceAll(mod, "/", "."), "bert."), nil
	}
	// quantized records a product's weight q [in, out] with its scale
	// and zero point: dequantized for the float32 weights, kept as int8
	// columns when they fit.
	quantized := func(nd *Node, q, scale, zp *Tensor, scaleName string) error {
		mod, err := module(nd, q.Name)
		if err != nil {
			return err
		}
		if len(q.Shape) != 2 {
			return fmt.Errorf("initializer %q (%s.weight): shape %v, want a matrix", q.Name, mod, q.Shape)
		}
		f, err := dequantize(q, scale, zp, 1, scaleName)
		if err != nil {
			return err
		}
		if err := put(mod+".weight", f, true); err != nil {
			return err
		}
		if c := int8Columns(q, scale, zp); c != nil {
			int8s[mod] = c
		}
		return nil
	}
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		switch {
		case nd.OpType == "MatMul" && len(nd.Inputs) == 2:
			if t, ok := m.Initializers[nd.Inputs[1]]; ok {
				mod, err := module(nd, nd.Inputs[1])
				if err != nil {
					return nil, nil, nil, err
				}
				if err := put(mod+".weight", t, true); err != nil {
					return nil, nil, nil, err
				}
				continue
			}
			// QDQ: the weight is a DequantizeLinear of an initializer.
			dq := producer[nd.Inputs[1]]
			if dq == nil || dq.OpType != "DequantizeLinear" || len(dq.Inputs) < 2 {
				continue
			}
			q, ok := m.Initializers[dq.Inputs[0]]
			if !ok {
				continue
			}
			scale := m.Initializers[dq.Inputs[1]]
			if a, ok := dq.Attrs["axis"]; ok && a.I != 1 && scale != nil && len(scale.Float) > 1 {
				return nil, nil, nil, fmt.Errorf("DequantizeLinear node %q: weight %q quantized along axis %d; want per tensor or per output column (axis 1)", dq.Name, q.Name, a.I)
			}
			var zp *Tensor
			if len(dq.Inputs) > 2 && dq.Inputs[2] != "" {
				zp = m.Initializers[dq.Inputs[2]]
			}
			if err := quantized(nd, q, scale, zp, dq.Inputs[1]); err != nil {
				return nil, nil, nil, err
			}
		case nd.OpType == "MatMulInteger" && len(nd.Inputs) >= 2:
			q, ok := m.Initializers[nd.Inputs[1]]
			if !ok {
				continue
			}
			var zp *Tensor
			if len(nd.Inputs) > 3 && nd.Inputs[3] != "" {
				zp = m.Initializers[nd.Inputs[3]]
			}
			name, scale := productScale(m, nd, consumers, producer)
			if err := quantized(nd, q, scale, zp, name); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	word, ok := out["embeddings.word_embeddings.weight"]
	if !ok || len(word.Shape) != 2 {
		return nil, nil, nil, fmt.Errorf("not a BERT-shaped graph: no embeddings.word_embeddings.weight initializer (a [vocab, hidden] matrix)")
	}
	cfg := &model.Config{ModelType: "bert", VocabSize: word.Shape[0], HiddenSize: word.Shape[1], HiddenAct: "gelu", LayerNormEps: 1e-12, PositionEmbeddingType: "absolute"}
	shape0 := func(name string) (int, error) {
		t, ok := out[name]
		if !ok || len(t.Shape) != 2 {
			return 0, fmt.Errorf("not a BERT-shaped graph: no %s (a matrix)", name)
		}
		return t.Shape[0], nil
	}
	var err error
	if cfg.MaxPositionEmbeddings, err = shape0("embeddings.position_embeddings.weight"); err != nil {
		return nil, nil, nil, err
	}
	if cfg.TypeVocabSize, err = shape0("embeddings.token_type_embeddings.weight"); err != nil {
		return nil, nil, nil, err
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
			return nil, nil, nil, fmt.Errorf("not a BERT-shaped graph: encoder layers are not numbered 0..%d (layer %d)", len(layers)-1, i)
		}
	}
	cfg.NumHiddenLayers = len(layers)
	if cfg.NumHiddenLayers == 0 {
		return nil, nil, nil, fmt.Errorf("not a BERT-shaped graph: no encoder.layer.N weights")
	}
	if cfg.IntermediateSize, err = shape0("encoder.layer.0.intermediate.dense.weight"); err != nil {
		return nil, nil, nil, err
	}
	cfg.NumAttentionHeads = headsFromGraph(m, cfg.HiddenSize)
	for _, nd := range m.Nodes {
		if strings.Contains(nd.Name, "/intermediate/") && nd.OpType == "Tanh" {
			cfg.HiddenAct = "gelu_new"
		}
	}
	return out, int8s, cfg, nil
}

// productScale finds the scale of a MatMulInteger's weight in a
// dynamically quantized graph: ONNX Runtime's quantizer multiplies the
// product (cast to float) by the activation's scale times the weight's,
// so the weight's scale is the initializer operand of the Mul that makes
// the factor; failing that, the initializer named after the weight
// (NAME_quantized → NAME_scale). It returns the name looked for and the
// tensor (nil when there is none).
func productScale(m *ReadModel, nd *Node, consumers map[string][]*Node, producer map[string]*Node) (string, *Tensor) {
	for _, c := range consumers[nd.Outputs[0]] {
		if c.OpType != "Cast" {
			continue
		}
		for _, mul := range consumers[c.Outputs[0]] {
			if mul.OpType != "Mul" {
				continue
			}
			for _, in := range mul.Inputs {
				f := producer[in]
				if in == c.Outputs[0] || f == nil || f.OpType != "Mul" {
					continue
				}
				for _, s := range f.Inputs {
					if t, ok := m.Initializers[s]; ok {
						return s, t
					}
				}
			}
		}
	}
	name := strings.TrimSuffix(nd.Inputs[1], "_quantized") + "_scale"
	return name, m.Initializers[name]
}

// dequantize is ONNX Runtime's DequantizeLinear of q (int8 or uint8) with
// scale and zero point zp (nil: 0) per tensor, or per index along axis
// (then 1-D of that dimension's size): float32(q − zp) · scale.
func dequantize(q, scale, zp *Tensor, axis int, scaleName string) (*Tensor, error) {
	if q.DataType != onnxfile.Int8 && q.DataType != onnxfile.Uint8 {
		return nil, fmt.Errorf("initializer %q: element type %d, want int8 or uint8 (a quantized weight)", q.Name, q.DataType)
	}
	if scale == nil || scale.DataType != Float || len(scale.Float) == 0 {
		return nil, fmt.Errorf("initializer %q: no float32 scale %q beside it", q.Name, scaleName)
	}
	per := 1 // consecutive values sharing an index along axis
	for _, d := range q.Shape[min(axis+1, len(q.Shape)):] {
		per *= d
	}
	n := len(scale.Float)
	switch {
	case n == 1:
	case axis < len(q.Shape) && q.Shape[axis] == n:
	default:
		return nil, fmt.Errorf("initializer %q of shape %v: %d scales in %q, want 1 or %d (along axis %d)", q.Name, q.Shape, n, scale.Name, q.Shape[min(axis, len(q.Shape)-1)], axis)
	}
	if zp != nil && len(zp.Int64) != n {
		return nil, fmt.Errorf("initializer %q: %d zero points in %q for %d scales", q.Name, len(zp.Int64), zp.Name, n)
	}
	f := &Tensor{Name: q.Name, Shape: q.Shape, DataType: Float, Float: make([]float32, len(q.Int64))}
	for i, v := range q.Int64 {
		k := (i / per) % n
		var z int64
		if zp != nil {
			z = zp.Int64[k]
		}
		f.Float[i] = float32(v-z) * scale.Float[k]
	}
	return f, nil
}

// int8Columns is a product's quantized weight q [in, out] as anna's int8
// graphs store it — q less its zero point, a scale per column — or nil
// when a value falls outside ±weightQMax.
func int8Columns(q, scale, zp *Tensor) *Int8Columns {
	in, out := q.Shape[0], q.Shape[1]
	c := &Int8Columns{In: in, Out: out, W: make([]int8, len(q.Int64)), Scale: make([]float32, out)}
	for j := range c.Scale {
		c.Scale[j] = scale.Float[j%len(scale.Float)]
	}
	for i, v := range q.Int64 {
		k := i % out
		if zp != nil {
			v -= zp.Int64[k%len(zp.Int64)]
		}
		if v < -weightQMax || v > weightQMax {
			return nil
		}
		c.W[i] = int8(v)
	}
	return c
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
// when given, every size in it must agree with the weights. From a
// quantized graph, the float32 model has the dequantized weights and the
// int8 one (s.Quantize) the graph's own integer weights where they fit
// anna's (Int8FromONNX), so nothing is quantized twice.
func ImportONNX(ctx context.Context, onnxPath, tokenizerPath string, cfgJSON []byte, dest string, s Settings) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	tensors, int8s, cfg, cfgJSON, err := readBERT(onnxPath, cfgJSON)
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
	if s.Quantize != model.QuantizeInt8 {
		int8s = nil
	}
	return writeDir(ctx, dest, cfg, cfgJSON, tensors, int8s, tokenizerPath, s)
}

// ReadBERT reads the weights of the BERT graph at onnxPath (BERTFromONNX)
// and its config: cfgJSON, the model's config.json, may be nil when the
// graph says everything (heads included), and when given, every size in it
// must agree with the weights. It returns the config.json to write beside
// the weights (cfgJSON, or the one the graph implies).
func ReadBERT(onnxPath string, cfgJSON []byte) (map[string]*safetensors.Tensor, *model.Config, []byte, error) {
	tensors, _, cfg, cfgJSON, err := readBERT(onnxPath, cfgJSON)
	return tensors, cfg, cfgJSON, err
}

// readBERT is ReadBERT with the graph's int8 weights (Int8FromONNX).
func readBERT(onnxPath string, cfgJSON []byte) (map[string]*safetensors.Tensor, map[string]*Int8Columns, *model.Config, []byte, error) {
	rm, err := ReadFile(onnxPath)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("import: %w", err)
	}
	tensors, int8s, got, err := bertFromONNX(rm)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("import: %s: %w", onnxPath, err)
	}
	cfg := got
	if cfgJSON != nil {
		if cfg, err = model.ParseConfig(cfgJSON); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("import: config.json for %s: %w", onnxPath, err)
		}
		if err := agree(cfg, got); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("import: config.json disagrees with the weights of %s: %w", onnxPath, err)
		}
	} else {
		if cfg.NumAttentionHeads == 0 {
			return nil, nil, nil, nil, fmt.Errorf("import: %s: the graph does not say how many attention heads the model has; give its config.json", onnxPath)
		}
		if cfgJSON, err = json.MarshalIndent(cfg, "", "  "); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return tensors, int8s, cfg, cfgJSON, nil
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
