package llama

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Initializers of a decoder graph that are not a checkpoint's tensors
// (model/onnx's BuildLlama writes them).
const (
	graphRopeCos   = "rope_cos"   // [max_position_embeddings, head_dim]
	graphRopeSin   = "rope_sin"   // likewise
	graphLabelHead = "label_head" // a reranker's [hidden, labels]: the LM head's columns of the label tokens
)

// GraphWeights are the weights of a decoder's model.onnx, read back by
// ReadGraph.
type GraphWeights struct {
	// Tensors are named as transformers' LlamaModel / Qwen2Model state
	// dict (with the "model." prefix when the graph's names carry it),
	// Linear weights as nn.Linear's [out, in], plus a technique's own
	// tensors under the trainer's names: a pooling head's "pooling.…", a
	// Causal2Vec MLP's "causal2vec.mlp.…", AutoRegEmbed's
	// "autoregembed.memory".
	Tensors map[string]*safetensors.Tensor
	// RopeCos and RopeSin are the graph's rotary tables, [positions,
	// head_dim] (each row its head_dim/2 frequencies twice over), used as
	// they are so that the positions' angles are the graph's bit for bit.
	RopeCos, RopeSin []float32
	// LabelHead is a decoder reranker's label head, [hidden, labels]
	// (MatMul's layout: column j the language-model head's row of label
	// token j), nil for an embedder; Labels is its width.
	LabelHead []float32
	Labels    int
	// Int8 are an int8 graph's layer products by module name
	// ("model.layers.N.self_attn.q_proj"; ReadQuantizedGraph), nil for
	// any other graph: their Tensors entries have the [out, in] shape but
	// no data.
	Int8 map[string]*onnxfile.Int8Columns
}

// ReadGraph reads the weights of a float32 Llama-family graph written by
// anna's converter (model/onnx's BuildLlama) from the ONNX file at path,
// for cfg (its config.json): the initializers are the checkpoint's names
// with "." as "_", and Linear weights are stored as MatMul's [in, out]
// (turned back into [out, in] here). A graph with quantized weights (int8,
// int4: 8-bit initializers) is refused, naming one, as is a graph without
// a tensor cfg implies (each missing name is listed).
func ReadGraph(path string, cfg *model.Config) (*GraphWeights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: config: %w", err)
	}
	if !cfg.IsDecoder() {
		return nil, fmt.Errorf("llama: config: model_type %q is not a decoder (want llama, mistral, qwen2 or qwen3)", cfg.ModelType)
	}
	rm, err := onnxfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	init := rm.Initializers
	for _, name := range slices.Sorted(maps.Keys(init)) {
		if t := init[name]; t.DataType == onnxfile.Int8 || t.DataType == onnxfile.Uint8 {
			return nil, fmt.Errorf("llama: %s holds quantized weights (initializer %s is 8-bit), which the Go forward does not run: use the float32 model", path, name)
		}
	}
	return readGraph(path, cfg, init, nil)
}

