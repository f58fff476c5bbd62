package onnx

import "github.com/anna-search/anna/model"

// The papers' decoder embedders in the graph. Causal2Vec (paper 004): the trainer's
// internal/train/technique/causal2vec, served. The caller tokenises each text,
// puts ContextPlaceholder where the contextual token C goes (after the
// instruction of a query, first in a document, after the BOS if any), and
// feeds the paired encoder's vector of the text as the context input.

// InputContext is a Causal2Vec graph's extra input: the paired encoder's
// vector of each text, [batch, context_dim] (model.InputContext).
const InputContext = model.InputContext

// ContextPlaceholder is the input id that marks the contextual token's
// position, one per row (model.ContextPlaceholder).
const ContextPlaceholder = model.ContextPlaceholder

// contextualToken computes C = GELU(ctx·W1ᵀ [+ b1])·W2ᵀ [+ b2] (tensors
// "causal2vec.mlp.0/2.…", the exact GELU) and puts it into the input
// embeddings x [b, s, H] where ids is the placeholder. It returns the new
// embeddings and the placeholder mask [b, s] (bool).
func (w *weights) contextualToken(g *Graph, x, ids, ctx string) (string, string) {
	H, k, bias := w.cfg.HiddenSize, w.cfg.Causal2Vec.ContextDim, w.cfg.Causal2Vec.Bias
	lin := func(t, name string, in, out int) string {
		wt := w.tensorAbs(g, "causal2vec.mlp."+name+".weight", true, out, in)
		if wt == "" {
			return t
		}
		y := g.Op("MatMul", []string{t, wt})
		if bias {
			if b := w.tensorAbs(g, "causal2vec.mlp."+name+".bias", false, out); b != "" {
				y = g.Op("Add", []string{y, b})
			}
		}
		return y
	}
	c := lin(activation(g, lin(ctx, "0", k, H), "gelu"), "2", H, H) // [b, H]
	isC := g.Op("Equal", []string{ids, g.Int64s("", nil, []int64{ContextPlaceholder})})
	where := g.Op("Unsqueeze", []string{isC, g.Int64s("", []int64{1}, []int64{2})}) // [b, s, 1]
	c3 := g.Op("Unsqueeze", []string{c, g.Int64s("", []int64{1}, []int64{1})})      // [b, 1, H]
	return g.Op("Where", []string{where, c3, x}), isC
}

// causal2VecEmbedding is [h_C; h_EOS] of the final hidden state x: the
// rows at the placeholder and at the last real token, [b, 2H].
func causal2VecEmbedding(g *Graph, x, isC, mask string) string {
	pos := g.Op("ArgMax", []string{g.Op("Cast", []string{isC}, AttrInt("to", Int32))}, AttrInt("axis", 1), AttrInt("keepdims", 1)) // [b, 1]
	hc := g.Op("GatherND", []string{x, pos}, AttrInt("batch_dims", 1))
	return g.Op("Concat", []string{hc, lastToken(g, x, mask)}, AttrInt("axis", 1))
}

// MemoryTensor is an AutoRegEmbed checkpoint's k×hidden memory-token
// embeddings (internal/train/technique/autoregembed's parameter).
const MemoryTensor = "autoregembed.memory"

// memoryMean is AutoRegEmbed's embedding: the mean of the last hidden
// states x [b, s, H] at the k memory tokens (ids ≥ vocab), [b, H].
func memoryMean(g *Graph, x, ids string, vocab, k int) string {
	isMem := g.Op("Cast", []string{g.Op("GreaterOrEqual", []string{ids, g.Int64s("", nil, []int64{int64(vocab)})})}, AttrInt("to", Float))
	w := g.Op("Unsqueeze", []string{g.Op("Mul", []string{isMem, g.Scalar(1 / float32(k))}), g.Int64s("", []int64{1}, []int64{2})}) // [b, s, 1]
	return g.Op("ReduceSum", []string{g.Op("Mul", []string{x, w}), g.Int64s("", []int64{1}, []int64{1})}, AttrInt("keepdims", 0))
}
