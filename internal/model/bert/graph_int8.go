package bert

import (
	"fmt"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Int8Graph is what ReadGraphInt8 reads from an int8 graph.
type Int8Graph struct {
	// Tensors are the float32 weights, under Hugging Face's names as
	// ReadGraph gives them: the embeddings, the LayerNorms, every product's
	// bias (a layer's query, key and value biases concatenated as
	// encoder.layer.N.attention.self.qkv.bias) and a cross-encoder's head.
	Tensors map[string]*safetensors.Tensor
	// Linears are the layers' int8 products by module name:
	// encoder.layer.N.attention.self.qkv (query, key and value stacked as
	// columns, in×3·hidden), encoder.layer.N.attention.output.dense,
	// encoder.layer.N.intermediate.dense and encoder.layer.N.output.dense.
	Linears map[string]*onnxfile.Int8Columns
	// Act is the MLP's activation in the graph: "gelu_pytorch_tanh"
	// (FastGelu, what int8 graphs of GELU models run), "gelu" (BiasGelu)
	// or "relu".
	Act string
	// QKVPerBatch is set for the int8 graphs converted before issue 64,
	// whose Q/K/V product quantizes its input with one scale and zero
	// point for the whole batch (DynamicQuantizeLinear); today's quantize
	// every product's input per row. The forward follows the graph, so an
	// index built with an older int8 model keeps its vectors.
	QKVPerBatch bool
}

// LoadGraph reads the BERT graph at path (model/onnx's, float32 in either
// form, or int8) and builds its Model under cfg: New on ReadGraph's
// tensors, or NewInt8 on ReadGraphInt8's weights when the graph holds int8
// ones. The file is read once.
func LoadGraph(path string, cfg *model.Config) (*Model, error) {
	rm, err := onnxfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	var m *Model
	if hasInt8(rm) {
		var g *Int8Graph
		if g, err = readGraphInt8(rm, path, cfg); err != nil {
			return nil, err
		}
		m, err = NewInt8(cfg, g)
	} else {
		var ts map[string]*safetensors.Tensor
		if ts, err = readGraph(rm, path, cfg); err != nil {
			return nil, err
		}
		m, err = New(cfg, ts)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func hasInt8(rm *onnxfile.ReadModel) bool {
	for _, t := range rm.Initializers {
		if t.DataType == onnxfile.Int8 {
			return true
		}
	}
	return false
}

// ReadGraphInt8 reads the weights of an int8 BERT graph written by anna's
// converter (model/onnx's BuildWith with Quantize int8: always the fused
// form) from the ONNX file at path. The graph's layout is checked as far
// as the forward depends on it: per layer four QuantizeLinear (every
// product's input quantized per row) — or, in graphs converted before
// issue 64, one DynamicQuantizeLinear (the Q/K/V product's input,
// quantized over the whole batch: Int8Graph.QKVPerBatch) and three
// QuantizeLinear — and every product's int8 weight [in, out] with out
// scales. A float32 graph, or
// one without the tensors cfg implies, is an error naming what is missing.
func ReadGraphInt8(path string, cfg *model.Config) (*Int8Graph, error) {
	rm, err := onnxfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	return readGraphInt8(rm, path, cfg)
}

func readGraphInt8(rm *onnxfile.ReadModel, path string, cfg *model.Config) (*Int8Graph, error) {
	if !hasInt8(rm) {
		return nil, fmt.Errorf("bert: %s has no int8 weights: read it with ReadGraph", path)
	}
	ops := map[string]int{}
	var count func(nodes []onnxfile.Node)
	count = func(nodes []onnxfile.Node) {
		for _, n := range nodes {
			ops[n.OpType]++
			for _, a := range n.Attrs {
				if a.G != nil {
					count(a.G.Nodes)
				}
			}
		}
	}
	count(rm.Nodes)
	L := cfg.NumHiddenLayers
	dq, q, mm := ops["DynamicQuantizeLinear"], ops["QuantizeLinear"], ops["MatMulIntegerToFloat"]
	perRow, perBatch := dq == 0 && q == 4*L, dq == L && q == 3*L
	if mm != 4*L || !perRow && !perBatch {
		return nil, fmt.Errorf("bert: %s is not an int8 BERT graph of anna's converter for its config.json (%d layers): it has %d DynamicQuantizeLinear, %d QuantizeLinear and %d MatMulIntegerToFloat nodes, want 0, %d and %d (or, from before issue 64, %d, %d and %d)",
			path, L, dq, q, mm, 4*L, 4*L, L, 3*L, 4*L)
	}
	g := &Int8Graph{Tensors: map[string]*safetensors.Tensor{}, Linears: map[string]*onnxfile.Int8Columns{}, QKVPerBatch: perBatch}
	switch {
	case ops["FastGelu"] == L:
		g.Act = "gelu_pytorch_tanh"
	case ops["BiasGelu"] == L:
		g.Act = "gelu"
	case ops["Relu"] >= L:
		g.Act = "relu"
	default:
		return nil, fmt.Errorf("bert: %s: no activation per layer (FastGelu, BiasGelu or Relu) in the graph", path)
	}
	init := rm.Initializers
	prefix := ""
	if _, ok := init[strings.ReplaceAll("bert."+arch.WordEmbeddings, ".", "_")]; ok {
		prefix = "bert."
	}
	var missing []string
	// find looks the initializer of tensor name up (as the graph names it:
	// under the checkpoint's prefix, except the layers' fused Q/K/V
	// product, arch.FusedQKV).
	find := func(name string) *onnxfile.Tensor {
		t, ok := init[strings.ReplaceAll(name, ".", "_")]
		if !ok {
			missing = append(missing, strings.ReplaceAll(name, ".", "_"))
		}
		return t
	}
	// floatAt reads the float32 tensor the graph names at and stores it as
	// prefix+name (as New reads it); float is floatAt under the prefix.
	floatAt := func(at, name string, n int) {
		t := find(at)
		if t == nil {
			return
		}
		if t.DataType != onnxfile.Float || len(t.Float) != n {
			missing = append(missing, fmt.Sprintf("%s (element type %d, %d float32 values, want %d)", t.Name, t.DataType, len(t.Float), n))
			return
		}
		g.Tensors[prefix+name] = &safetensors.Tensor{Name: prefix + name, DType: "F32", Shape: append([]int(nil), t.Shape...), Data: t.Float}
	}
	float := func(name string, n int) { floatAt(prefix+name, name, n) }
	// quantAt reads the int8 product the graph names at into Linears[name]
	// (a layer's products by their names without the prefix); quant is
	// quantAt under the prefix.
	quantAt := func(at, name string, in, out int) {
		w, s := find(at+".weight_int8"), find(at+".weight_scale")
		if w == nil || s == nil {
			return
		}
		c, err := onnxfile.Int8ColumnsOf(w, s, in, out)
		if err != nil {
			missing = append(missing, err.Error())
			return
		}
		g.Linears[name] = c
	}
	quant := func(name string, in, out int) { quantAt(prefix+name, name, in, out) }
	C, V := cfg.HiddenSize, cfg.VocabSize
	float(arch.WordEmbeddings, V*C)
	float(arch.PositionEmbeddings, cfg.MaxPositionEmbeddings*C)
	float(arch.TokenTypeEmbeddings, cfg.TypeVocabSize*C)
	float(arch.EmbeddingsNorm+".weight", C)
	float(arch.EmbeddingsNorm+".bias", C)
	layout := arch.EncoderOf(cfg)
	for l := 0; l < L; l++ {
		p := arch.EncoderLayer(l)
		quantAt(arch.FusedQKV(l), p+arch.EncFusedQKV, C, 3*C)
		floatAt(arch.FusedQKV(l)+".bias", p+arch.EncFusedQKV+".bias", 3*C)
		for _, w := range layout.Weights {
			switch {
			case w.Role == arch.EncQuery || w.Role == arch.EncKey || w.Role == arch.EncValue: // fused, above
			case w.Role.IsProjection() && !w.Bias:
				quant(p+w.Module(), w.Shape[1], w.Shape[0])
			default:
				float(p+w.Name, w.Shape[0])
			}
		}
	}
	if cw, ok := init["classifier_weight"]; ok { // a cross-encoder's head, float32
		if pw := find(prefix + "pooler.dense.weight"); pw != nil && pw.DataType == onnxfile.Float && len(pw.Float) == C*C {
			g.Tensors[prefix+"pooler.dense.weight"] = &safetensors.Tensor{Name: prefix + "pooler.dense.weight", DType: "F32", Shape: []int{C, C}, Data: tensor.Transposed(pw.Float, C, C)}
		} else if pw != nil {
			missing = append(missing, pw.Name+" (want float32 ["+fmt.Sprint(C, " ", C)+"])")
		}
		float("pooler.dense.bias", C)
		missing = classifierHead(g.Tensors, cw, init, missing)
	}
	if len(missing) > 0 {
		return nil, notConverted(path, "an int8", missing)
	}
	return g, nil
}
