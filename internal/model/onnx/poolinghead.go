package onnx

import (
	"math"

	"github.com/anna-search/anna/model"
)

// OutputEmbedding is the output of a decoder graph that applies a trainable
// pooling head (config.json's anna_pooling_head): the pooled, not yet
// normalised embedding [batch, hidden] (model.OutputEmbedding).
const OutputEmbedding = model.OutputEmbedding

// poolingHead appends the trainable pooling head of cfg.PoolingHead (the
// trainer's internal/train/decoder head, tensors "pooling.…") and returns its output
// [batch, H]. last is the final hidden state after the norm [b, s, H];
// layers[l] is layer l's output (the last one being last); padKeys
// [b, 1, 1, s] is maskedScore at padded keys and 0 elsewhere; mask is the
// attention-mask input (right padding: a row's last token is at
// sum(mask)−1).
//
// Rows X: latent — every position of last (padding masked out of the
// attention); multilayer — each layer's state at the last token plus the
// trainable layer weight, [b, L, H]. Then K = X·Wkᵀ, V = X·Wvᵀ, per head
// P = softmax(Q·Kᵀ/√d) with Q the trainable latents, Z = (P·V)·Woᵀ,
// Y = Z + fc2(GELU(fc1(Z))), and the embedding is the mean of Y's rows.
func (w *weights) poolingHead(g *Graph, last string, layers []string, padKeys, mask string) string {
	cfg, hc := w.cfg, w.cfg.PoolingHead
	H, L, r, nh := cfg.HiddenSize, cfg.NumHiddenLayers, hc.Latents, hc.Heads
	d := H / nh
	x, keyMask := last, padKeys
	if hc.Mode == model.PoolingMultiLayer {
		// Each layer's row at the last token: GatherND over the batch.
		rows := make([]string, len(layers))
		for l, t := range layers {
			rows[l] = g.Op("Unsqueeze", []string{lastToken(g, t, mask), g.Int64s("", []int64{1}, []int64{1})})
		}
		x = g.Op("Concat", rows, AttrInt("axis", 1)) // [b, L, H]
		x = g.Op("Add", []string{x, w.tensorAbs(g, "pooling.layer_weights", false, L, H)})
		keyMask = "" // every row is real
	}
	proj := func(t, name string) string {
		wt := w.tensorAbs(g, "pooling."+name+".weight", true, H, H)
		if wt == "" {
			return t
		}
		return g.Op("MatMul", []string{t, wt})
	}
	split := g.Int64s("", []int64{4}, []int64{0, 0, int64(nh), int64(d)})
	k := g.Op("Transpose", []string{g.Op("Reshape", []string{proj(x, "k_proj"), split})}, AttrInts("perm", 0, 2, 3, 1)) // [b, nh, d, n]
	v := g.Op("Transpose", []string{g.Op("Reshape", []string{proj(x, "v_proj"), split})}, AttrInts("perm", 0, 2, 1, 3)) // [b, nh, n, d]
	lat := w.tensorAbs(g, "pooling.latents", false, r, H)
	if lat == "" {
		return last
	}
	q := g.Op("Transpose", []string{g.Op("Reshape", []string{lat, g.Int64s("", []int64{3}, []int64{int64(r), int64(nh), int64(d)})})},
		AttrInts("perm", 1, 0, 2)) // [nh, r, d]
	s := g.Op("Mul", []string{g.Op("MatMul", []string{q, k}), g.Scalar(float32(1 / math.Sqrt(float64(d))))}) // [b, nh, r, n]
	if keyMask != "" {
		s = g.Op("Add", []string{s, keyMask})
	}
	c := g.Op("MatMul", []string{g.Op("Softmax", []string{s}, AttrInt("axis", -1)), v}) // [b, nh, r, d]
	c = g.Op("Reshape", []string{g.Op("Transpose", []string{c}, AttrInts("perm", 0, 2, 1, 3)),
		g.Int64s("", []int64{3}, []int64{0, int64(r), int64(H)})}) // [b, r, H]
	z := proj(c, "o_proj")
	u := activation(g, w.linearAbs(g, z, "pooling.mlp.fc1", H, H), "gelu")
	y := g.Op("Add", []string{z, w.linearAbs(g, u, "pooling.mlp.fc2", H, H)})
	return g.Op("ReduceMean", []string{y}, AttrInts("axes", 1), AttrInt("keepdims", 0))
}
