package llama

import (
	"fmt"

	"github.com/anna-search/anna/model"
)

// memoryHead is AutoRegEmbed's (paper 001): k trained memory tokens, ids
// vocab…vocab+k−1 with their own input rows, placed in each sequence by
// the caller; the embedding is the mean of their last hidden states, N×H.
type memoryHead struct {
	H      int
	V, k   int64
	memory []float32 // k×H, MemoryTensor
}

func newMemoryHead(cfg *model.Config, get func(string, int) []float32) *memoryHead {
	k := cfg.MemoryTokens
	return &memoryHead{H: cfg.HiddenSize, V: int64(cfg.VocabSize), k: int64(k), memory: get(MemoryTensor, k*cfg.HiddenSize)}
}

func (*memoryHead) output() string       { return model.OutputEmbedding }
func (h *memoryHead) dim() int           { return h.H }
func (h *memoryHead) taps() bool         { return false }
func (h *memoryHead) owns(id int64) bool { return id >= h.V && id < h.V+h.k }

func (h *memoryHead) check(b *EmbedBatch, lens []int) error {
	for n := range lens {
		for t := lens[n]; t < b.T; t++ {
			if id := b.IDs[n*b.T+t]; h.owns(id) {
				return fmt.Errorf("llama: sequence %d: memory token %d at position %d is in the padding", n, id, t)
			}
		}
	}
	return nil
}

func (h *memoryHead) inputs(*EmbedBatch, int) func(int, int64) []float32 {
	H := int64(h.H)
	return func(_ int, id int64) []float32 { return h.memory[(id-h.V)*H : (id-h.V+1)*H] }
}

func (h *memoryHead) apply(p *embPass, _ int) []float32 {
	b, H := p.b, h.H
	out := make([]float32, b.N*H)
	inv := 1 / float32(h.k)
	for n := range p.lens {
		o := out[n*H : n*H+H]
		for t := 0; t < p.lens[n]; t++ {
			if b.IDs[n*b.T+t] >= h.V {
				r := p.offs[n] + t
				for c, v := range p.xn[r*H : r*H+H] {
					o[c] += v * inv
				}
			}
		}
	}
	return out
}
