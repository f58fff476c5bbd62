package bert

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Load reads the converted model directory dir (config.json, model.onnx)
// into a Model: the weights of its float32 graph (ReadGraph) or int8 graph
// (ReadGraphInt8) under the directory's config (LoadGraph).
func Load(dir string) (*Model, error) {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("bert: %s: %w", dir, err)
	}
	return LoadGraph(filepath.Join(dir, model.ONNXFile), cfg)
}

// ReadGraph reads the weights of a BERT graph written by anna's converter
// (model/onnx's BuildBERT, either form) from the ONNX file at path and
// returns them under Hugging Face's BertModel names: the initializers are
// the tensors' names with "." as "_", linear weights stored as MatMul's
// [in, out] (turned back into nn.Linear's [out, in]) and, in the fused
// form, a layer's query, key and value weights packed into one [H, 3H]
// matrix (arch.FusedQKV, never under the "bert." prefix of a
// BertForSequenceClassification checkpoint) with their biases
// concatenated (split again here). A
// cross-encoder's graph also gives BertForSequenceClassification's head
// (pooler.dense.*, classifier.*). A graph
// with quantized weights (int8, int4) is refused, as is one without the
// tensors cfg implies (each missing name is listed). An int8 graph's
// weights are ReadGraphInt8's.
func ReadGraph(path string, cfg *model.Config) (map[string]*safetensors.Tensor, error) {
	rm, err := onnxfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	return readGraph(rm, path, cfg)
}

func readGraph(rm *onnxfile.ReadModel, path string, cfg *model.Config) (map[string]*safetensors.Tensor, error) {
	init := rm.Initializers
	for _, name := range slices.Sorted(maps.Keys(init)) {
		if t := init[name]; t.DataType == onnxfile.Int8 || t.DataType == onnxfile.Uint8 {
			return nil, fmt.Errorf("bert: %s holds quantized weights (initializer %s is 8-bit), which ReadGraph does not read: use ReadGraphInt8 (or LoadGraph)", path, name)
		}
	}
	prefix := ""
	if _, ok := init[strings.ReplaceAll("bert."+arch.WordEmbeddings, ".", "_")]; ok {
		prefix = "bert."
	}
	out := map[string]*safetensors.Tensor{}
	var missing []string
	// lookup is the initializer of tensor name (as the graph names it: the
	// checkpoint's prefix included where it has one); take is lookup under
	// the prefix.
	lookup := func(name string) *onnxfile.Tensor {
		t, ok := init[strings.ReplaceAll(name, ".", "_")]
		if !ok {
			missing = append(missing, strings.ReplaceAll(name, ".", "_")+" ("+name+")")
			return nil
		}
		if t.DataType != onnxfile.Float {
			missing = append(missing, fmt.Sprintf("%s (element type %d, not float32: a quantized graph, which the Go backend does not run)", t.Name, t.DataType))
			return nil
		}
		return t
	}
	take := func(name string) *onnxfile.Tensor { return lookup(prefix + name) }
	put := func(name string, shape []int, data []float32) {
		out[prefix+name] = &safetensors.Tensor{Name: prefix + name, DType: "F32", Shape: shape, Data: data}
	}
	// same copies a tensor stored as it is.
	same := func(name string) {
		if t := take(name); t != nil {
			put(name, append([]int(nil), t.Shape...), t.Float)
		}
	}
	// linear takes a MatMul weight [in, out] back to [out, in], and its bias.
	linear := func(name string) {
		if t := take(name + ".weight"); t != nil {
			if len(t.Shape) != 2 || len(t.Float) != t.Shape[0]*t.Shape[1] {
				missing = append(missing, fmt.Sprintf("%s (shape %v, want a matrix)", t.Name, t.Shape))
			} else {
				put(name+".weight", []int{t.Shape[1], t.Shape[0]}, tensor.Transposed(t.Float, t.Shape[0], t.Shape[1]))
			}
		}
		same(name + ".bias")
	}
	for _, n := range []string{arch.WordEmbeddings, arch.PositionEmbeddings, arch.TokenTypeEmbeddings, arch.EmbeddingsNorm + ".weight", arch.EmbeddingsNorm + ".bias"} {
		same(n)
	}
	H := cfg.HiddenSize
	layout := arch.EncoderOf(cfg)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := arch.EncoderLayer(l)
		qkv := []arch.Role{arch.EncQuery, arch.EncKey, arch.EncValue}
		if qkvName := arch.FusedQKV(l); init[strings.ReplaceAll(qkvName+".weight", ".", "_")] != nil { // fused, outside the prefix
			w, b := lookup(qkvName+".weight"), lookup(qkvName+".bias")
			if w != nil && b != nil {
				if len(w.Float) != H*3*H || len(b.Float) != 3*H {
					missing = append(missing, fmt.Sprintf("%s (shape %v, want [%d %d]) or its bias (%d values)", w.Name, w.Shape, H, 3*H, len(b.Float)))
				} else {
					for k, r := range qkv {
						m := make([]float32, H*H) // [out, in]
						for i := 0; i < H; i++ {
							for o := 0; o < H; o++ {
								m[o*H+i] = w.Float[i*3*H+k*H+o]
							}
						}
						put(p+r.Module()+".weight", []int{H, H}, m)
						put(p+r.Module()+".bias", []int{H}, b.Float[k*H:(k+1)*H])
					}
				}
			}
		} else {
			for _, r := range qkv {
				linear(p + r.Module())
			}
		}
		for _, w := range layout.Weights {
			switch {
			case slices.Contains(qkv, w.Role): // above
			case w.Role.IsProjection() && !w.Bias:
				linear(p + w.Module()) // its bias too
			case w.Role.IsProjection(): // a projection's bias: linear's
			default:
				same(p + w.Name) // a LayerNorm's weight and bias
			}
		}
	}
	if cw, ok := init["classifier_weight"]; ok { // a cross-encoder: BertForSequenceClassification's head
		linear("pooler.dense")
		missing = classifierHead(out, cw, init, missing)
	}
	if len(missing) > 0 {
		return nil, notConverted(path, "a float32", missing)
	}
	return out, nil
}

