package onnx

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// Graph input and output names of exported models: the runtime's, from
// package model (which the runtime reads them from without linking this
// converter).
const (
	InputIDs     = model.InputIDs
	InputMask    = model.InputMask
	InputTypeIDs = model.InputTypeIDs
	OutputHidden = model.OutputHidden // task embed: [batch, seq, hidden]
	OutputLogits = model.OutputLogits // task rerank: [batch, num_labels]
)

const maskedAttention = -10000.0 // added to scores of padding keys, as BERT's original code; exp underflows to 0 in fp32

// BuildBERT builds the ONNX graph of a BERT encoder from Hugging Face
// tensors (names as in BertModel, with or without the "bert." prefix of the
// task models). task model.TaskEmbed outputs last_hidden_state; task
// model.TaskRerank adds BertForSequenceClassification's head (pooler
// dense+tanh on [CLS], then classifier) and outputs logits. The tensors may
// come from a file or from the trainer's memory; they are not modified.
//
// The graph is the fused one (see fuse.go); BuildWith writes the other
// forms.
func BuildBERT(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string) (*Graph, error) {
	return buildBERT(cfg, tensors, task, BuildOptions{})
}

func buildBERT(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string, o BuildOptions) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("onnx: config: %w", err)
	}
	if task != model.TaskEmbed && task != model.TaskRerank {
		return nil, fmt.Errorf("onnx: task %q not supported (want %s or %s)", task, model.TaskEmbed, model.TaskRerank)
	}
	w := &weights{t: tensors, cfg: cfg, int8: o.Int8, perTensor: o.perTensor}
	for _, p := range []string{"bert.", "roberta."} {
		if _, ok := tensors[p+arch.WordEmbeddings]; ok {
			w.prefix = p
		}
	}
	roberta := cfg.IsRoBERTa()
	H, V, P, T := cfg.HiddenSize, cfg.VocabSize, cfg.MaxPositionEmbeddings, cfg.TypeVocabSize
	eps := AttrFloat("epsilon", float32(cfg.LayerNormEps))

	g := NewGraph(cfg.ModelType)
	g.Metadata("anna.task", task)
	g.Metadata("anna.hidden_size", fmt.Sprint(H))
	if o.Quantize != "" {
		g.Metadata("anna.quantization", o.Quantize)
	}
	batch, seq := Dim{Param: "batch"}, Dim{Param: "sequence"}
	ids := g.Input(InputIDs, Int64, batch, seq)
	mask := g.Input(InputMask, Int64, batch, seq)
	types := g.Input(InputTypeIDs, Int64, batch, seq)

	// Embeddings: word + position (arange(seq)) + token type, then LayerNorm.
	word := w.tensor(g, arch.WordEmbeddings, false, V, H)
	pos := w.tensor(g, arch.PositionEmbeddings, false, P, H)
	typ := w.tensor(g, arch.TokenTypeEmbeddings, false, T, H)
	one64 := g.Int64s("", nil, []int64{1})
	seqLen := g.Op("Gather", []string{g.Op("Shape", []string{ids}), one64})
	posIDs := g.Op("Range", []string{g.Int64s("", nil, []int64{0}), seqLen, one64})
	if roberta {
		// RoBERTa and XLM-R number real tokens from pad+1 and give padding
		// the pad position (transformers' create_position_ids_from_input_ids).
		padID := g.Int64s("", nil, []int64{int64(cfg.PadTokenID)})
		real := g.Op("Cast", []string{g.Op("Not", []string{g.Op("Equal", []string{ids, padID})})}, AttrInt("to", Int64))
		inc := g.Op("Mul", []string{g.Op("CumSum", []string{real, one64}), real})
		posIDs = g.Op("Add", []string{inc, padID})
	}
	x := g.Op("Add", []string{g.Op("Gather", []string{word, ids}), g.Op("Gather", []string{pos, posIDs})})
	x = g.Op("Add", []string{x, g.Op("Gather", []string{typ, types})})
	x = w.layerNorm(g, x, arch.EmbeddingsNorm, eps)

	if o.Unfused {
		x = w.unfusedLayers(g, x, mask, eps)
	} else {
		am := newAttentionMask(g, mask)
		for l := 0; l < cfg.NumHiddenLayers; l++ {
			x = w.fusedLayer(g, x, l, am, eps, o.Quantize)
		}
	}

	if task == model.TaskEmbed {
		g.OpNamed("Identity", OutputHidden, []string{x})
		g.Output(OutputHidden, Float, batch, seq, Dim{Value: int64(H)})
	} else {
		L := cfg.NumLabels()
		cls := g.Op("Gather", []string{x, g.Int64s("", nil, []int64{0})}, AttrInt("axis", 1)) // [b, H]
		if roberta {
			// RobertaClassificationHead: dense + tanh, then out_proj.
			h := g.Op("Tanh", []string{w.linearAbs(g, cls, "classifier.dense", H, H)})
			g.OpNamed("Identity", OutputLogits, []string{w.linearAbs(g, h, "classifier.out_proj", H, L)})
			g.Output(OutputLogits, Float, batch, Dim{Value: int64(L)})
			if err := w.err(); err != nil {
				return nil, err
			}
			return g, nil
		}
		pooled := g.Op("Tanh", []string{w.linear(g, cls, "pooler.dense", H, H)})
		// The classifier sits outside the "bert." prefix in
		// BertForSequenceClassification.
		cw := w.tensorAbs(g, "classifier.weight", true, L, H)
		cb := w.tensorAbs(g, "classifier.bias", false, L)
		g.OpNamed("Add", OutputLogits, []string{g.Op("MatMul", []string{pooled, cw}), cb})
		g.Output(OutputLogits, Float, batch, Dim{Value: int64(L)})
	}
	if err := w.err(); err != nil {
		return nil, err
	}
	return g, nil
}

