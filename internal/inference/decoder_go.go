package inference

import (
	"fmt"

	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/model"
)

// decoderRunner runs a Llama-family decoder's graph weights through
// model/llama's Embedder: the last hidden state for pooling outside the
// graph (last token, mean), a trained pooling head's, AutoRegEmbed's or
// Causal2Vec's embedding, or a decoder reranker's label logits — the
// graph's own output, computed as the graph computes it.
type decoderRunner struct {
	e       *llama.Embedder
	threads int // per op (0: GOMAXPROCS)
}

// decoderSupports says why the Go backend cannot run the decoder of md
// ("" when it can): it runs float32, int8 and int4 graphs of every decoder
// anna converts, with any pooling, technique or reranker head (int8: the
// graph's integer products, model/llama's embed_quant.go; int4: the
// 4-bit weights dequantized as MatMulNBits does).
func decoderSupports(md *model.Dir) string {
	switch q := md.Manifest.Quantization; q {
	case "", model.QuantizeInt8, model.QuantizeInt4:
		return ""
	default:
		// goSupports' message reads "backend go runs … BERT models …, and " + this.
		return fmt.Sprintf("float32, %s and %s decoders, but %s is a %s decoder with %s weights", model.QuantizeInt8, model.QuantizeInt4, md.Path, md.Config.ModelType, q)
	}
}

// newDecoderRunner reads m's decoder graph and checks that it outputs what
// m reads.
func newDecoderRunner(m *Model) (runner, error) {
	g, quant, err := llama.ReadQuantizedGraph(m.dir.ONNXPath, m.dir.Config) // float32, int8 or int4
	if err != nil {
		return nil, err
	}
	if want := m.dir.Manifest.Quantization; quant != want {
		return nil, fmt.Errorf("%s: the graph's weights are quantized %q, the manifest says quantization %q", m.dir.ONNXPath, quant, want)
	}
	e, err := llama.NewEmbedder(m.dir.Config, g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.dir.ONNXPath, err)
	}
	if e.Output() != m.output {
		return nil, fmt.Errorf("%s: the graph's weights give output %s, the manifest (task %s, pooling %q) wants %s", m.dir.ONNXPath, e.Output(), m.dir.Manifest.Task, m.dir.Manifest.Pooling, m.output)
	}
	want := m.dir.Manifest.Dim
	if m.output == model.OutputLogits {
		want = m.dir.Manifest.NumLabels
	}
	if m.output != model.OutputHidden && e.Dim() != want {
		return nil, fmt.Errorf("%s: the graph's %s has %d values a row, the manifest says %d", m.dir.ONNXPath, e.Output(), e.Dim(), want)
	}
	return &decoderRunner{e: e, threads: m.threads.intra}, nil
}

func (r *decoderRunner) close() error { return nil }

func (r *decoderRunner) run(ids, mask, _ []int64, b, seq int, ctxRows []float32) ([]float32, error) {
	return r.e.Forward(&llama.EmbedBatch{N: b, T: seq, IDs: ids, Mask: mask, Context: ctxRows}, r.threads)
}