// classifierHead adds a cross-encoder's float32 classifier
// (BertForSequenceClassification's head: the graph's classifier_weight cw,
// transposed to classifier.weight, and init's classifier_bias) to out, and
// returns missing with what of it is missing or unusable appended.
func classifierHead(out map[string]*safetensors.Tensor, cw *onnxfile.Tensor, init map[string]*onnxfile.Tensor, missing []string) []string {
	if cw.DataType == onnxfile.Float && len(cw.Shape) == 2 && len(cw.Float) == cw.Shape[0]*cw.Shape[1] {
		out["classifier.weight"] = &safetensors.Tensor{Name: "classifier.weight", DType: "F32", Shape: []int{cw.Shape[1], cw.Shape[0]}, Data: tensor.Transposed(cw.Float, cw.Shape[0], cw.Shape[1])}
	} else {
		missing = append(missing, fmt.Sprintf("classifier_weight (shape %v, want a float32 matrix)", cw.Shape))
	}
	if cb, ok := init["classifier_bias"]; ok && cb.DataType == onnxfile.Float {
		out["classifier.bias"] = &safetensors.Tensor{Name: "classifier.bias", DType: "F32", Shape: append([]int(nil), cb.Shape...), Data: cb.Float}
	} else {
		missing = append(missing, "classifier_bias (classifier.bias)")
	}
	return missing
}

// notConverted is the error of a graph at path that is not what (a float32
// or an int8 BERT graph) of anna's converter: it names the first 8 of the
// initializers missing or unusable and counts the rest.
func notConverted(path, what string, missing []string) error {
	list, more := missing, ""
	if len(list) > 8 {
		list, more = list[:8], fmt.Sprintf(" (and %d more)", len(missing)-8)
	}
	return fmt.Errorf("bert: %s is not %s BERT graph of anna's converter for its config.json: %d initializer(s) missing or unusable: %s%s", path, what, len(missing), strings.Join(list, ", "), more)
}