// ExportBERT builds the graph (see BuildBERT) and writes it as an ONNX
// model to out.
func ExportBERT(out io.Writer, cfg *model.Config, tensors map[string]*safetensors.Tensor, task string) error {
	g, err := BuildBERT(cfg, tensors, task)
	if err != nil {
		return err
	}
	_, err = g.WriteTo(out)
	return err
}

// ExportBERTBytes is ExportBERT into memory.
func ExportBERTBytes(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string) ([]byte, error) {
	var b bytes.Buffer
	if err := ExportBERT(&b, cfg, tensors, task); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// unfusedLayers appends the encoder layers in standard ONNX operators
// (BuildOptions.Unfused) and returns the last one's output.
func (w *weights) unfusedLayers(g *Graph, x, mask string, eps Attr) string {
	cfg := w.cfg
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	nh, hd := cfg.NumAttentionHeads, cfg.HeadDim()
	// Additive mask [batch, 1, 1, seq]: 0 for tokens, -10000 for padding.
	m := g.Op("Cast", []string{g.Op("Unsqueeze", []string{mask, g.Int64s("", []int64{2}, []int64{1, 2})})}, AttrInt("to", Float))
	ext := g.Op("Mul", []string{g.Op("Sub", []string{g.Scalar(1), m}), g.Scalar(maskedAttention)})

	headShape := g.Int64s("", []int64{4}, []int64{0, 0, int64(nh), int64(hd)})
	hiddenShape := g.Int64s("", []int64{3}, []int64{0, 0, int64(H)})
	scale := g.Scalar(float32(math.Sqrt(float64(hd))))
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := arch.EncoderLayer(l)
		heads := func(r arch.Role, perm ...int64) string {
			y := w.linear(g, x, p+r.Module(), H, H)
			return g.Op("Transpose", []string{g.Op("Reshape", []string{y, headShape})}, AttrInts("perm", perm...))
		}
		q := heads(arch.EncQuery, 0, 2, 1, 3) // [b, nh, s, hd]
		k := heads(arch.EncKey, 0, 2, 3, 1)   // [b, nh, hd, s]
		v := heads(arch.EncValue, 0, 2, 1, 3) // [b, nh, s, hd]
		s := g.Op("Div", []string{g.Op("MatMul", []string{q, k}), scale})
		s = g.Op("Add", []string{s, ext})
		probs := g.Op("Softmax", []string{s}, AttrInt("axis", -1))
		c := g.Op("MatMul", []string{probs, v})
		c = g.Op("Transpose", []string{c}, AttrInts("perm", 0, 2, 1, 3))
		c = g.Op("Reshape", []string{c, hiddenShape})
		a := w.linear(g, c, p+arch.EncAttnOut.Module(), H, H)
		x = w.layerNorm(g, g.Op("Add", []string{a, x}), p+arch.EncAttnNorm.Module(), eps)
		f := w.linear(g, x, p+arch.EncInter.Module(), H, I)
		f = activation(g, f, cfg.HiddenAct)
		f = w.linear(g, f, p+arch.EncOut.Module(), I, H)
		x = w.layerNorm(g, g.Op("Add", []string{f, x}), p+arch.EncOutNorm.Module(), eps)
	}
	return x
}

func activation(g *Graph, x, act string) string {
	switch act {
	case "relu":
		return g.Op("Relu", []string{x})
	case "gelu_new", "gelu_pytorch_tanh":
		// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		x3 := g.Op("Mul", []string{g.Op("Mul", []string{x, x}), x})
		in := g.Op("Add", []string{x, g.Op("Mul", []string{x3, g.Scalar(0.044715)})})
		t := g.Op("Tanh", []string{g.Op("Mul", []string{in, g.Scalar(float32(math.Sqrt(2 / math.Pi)))})})
		return g.Op("Mul", []string{g.Op("Mul", []string{x, g.Op("Add", []string{t, g.Scalar(1)})}), g.Scalar(0.5)})
	default: // exact GELU, written in the pattern ONNX Runtime fuses into one Gelu op
		e := g.Op("Erf", []string{g.Op("Div", []string{x, g.Scalar(float32(math.Sqrt2))})})
		return g.Op("Mul", []string{g.Op("Mul", []string{x, g.Op("Add", []string{e, g.Scalar(1)})}), g.Scalar(0.5)})
	}
}

