package onnx

import (
	"fmt"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// BuildOptions choose the form of the graph a builder writes. The zero
// value is anna's default: the fused float32 graph.
type BuildOptions struct {
	// Quantize is "" (float32 weights), model.QuantizeInt8 (the layers'
	// MatMul weights stored as int8 with a scale per output column,
	// activations quantized per call), or for decoders also
	// model.QuantizeInt4 (4-bit blocks of weights, activations float32);
	// see quantize.go.
	Quantize string
	// Unfused writes a BERT encoder with standard ONNX operators only
	// (MatMul, Softmax, LayerNormalization, the erf GELU), the graph anna
	// wrote before its fused one: for benchmarks that measure the fusion,
	// and for runtimes without ONNX Runtime's contrib operators. It cannot
	// be quantized.
	Unfused bool
	// LabelTokens are a decoder reranker's label token ids (task rerank):
	// the graph outputs their language-model logits at the last token.
	LabelTokens []int64
	// Int8 are int8 weights read from a quantized source graph (see
	// ReadQuantizedBERT), by Linear module name under Hugging Face's
	// names (encoder.layer.N.attention.self.query, ...): with Quantize
	// int8, a BERT graph stores them as they are rather than quantizing
	// the float32 weights (their dequantized values) again.
	Int8 map[string]*Int8Columns

	// perTensor quantizes an int8 BERT graph's activations per tensor
	// and keeps the exact GELU: the arithmetic of a dynamically quantized
	// source graph (tensorQuantizedMatMul), for the tests that check an
	// import against it. Never served (a vector would move with its
	// batch).
	perTensor bool
}

// BuildWith builds the graph for cfg's architecture (see BuildBERT and
// BuildLlama) in the form o asks for.
func BuildWith(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string, o BuildOptions) (*Graph, error) {
	if err := model.CheckQuantization(o.Quantize); err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if cfg.IsDecoder() {
		// int8 was refused here while activations took one scale per
		// tensor: SmolLM2's int8 vectors had cosine 0.64 to float32's. Per
		// row (rowQuantizedMatMul) they have 0.987 at 2.2x float32's speed
		// (BenchmarkQuantSciFact/smollm2).
		if o.Unfused {
			return nil, fmt.Errorf("onnx: the unfused form is a BERT encoder option; %s decoders have one graph", cfg.ModelType)
		}
		return buildLlama(cfg, tensors, task, o)
	}
	if o.Quantize == model.QuantizeInt4 {
		return nil, fmt.Errorf("onnx: quantization %s is for decoders; BERT-family encoders are quantized to %s", o.Quantize, model.QuantizeInt8)
	}
	if o.Unfused && o.Quantize != "" {
		return nil, fmt.Errorf("onnx: a quantized graph is always fused (quantization %s with the unfused form)", o.Quantize)
	}
	return buildBERT(cfg, tensors, task, o)
}
