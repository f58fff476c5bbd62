package llama

import (
	"fmt"

	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// head is what an Embedder computes from the decoder's hidden states: the
// last hidden state itself (hiddenHead), or a technique's output —
// AutoRegEmbed's memory-token mean (head_memory.go), Causal2Vec's
// [h_C; h_EOS] (head_causal2vec.go), a reranker's label logits
// (head_label.go), a trainable pooling head (head_pooling.go). newHead
// picks one from config.json and the graph, once; Forward, Dim, Output and
// validate ask the head and never which technique runs. A technique that
// feeds the decoder its own input rows (ids outside the vocabulary) owns
// those ids and supplies their rows.
type head interface {
	// output is the graph output the head computes (model.Output…) and dim
	// the width of its rows (for model.OutputHidden, of each position's).
	output() string
	dim() int
	// owns reports whether id, outside the vocabulary, is one of the
	// head's own input tokens.
	owns(id int64) bool
	// check validates what the head needs of batch b beyond its ids being
	// in the vocabulary or owned: where its own tokens stand, its extra
	// inputs. lens is each sequence's computed length (up to its last real
	// token).
	check(b *EmbedBatch, lens []int) error
	// inputs returns, for batch b, the input row of an owned id at
	// sequence n (nil when the head owns none).
	inputs(b *EmbedBatch, th int) func(n int, id int64) []float32
	// taps reports whether apply reads every layer's output at each
	// sequence's last token (embPass.layerRows).
	taps() bool
	// apply computes the head's output from a finished pass.
	apply(p *embPass, th int) []float32
}

// embPass is what a head reads of one Forward.
type embPass struct {
	b    *EmbedBatch
	H, L int // hidden size, layers
	// lens is each sequence's computed length, offs its first row among
	// the real rows (offs[N] = R), last the position of its last token as
	// the graph finds it (sum(mask) − 1).
	lens, offs, last []int
	// keyBias is each real row's attention key bias: 0, or −∞ for a hole
	// in the mask.
	keyBias []float32
	// xn is the last hidden state (after the final RMSNorm), R×H.
	xn []float32
	// layerRows, when the head taps, is L×N×H: layer l's output (the
	// residual stream) at sequence n's last token, for l < L−1; the head
	// fills the last layer's from xn.
	layerRows []float32
}

// lastRow is the real row of sequence n's last token.
func (p *embPass) lastRow(n int) int { return p.offs[n] + p.last[n] }

// newHead builds the head config.json and the graph's weights call for
// (the graph's order of outputs, model/onnx's BuildLlama), checking the
// technique's tensors' names and lengths; weights are packed (copied).
func newHead(cfg *model.Config, g *GraphWeights) (head, error) {
	var bad []string
	// get returns a technique's tensor, checking its length.
	get := func(name string, n int) []float32 {
		t := g.Tensors[name]
		switch {
		case t == nil:
			bad = append(bad, name+" (missing)")
		case len(t.Data) != n:
			bad = append(bad, fmt.Sprintf("%s (%d values, want %d)", name, len(t.Data), n))
		default:
			return t.Data
		}
		return make([]float32, n)
	}
	H := cfg.HiddenSize
	if g.LabelHead != nil && (g.Labels <= 0 || len(g.LabelHead) != H*g.Labels) {
		return nil, fmt.Errorf("llama: label head of %d values is not hidden %d × %d labels", len(g.LabelHead), H, g.Labels)
	}
	var h head
	switch {
	case cfg.MemoryTokens > 0:
		h = newMemoryHead(cfg, get)
	case cfg.Causal2Vec != nil:
		h = newC2VHead(cfg, get)
	case g.LabelHead != nil:
		h = &labelHead{H: H, w: tensor.PackWeight(g.LabelHead, g.Labels, H, true)}
	case cfg.PoolingHead != nil:
		h = newPoolingHead(cfg, get)
	default:
		h = hiddenHead{H: H}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("llama: the checkpoint lacks what config.json's technique needs: %v", bad)
	}
	return h, nil
}

// plainInputs is the part of head for a head without input tokens of its
// own and without layer taps.
type plainInputs struct{}

func (plainInputs) owns(int64) bool                                    { return false }
func (plainInputs) check(*EmbedBatch, []int) error                     { return nil }
func (plainInputs) inputs(*EmbedBatch, int) func(int, int64) []float32 { return nil }
func (plainInputs) taps() bool                                         { return false }

// hiddenHead is the graph without a head: the last hidden state, N×T×H,
// zero past each sequence's last real token (pooled by the caller).
type hiddenHead struct {
	plainInputs
	H int
}

func (hiddenHead) output() string { return model.OutputHidden }
func (h hiddenHead) dim() int     { return h.H }

func (h hiddenHead) apply(p *embPass, _ int) []float32 {
	N, T, H := p.b.N, p.b.T, h.H
	out := make([]float32, N*T*H)
	for n := range p.lens {
		copy(out[n*T*H:], p.xn[p.offs[n]*H:p.offs[n+1]*H])
	}
	return out
}
