package inference

import (
	"fmt"

	gobert "github.com/anna-search/anna/internal/model/bert"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/model"
)

// goRunner runs the graph's weights through model/bert's forward (and,
// for task rerank, its classification head).
type goRunner struct {
	m       *gobert.Model
	logits  bool
	threads int // per op (0: GOMAXPROCS)
}

// goSupports says why the Go backend cannot run the model in md (for a
// graph of output output, with or without a Causal2Vec context), or nil:
// it runs BERT graphs, float32 and int8 (model/bert's int8 forward, with
// the int8 graph's arithmetic), embedding models whose pooling is outside
// the graph and cross-encoders (BertForSequenceClassification's head), and
// Llama-family decoders, float32, int8 and int4 (decoderSupports).
func goSupports(md *model.Dir, output string, context bool) error {
	man, cfg := md.Manifest, md.Config
	why := ""
	switch {
	case cfg.IsDecoder(): // any pooling, technique or reranker head (decoder_go.go)
		why = decoderSupports(md)
	case cfg.ModelType != "bert":
		why = fmt.Sprintf("its model_type is %q", cfg.ModelType)
	case context:
		why = "it is a Causal2Vec graph"
	case man.Task == model.TaskRerank && output == model.OutputLogits:
	case output != model.OutputHidden:
		why = fmt.Sprintf("it pools in its graph (pooling %q)", man.Pooling)
	}
	if why == "" && man.Quantization != "" && !cfg.IsDecoder() && !(cfg.ModelType == "bert" && man.Quantization == model.QuantizeInt8) {
		why = fmt.Sprintf("its weights are quantized (%s), which it runs for BERT in %s only", man.Quantization, model.QuantizeInt8)
	}
	if why == "" {
		return nil
	}
	if !ort.Built {
		return fmt.Errorf("backend %s runs float32 and int8 BERT models only (embedding models pooling outside the graph, cross-encoders), and %s; it needs backend %s, but %w", BackendGo, why, BackendORT, ort.ErrNotBuilt)
	}
	return fmt.Errorf("backend %s runs float32 and int8 BERT models only (embedding models pooling outside the graph, cross-encoders), and %s; use backend %s", BackendGo, why, BackendORT)
}

// newGoRunner reads m's graph weights.
func newGoRunner(m *Model) (runner, error) {
	if m.dir.Config.IsDecoder() {
		return newDecoderRunner(m)
	}
	gm, err := gobert.LoadGraph(m.dir.ONNXPath, m.dir.Config) // float32 or int8
	if err != nil {
		return nil, err
	}
	r := &goRunner{m: gm, threads: m.threads.intra, logits: m.output == model.OutputLogits}
	if r.logits && gm.NumLabels() != m.dir.Manifest.NumLabels {
		return nil, fmt.Errorf("%s: the graph's classifier has %d outputs, the manifest says num_labels %d", m.dir.ONNXPath, gm.NumLabels(), m.dir.Manifest.NumLabels)
	}
	return r, nil
}

func (r *goRunner) close() error { return nil }

func (r *goRunner) run(ids, mask, types []int64, b, seq int, _ []float32) ([]float32, error) {
	h, err := r.m.Forward(&gobert.Batch{N: b, T: seq, IDs: ids, Types: types, Mask: mask}, r.threads)
	if err != nil || !r.logits {
		return h, err
	}
	return r.m.Classify(h, b, seq, r.threads)
}
