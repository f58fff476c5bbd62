package llama

import (
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// labelHead is a decoder reranker's: the label tokens' logits at each
// sequence's last token, N×labels.
type labelHead struct {
	plainInputs
	H int
	w *tensor.Weight // labels×H
}

func (*labelHead) output() string { return model.OutputLogits }
func (h *labelHead) dim() int     { return h.w.N }

func (h *labelHead) apply(p *embPass, th int) []float32 {
	N, H := p.b.N, h.H
	rows := make([]float32, N*H)
	for n := range p.lens {
		r := p.lastRow(n)
		copy(rows[n*H:n*H+H], p.xn[r*H:r*H+H])
	}
	out := make([]float32, N*h.w.N)
	h.w.MatMul(out, h.w.N, rows, H, N, nil, th)
	return out
}
