package llama

import (
	"fmt"
	"maps"
	"strings"

	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/model"
)

// An int8 decoder graph's layer products are onnxfile.Int8Columns
// (model/onnx's quantizeColumns and rowQuantizedMatMul): the graph
// quantizes a product's input per row (token) to uint8 around 128 with
// scale max|row|/127 and computes ((Σ(q−128)·W)·Scale[j])·rowScale.

// Quantized decoder graphs' initializer suffixes (model/onnx's fuse.go
// matmul and llama.go embedInt8).
const (
	int8Suffix   = "_int8"               // an int8 product's [in, out] weight; an int4 graph's int8 token table
	int4Suffix   = "_int4"               // MatMulNBits' packed [out, blocks, 16] bytes
	scaleSuffix  = "_scale"              // the per-column (int8) or per-block (int4, token table) scales
	zeroSuffix   = "_zero_point"         // MatMulNBits' float zero points, one a block
	quantBlock   = 32                    // int4 blocks along in; the int4 graph's token-table blocks along hidden
	quantPerLyr  = 7                     // q, k, v, o, gate, up, down
	embedTokensI = "embed_tokens_weight" // the token table's initializer, without the "model_" prefix
)

// ReadQuantizedGraph reads the weights of a quantized Llama-family graph
// written by anna's converter (model/onnx's BuildWith with Quantize int8
// or int4) from the ONNX file at path, for cfg, and returns them with the
// quantization it found (model.QuantizeInt8 or model.QuantizeInt4); a
// float32 graph is read as ReadGraph reads it (quantization "").
//
// int8: the seven products of each layer stay int8 (GraphWeights.Int8),
// as the graph multiplies them; NewEmbedder runs them as the graph does
// (each product's input quantized per row, the integer sums exact).
// Everything else is float32 in the graph and read as ReadGraph reads it.
//
// int4: each product is MatMulNBits (4-bit blocks of 32 along in, a float
// scale and zero point a block) at accuracy_level 1, which multiplies
// float32 activations by the weights (q − zp)·scale: they are read back
// dequantized so, [out, in], and run as a float32 graph's. The token table,
// stored int8 in blocks of 32 along hidden and gathered as q·scale, is
// dequantized likewise (the same float32 products).
//
// The graph's operators are checked as far as the forward depends on
// them: 7·layers QuantizeLinear and MatMulIntegerToFloat (int8) or
// MatMulNBits with bits 4 and block_size 32 (int4). A graph that is not
// one of these, or lacks a tensor cfg implies, is an error naming what is
// wrong.
func ReadQuantizedGraph(path string, cfg *model.Config) (*GraphWeights, string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, "", fmt.Errorf("llama: config: %w", err)
	}
	if !cfg.IsDecoder() {
		return nil, "", fmt.Errorf("llama: config: model_type %q is not a decoder (want llama, mistral, qwen2 or qwen3)", cfg.ModelType)
	}
	rm, err := onnxfile.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("llama: %w", err)
	}
	ops := map[string]int{}
	var nbits []onnxfile.Node
	for _, n := range rm.Nodes {
		ops[n.OpType]++
		if n.OpType == "MatMulNBits" {
			nbits = append(nbits, n)
		}
	}
	L := cfg.NumHiddenLayers
	quant := ""
	switch {
	case ops["MatMulIntegerToFloat"] == 0 && ops["MatMulNBits"] == 0:
		g, err := readGraph(path, cfg, rm.Initializers, nil)
		return g, "", err
	case ops["MatMulIntegerToFloat"] == quantPerLyr*L && ops["QuantizeLinear"] == quantPerLyr*L && ops["MatMulNBits"] == 0 && ops["DynamicQuantizeLinear"] == 0:
		quant = model.QuantizeInt8
	case ops["MatMulNBits"] == quantPerLyr*L && ops["MatMulIntegerToFloat"] == 0:
		quant = model.QuantizeInt4
		for _, n := range nbits {
			if n.Attrs["bits"].I != 4 || n.Attrs["block_size"].I != quantBlock {
				return nil, "", fmt.Errorf("llama: %s: MatMulNBits node %q has bits %d and block_size %d, want 4 and %d", path, n.Name, n.Attrs["bits"].I, n.Attrs["block_size"].I, quantBlock)
			}
		}
	default:
		return nil, "", fmt.Errorf("llama: %s is not a quantized %s graph of anna's converter for its config.json (%d layers): it has %d MatMulIntegerToFloat, %d QuantizeLinear, %d DynamicQuantizeLinear and %d MatMulNBits nodes, want %d MatMulIntegerToFloat and QuantizeLinear (int8) or %d MatMulNBits (int4)",
			path, cfg.ModelType, L, ops["MatMulIntegerToFloat"], ops["QuantizeLinear"], ops["DynamicQuantizeLinear"], ops["MatMulNBits"], quantPerLyr*L, quantPerLyr*L)
	}
	init := rm.Initializers
	prefix := ""
	if _, ok := init["model_"+embedTokensI]; ok {
		prefix = "model_"
	} else if _, ok := init["model_"+embedTokensI+int8Suffix]; ok {
		prefix = "model_"
	}
	// An int4 graph's int8 token table: dequantized into the float32
	// initializer ReadGraph reads (on a copy of the map).
	if q, ok := init[prefix+embedTokensI+int8Suffix]; ok {
		V, H := cfg.VocabSize, cfg.HiddenSize
		s := init[prefix+embedTokensI+scaleSuffix]
		nb := H / quantBlock
		switch {
		case H%quantBlock != 0 || q.DataType != onnxfile.Int8 || len(q.Int64) != V*H:
			return nil, "", fmt.Errorf("llama: %s: %s (element type %d, %d values) is not int8 [%d %d] in blocks of %d", path, q.Name, q.DataType, len(q.Int64), V, H, quantBlock)
		case s == nil || s.DataType != onnxfile.Float || len(s.Float) != V*nb:
			return nil, "", fmt.Errorf("llama: %s: the token table's scales %s are missing or not %d float32 values", path, prefix+embedTokensI+scaleSuffix, V*nb)
		}
		table := make([]float32, V*H)
		for i, v := range q.Int64 {
			table[i] = float32(int8(v)) * s.Float[i/quantBlock] // Cast then Mul: one float32 product
		}
		init = maps.Clone(init)
		init[prefix+embedTokensI] = &onnxfile.Tensor{Name: prefix + embedTokensI, DataType: onnxfile.Float, Shape: []int{V, H}, Float: table}
	}
	g8 := map[string]*onnxfile.Int8Columns{}
	read := func(full string, in, out int) ([]float32, bool, string) {
		base := strings.ReplaceAll(full, ".", "_") // …_weight
		if quant == model.QuantizeInt8 {
			w, s := init[base+int8Suffix], init[base+scaleSuffix]
			switch {
			case w == nil:
				return nil, false, "" // a float32 product (a technique's)
			case s == nil:
				return nil, false, base + scaleSuffix + " (missing)"
			}
			c, err := onnxfile.Int8ColumnsOf(w, s, in, out)
			if err != nil {
				return nil, false, err.Error()
			}
			g8[strings.TrimSuffix(full, ".weight")] = c
			return nil, true, ""
		}
		p, s, z := init[base+int4Suffix], init[base+scaleSuffix], init[base+zeroSuffix]
		nb := (in + quantBlock - 1) / quantBlock
		switch {
		case p == nil:
			return nil, false, ""
		case p.DataType != onnxfile.Uint8 || len(p.Int64) != out*nb*quantBlock/2:
			return nil, false, fmt.Sprintf("%s (element type %d, %d values, want uint8 [%d %d %d])", p.Name, p.DataType, len(p.Int64), out, nb, quantBlock/2)
		case s == nil || s.DataType != onnxfile.Float || len(s.Float) != out*nb:
			return nil, false, fmt.Sprintf("%s (missing or not %d float32 values)", base+scaleSuffix, out*nb)
		case z == nil || z.DataType != onnxfile.Float || len(z.Float) != out*nb:
			return nil, false, fmt.Sprintf("%s (missing or not %d float32 zero points)", base+zeroSuffix, out*nb)
		}
		return dequantize4(p.Int64, s.Float, z.Float, out, in), true, ""
	}
	g, err := readGraph(path, cfg, init, read)
	if err != nil {
		return nil, "", err
	}
	if quant == model.QuantizeInt8 {
		if len(g8) != quantPerLyr*L {
			return nil, "", fmt.Errorf("llama: %s: %d int8 products read, the graph's %d layers have %d", path, len(g8), L, quantPerLyr*L)
		}
		g.Int8 = g8
	}
	return g, quant, nil
}

// dequantize4 is MatMulNBits' weight, [out, in]: (q − zp)·scale for q the
// 4-bit value (the lower-indexed of two in the low nibble of a byte) of
// block in/32 of row n.
func dequantize4(packed []int64, scales, zps []float32, out, in int) []float32 {
	nb := (in + quantBlock - 1) / quantBlock
	w := make([]float32, out*in)
	for n := 0; n < out; n++ {
		for k := 0; k < in; k++ {
			b, i := n*nb+k/quantBlock, k%quantBlock
			q := uint8(packed[b*quantBlock/2+i/2]) >> (4 * (i % 2)) & 15
			w[n*in+k] = (float32(q) - zps[b]) * scales[b]
		}
	}
	return w
}