// readGraph is ReadGraph on the initializers init of the graph at path;
// quant, when not nil, reads a layer's Linear weight that the graph
// stores quantized (graph_quant.go): it returns ok false for one stored as
// float32, else the [out, in] weight to keep (nil for an int8 one kept
// aside) or a problem to report.
func readGraph(path string, cfg *model.Config, init map[string]*onnxfile.Tensor, quant func(full string, in, out int) (w []float32, ok bool, problem string)) (*GraphWeights, error) {
	prefix := ""
	if _, ok := init["model_embed_tokens_weight"]; ok {
		prefix = "model."
	}
	out := map[string]*safetensors.Tensor{}
	var missing []string
	// take finds the initializer of checkpoint name full with the shape
	// the graph stores it in.
	take := func(full string, shape ...int) *onnxfile.Tensor {
		iname := strings.ReplaceAll(full, ".", "_")
		t, ok := init[iname]
		n := 1
		for _, d := range shape {
			n *= d
		}
		switch {
		case !ok:
			missing = append(missing, iname+" ("+full+")")
		case t.DataType != onnxfile.Float:
			missing = append(missing, fmt.Sprintf("%s (element type %d, not float32)", iname, t.DataType))
		case !slices.Equal(t.Shape, shape) || len(t.Float) != n:
			missing = append(missing, fmt.Sprintf("%s (shape %v with %d values, want %v)", iname, t.Shape, len(t.Float), shape))
		default:
			return t
		}
		return nil
	}
	put := func(full string, shape []int, data []float32) {
		out[full] = &safetensors.Tensor{Name: full, DType: "F32", Shape: shape, Data: data}
	}
	// same copies a tensor stored as it is (no copy of the data).
	same := func(full string, shape ...int) {
		if t := take(full, shape...); t != nil {
			put(full, shape, t.Float)
		}
	}
	// linear takes a MatMul weight [in, out] back to nn.Linear's [out, in].
	linear := func(full string, in, outDim int) {
		if quant != nil {
			if w, ok, problem := quant(full, in, outDim); problem != "" {
				missing = append(missing, problem)
				return
			} else if ok {
				put(full, []int{outDim, in}, w)
				return
			}
		}
		if t := take(full, in, outDim); t != nil {
			put(full, []int{outDim, in}, tensor.Transposed(t.Float, in, outDim))
		}
	}
	H, V, L := cfg.HiddenSize, cfg.VocabSize, cfg.NumHiddenLayers
	hd := cfg.HeadDim()
	same(prefix+arch.EmbedTokens, V, H)
	layout := arch.DecoderOf(cfg)
	for l := 0; l < L; l++ {
		for _, w := range layout.Weights {
			if full := arch.Layer(prefix, l) + w.Name; w.Role.IsProjection() && !w.Bias {
				linear(full, w.Shape[1], w.Shape[0])
			} else {
				same(full, w.Shape...)
			}
		}
	}
	same(prefix+arch.FinalNorm, H)
	if k := cfg.MemoryTokens; k > 0 {
		same(MemoryTensor, k, H)
	}
	if cv := cfg.Causal2Vec; cv != nil {
		linear("causal2vec.mlp.0.weight", cv.ContextDim, H)
		linear("causal2vec.mlp.2.weight", H, H)
		if cv.Bias {
			same("causal2vec.mlp.0.bias", H)
			same("causal2vec.mlp.2.bias", H)
		}
	}
	if hc := cfg.PoolingHead; hc != nil {
		same("pooling.latents", hc.Latents, H)
		if hc.Mode == model.PoolingMultiLayer {
			same("pooling.layer_weights", L, H)
		}
		for _, n := range []string{"k_proj", "v_proj", "o_proj", "mlp.fc1", "mlp.fc2"} {
			linear("pooling."+n+".weight", H, H)
		}
		same("pooling.mlp.fc1.bias", H)
		same("pooling.mlp.fc2.bias", H)
	}
	g := &GraphWeights{Tensors: out}
	P := cfg.MaxPositionEmbeddings
	if c := take(graphRopeCos, P, hd); c != nil {
		g.RopeCos = c.Float
	}
	if s := take(graphRopeSin, P, hd); s != nil {
		g.RopeSin = s.Float
	}
	if lh, ok := init[graphLabelHead]; ok { // a decoder reranker
		if lh.DataType != onnxfile.Float || len(lh.Shape) != 2 || lh.Shape[0] != H || lh.Shape[1] <= 0 || len(lh.Float) != H*lh.Shape[1] {
			missing = append(missing, fmt.Sprintf("%s (shape %v, want a float32 [%d, labels] matrix)", graphLabelHead, lh.Shape, H))
		} else {
			g.LabelHead, g.Labels = lh.Float, lh.Shape[1]
		}
	}
	if len(missing) > 0 {
		list, more := missing, ""
		if len(list) > 8 {
			list, more = list[:8], fmt.Sprintf(" (and %d more)", len(missing)-8)
		}
		return nil, fmt.Errorf("llama: %s is not a float32 %s graph of anna's converter for its config.json: %d initializer(s) missing or unusable: %s%s", path, cfg.ModelType, len(missing), strings.Join(list, ", "), more)
	}
	return g, nil
}

// MemoryTensor is an AutoRegEmbed checkpoint's memory-token embeddings
// (model/onnx's MemoryTensor), k×hidden.
const MemoryTensor = "autoregembed.memory"
