package llama

import (
	"fmt"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// c2vHead is Causal2Vec's (paper 004): the contextual token C =
// GELU(v·W0ᵀ [+ b0])·W2ᵀ [+ b2], made from each sequence's context vector
// v (EmbedBatch.Context), goes where the sequence's id is
// model.ContextPlaceholder; the embedding is [h_C; h_EOS], N×2H.
type c2vHead struct {
	H, dimIn int
	w0, w2   *tensor.Weight
	b0, b2   []float32
}

func newC2VHead(cfg *model.Config, get func(string, int) []float32) *c2vHead {
	cv, H := cfg.Causal2Vec, cfg.HiddenSize
	c := &c2vHead{H: H, dimIn: cv.ContextDim,
		w0: tensor.PackWeight(get("causal2vec.mlp.0.weight", H*cv.ContextDim), H, cv.ContextDim, false),
		w2: tensor.PackWeight(get("causal2vec.mlp.2.weight", H*H), H, H, false)}
	if cv.Bias {
		c.b0, c.b2 = get("causal2vec.mlp.0.bias", H), get("causal2vec.mlp.2.bias", H)
	}
	return c
}

func (*c2vHead) output() string       { return model.OutputEmbedding }
func (h *c2vHead) dim() int           { return 2 * h.H }
func (h *c2vHead) taps() bool         { return false }
func (h *c2vHead) owns(id int64) bool { return id == model.ContextPlaceholder }

func (h *c2vHead) check(b *EmbedBatch, lens []int) error {
	if len(b.Context) != b.N*h.dimIn {
		return fmt.Errorf("llama: a Causal2Vec batch of %d sequences needs %d×%d context values, got %d", b.N, b.N, h.dimIn, len(b.Context))
	}
	for n := range lens {
		if h.placeholder(b, n, lens[n]) < 0 {
			return fmt.Errorf("llama: sequence %d of a Causal2Vec batch has no contextual token's placeholder (id %d)", n, model.ContextPlaceholder)
		}
	}
	return nil
}

// placeholder is the position of sequence n's first placeholder before L,
// or −1.
func (h *c2vHead) placeholder(b *EmbedBatch, n, L int) int {
	for t := 0; t < L; t++ {
		if b.IDs[n*b.T+t] == model.ContextPlaceholder {
			return t
		}
	}
	return -1
}

func (h *c2vHead) inputs(b *EmbedBatch, th int) func(int, int64) []float32 {
	N, H := b.N, h.H
	h1 := make([]float32, N*H)
	h.w0.MatMul(h1, H, b.Context, h.dimIn, N, h.b0, th)
	ops.GELUInPlace(h1)
	contextual := make([]float32, N*H)
	h.w2.MatMul(contextual, H, h1, H, N, h.b2, th)
	return func(n int, _ int64) []float32 { return contextual[n*H : n*H+H] }
}

func (h *c2vHead) apply(p *embPass, _ int) []float32 {
	H := h.H
	out := make([]float32, p.b.N*2*H)
	for n := range p.lens {
		if t := h.placeholder(p.b, n, p.lens[n]); t >= 0 {
			copy(out[n*2*H:n*2*H+H], p.xn[(p.offs[n]+t)*H:(p.offs[n]+t+1)*H])
		}
		r := p.lastRow(n)
		copy(out[n*2*H+H:n*2*H+2*H], p.xn[r*H:r*H+H])
	}
	return out
}