// weights looks tensors up by Hugging Face name, checks their shapes and
// collects every missing name so the error lists them all at once.
type weights struct {
	t       map[string]*safetensors.Tensor
	cfg     *model.Config
	prefix  string
	missing []string
	bad     error
	// int8 and perTensor are BuildOptions' Int8 and perTensor (an int8
	// graph's source weights and activation scheme).
	int8      map[string]*Int8Columns
	perTensor bool
}

func (w *weights) err() error {
	if w.bad != nil {
		return w.bad
	}
	if len(w.missing) > 0 {
		sort.Strings(w.missing)
		list := w.missing
		more := ""
		if len(list) > 8 {
			more = fmt.Sprintf(" (and %d more)", len(list)-8)
			list = list[:8]
		}
		return fmt.Errorf("onnx: checkpoint lacks %d tensor(s): %s%s", len(w.missing), strings.Join(list, ", "), more)
	}
	return nil
}

// tensor adds the model tensor name (under the detected prefix) as an
// initializer; transpose turns a Linear weight [out, in] into MatMul's
// [in, out].
func (w *weights) tensor(g *Graph, name string, transpose bool, shape ...int) string {
	return w.tensorAbs(g, w.prefix+name, transpose, shape...)
}

func (w *weights) tensorAbs(g *Graph, name string, transpose bool, shape ...int) string {
	data, dims := w.data(name, transpose, shape...)
	if data == nil {
		return ""
	}
	return g.Floats(sanitize(name), dims, data)
}

// data checks and returns tensor name (a Linear weight transposed to
// MatMul's [in, out] when transpose is set) and its dims, or nil after
// recording what is wrong; it is also nil once anything is wrong, as the
// export fails anyway and need not spend memory.
func (w *weights) data(name string, transpose bool, shape ...int) ([]float32, []int64) {
	t, ok := w.t[name]
	if !ok {
		w.missing = append(w.missing, name)
		return nil, nil
	}
	if !slices.Equal(t.Shape, shape) {
		if w.bad == nil {
			w.bad = fmt.Errorf("onnx: tensor %q has shape %v but config.json implies %v%s",
				name, t.Shape, shape, w.whichDim(t.Shape, shape))
		}
		return nil, nil
	}
	if len(t.Data) != t.Len() {
		if w.bad == nil {
			w.bad = fmt.Errorf("onnx: tensor %q: shape %v holds %d values but data has %d", name, t.Shape, t.Len(), len(t.Data))
		}
		return nil, nil
	}
	if w.bad != nil || len(w.missing) > 0 {
		return nil, nil
	}
	data := t.Data
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	if transpose {
		data = tensor.Transposed(data, shape[0], shape[1])
		dims[0], dims[1] = dims[1], dims[0]
	}
	return data, dims
}

// whichDim names the first disagreeing dimension, e.g. ": its hidden size
// is 256, config.json hidden_size is 384".
func (w *weights) whichDim(got, want []int) string {
	if len(got) != len(want) {
		return fmt.Sprintf(": rank %d, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] == want[i] {
			continue
		}
		field := "size"
		switch want[i] {
		case w.cfg.HiddenSize:
			field = "hidden_size"
		case w.cfg.IntermediateSize:
			field = "intermediate_size"
		case w.cfg.VocabSize:
			field = "vocab_size"
		case w.cfg.MaxPositionEmbeddings:
			field = "max_position_embeddings"
		case w.cfg.TypeVocabSize:
			field = "type_vocab_size"
		}
		return fmt.Sprintf(": dimension %d is %d in the checkpoint, config.json %s is %d", i, got[i], field, want[i])
	}
	return ""
}

// linear is x·Wᵀ + b for the Hugging Face Linear module prefix name.
func (w *weights) linear(g *Graph, x, name string, in, out int) string {
	wt := w.tensor(g, name+".weight", true, out, in)
	b := w.tensor(g, name+".bias", false, out)
	if wt == "" || b == "" {
		return x // keep building so every missing tensor gets reported
	}
	return g.Op("Add", []string{g.Op("MatMul", []string{x, wt}), b})
}

// linearAbs is linear for a module outside the model prefix (a task head).
func (w *weights) linearAbs(g *Graph, x, name string, in, out int) string {
	wt := w.tensorAbs(g, name+".weight", true, out, in)
	b := w.tensorAbs(g, name+".bias", false, out)
	if wt == "" || b == "" {
		return x
	}
	return g.Op("Add", []string{g.Op("MatMul", []string{x, wt}), b})
}

func (w *weights) layerNorm(g *Graph, x, name string, eps Attr) string {
	gamma := w.tensor(g, name+".weight", false, w.cfg.HiddenSize)
	beta := w.tensor(g, name+".bias", false, w.cfg.HiddenSize)
	if gamma == "" || beta == "" {
		return x
	}
	return g.Op("LayerNormalization", []string{x, gamma, beta}, AttrInt("axis", -1), eps)
}

func sanitize(name string) string { return strings.ReplaceAll(name, ".", "_") }
