package onnx

import (
	"fmt"
	"math"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// Build builds the graph of cfg's architecture: BERT (BuildBERT) or a
// Llama-family decoder (BuildLlama).
func Build(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string) (*Graph, error) {
	if cfg.IsDecoder() {
		return BuildLlama(cfg, tensors, task)
	}
	return BuildBERT(cfg, tensors, task)
}

// maskedScore is added to the attention score of a key a query must not
// see (a later token, or padding): exp underflows to exactly 0.
const maskedScore = -1e9

// BuildLlama builds the ONNX graph of a Llama-family decoder (LlamaModel,
// MistralModel, Qwen2Model, Qwen3Model: tensors named as in Hugging Face, with or
// without the "model." prefix) for embedding: last_hidden_state [batch, seq, hidden]
// after the final RMSNorm, or, when config.json has a trainable pooling
// head (anna_pooling_head), the head's sentence_embedding [batch, hidden]
// (see poolingHead). The inputs are the BERT graph's (input_ids,
// attention_mask, token_type_ids, the last unused), so one runner serves
// both. Sequences are right-padded: positions are 0..seq-1 as transformers
// gives them; attention is causal (bidirectional when the config says
// anna_attention "bidirectional"), and padding is never attended to.
//
// Per layer, as transformers' LlamaDecoderLayer: x += o(attn(rope(q),
// rope(k), v)) over RMSNorm(x), then x += down(silu(gate(h)) * up(h)) over
// RMSNorm(x); Qwen2 adds biases to q, k and v, Qwen3 an RMSNorm over each
// head of q and k before the rotary positions (q_norm, k_norm, whose width
// is the head's: head_dim may differ from hidden/heads). Grouped-query attention runs each key/value head against
// its group of query heads by folding the group into the query rows (no
// copies of K and V).
//
// Task rerank (BuildWith, with BuildOptions.LabelTokens) is the decoder
// reranker's "yes/no logit" form: logits [batch, len(LabelTokens)], the
// language-model head's logits of those tokens at each row's last real
// token (lm_head.weight, or the token embeddings when they are tied).
func BuildLlama(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string) (*Graph, error) {
	return buildLlama(cfg, tensors, task, BuildOptions{})
}

func buildLlama(cfg *model.Config, tensors map[string]*safetensors.Tensor, task string, o BuildOptions) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("onnx: config: %w", err)
	}
	switch {
	case task == model.TaskEmbed:
	case task == model.TaskRerank && len(o.LabelTokens) > 0:
		if cfg.PoolingHead != nil || cfg.Causal2Vec != nil || cfg.MemoryTokens > 0 {
			return nil, fmt.Errorf("onnx: a %s model with a trained pooling head is an embedder, not a reranker", cfg.ModelType)
		}
	case task == model.TaskRerank:
		return nil, fmt.Errorf("onnx: a %s reranker needs its label tokens (the tokens whose logits score a pair)", cfg.ModelType)
	default:
		return nil, fmt.Errorf("onnx: task %q not supported for %s models (want %s or %s)", task, cfg.ModelType, model.TaskEmbed, model.TaskRerank)
	}
	w := &weights{t: tensors, cfg: cfg}
	if _, ok := tensors["model."+arch.EmbedTokens]; ok {
		w.prefix = "model."
	}
	H, V, I, P := cfg.HiddenSize, cfg.VocabSize, cfg.IntermediateSize, cfg.MaxPositionEmbeddings
	nh, nkv, hd := cfg.NumAttentionHeads, cfg.KVHeads(), cfg.HeadDim()
	rep := nh / nkv

	g := NewGraph(cfg.ModelType)
	g.Metadata("anna.task", task)
	g.Metadata("anna.hidden_size", fmt.Sprint(H))
	batch, seq := Dim{Param: "batch"}, Dim{Param: "sequence"}
	ids := g.Input(InputIDs, Int64, batch, seq)
	mask := g.Input(InputMask, Int64, batch, seq)
	g.Input(InputTypeIDs, Int64, batch, seq) // unused: the runner feeds every graph the same inputs

	var x string
	if o.Quantize == model.QuantizeInt4 && cfg.MemoryTokens == 0 && H%int8Block == 0 {
		x = w.embedInt8(g, arch.EmbedTokens, ids, V, H)
	} else {
		table := w.tensor(g, arch.EmbedTokens, false, V, H)
		if k := cfg.MemoryTokens; k > 0 && table != "" { // AutoRegEmbed's memory tokens are ids V … V+k−1
			if mem := w.tensorAbs(g, MemoryTensor, false, k, H); mem != "" {
				table = g.Op("Concat", []string{table, mem}, AttrInt("axis", 0))
			}
		}
		x = g.Op("Gather", []string{table, ids})
	}
	var isC string
	if cv := cfg.Causal2Vec; cv != nil { // the contextual token replaces the placeholder id
		ctx := g.Input(InputContext, Float, batch, Dim{Value: int64(cv.ContextDim)})
		x, isC = w.contextualToken(g, x, ids, ctx)
	}

	// Positions 0..seq-1 and their rotary tables [seq, hd].
	one64 := g.Int64s("", nil, []int64{1})
	seqLen := g.Op("Gather", []string{g.Op("Shape", []string{ids}), one64})
	pos := g.Op("Range", []string{g.Int64s("", nil, []int64{0}), seqLen, one64})
	cosT, sinT := ropeTables(P, hd, cfg.RopeTheta)
	cos := g.Op("Gather", []string{g.Floats("rope_cos", []int64{int64(P), int64(hd)}, cosT), pos})
	sin := g.Op("Gather", []string{g.Floats("rope_sin", []int64{int64(P), int64(hd)}, sinT), pos})

	// Additive mask [batch, 1, rep*seq, seq]: a later key or a padded key
	// gets maskedScore. Rows repeat per query head of a group (see above).
	pad := g.Op("Sub", []string{g.Scalar(1), g.Op("Cast", []string{mask}, AttrInt("to", Float))})
	pad = g.Op("Unsqueeze", []string{pad, g.Int64s("", []int64{2}, []int64{1, 2})}) // [b, 1, 1, seq]
	var padKeys string
	if cfg.PoolingHead != nil {
		padKeys = g.Op("Mul", []string{pad, g.Scalar(maskedScore)})
	}
	if !cfg.Bidirectional() { // a bidirectional decoder masks padding only
		col := g.Op("Unsqueeze", []string{pos, g.Int64s("", []int64{1}, []int64{1})})
		row := g.Op("Unsqueeze", []string{pos, g.Int64s("", []int64{1}, []int64{0})})
		future := g.Op("Cast", []string{g.Op("Less", []string{col, row})}, AttrInt("to", Float)) // [seq, seq]
		pad = g.Op("Add", []string{future, pad})
	}
	ext := g.Op("Mul", []string{pad, g.Scalar(maskedScore)})
	if rep > 1 && !cfg.Bidirectional() { // [b, 1, 1, seq] broadcasts as it is
		ext = g.Op("Tile", []string{ext, g.Int64s("", []int64{4}, []int64{1, 1, int64(rep), 1})})
	}

	half := int64(hd / 2)
	axis3 := g.Int64s("", []int64{1}, []int64{3})
	lo := []string{g.Int64s("", []int64{1}, []int64{0}), g.Int64s("", []int64{1}, []int64{half}), axis3}
	hi := []string{g.Int64s("", []int64{1}, []int64{half}), g.Int64s("", []int64{1}, []int64{int64(hd)}), axis3}
	rope := func(t string) string {
		x1 := g.Op("Slice", append([]string{t}, lo...))
		x2 := g.Op("Slice", append([]string{t}, hi...))
		rot := g.Op("Concat", []string{g.Op("Neg", []string{x2}), x1}, AttrInt("axis", 3))
		return g.Op("Add", []string{g.Op("Mul", []string{t, cos}), g.Op("Mul", []string{rot, sin})})
	}
	eps := g.Scalar(float32(cfg.RMSNormEps))
	two := g.Scalar(2)
	// rmsOver normalises t's last axis (width n) and scales it by name's
	// gain: the hidden state (n = H), or each head of the queries and keys
	// (Qwen3's q_norm and k_norm, n = head width).
	rmsOver := func(t, name string, n int) string {
		gamma := w.tensor(g, name+".weight", false, n)
		if gamma == "" {
			return t
		}
		v := g.Op("ReduceMean", []string{g.Op("Pow", []string{t, two})}, AttrInts("axes", -1), AttrInt("keepdims", 1))
		inv := g.Op("Reciprocal", []string{g.Op("Sqrt", []string{g.Op("Add", []string{v, eps})})})
		return g.Op("Mul", []string{gamma, g.Op("Mul", []string{t, inv})})
	}
	rms := func(t, name string) string { return rmsOver(t, name, H) }
	// Qwen3 normalises each query and key head before the rotary positions.
	qkNorm := func(t, name string) string {
		if !cfg.QKNorm() {
			return t
		}
		return rmsOver(t, name, hd)
	}
	proj := func(t, name string, in, out int) string { return w.matmul(g, t, name, in, out, o.Quantize) }
	// Qwen2 adds a bias to the query, key and value projections.
	qkv := func(t, name string, in, out int) string {
		y := proj(t, name, in, out)
		if !cfg.QKVBias() {
			return y
		}
		b := w.tensor(g, name+".bias", false, out)
		if b == "" {
			return y
		}
		return g.Op("Add", []string{y, b})
	}
	heads := func(t string, n int) string { // [b, s, n*hd] -> [b, n, s, hd]
		r := g.Op("Reshape", []string{t, g.Int64s("", []int64{4}, []int64{0, 0, int64(n), int64(hd)})})
		return g.Op("Transpose", []string{r}, AttrInts("perm", 0, 2, 1, 3))
	}
	scale := g.Scalar(float32(math.Sqrt(float64(hd))))
	grouped := g.Int64s("", []int64{4}, []int64{0, int64(nkv), -1, int64(hd)})
	ungrouped := g.Int64s("", []int64{4}, []int64{0, int64(nh), -1, int64(hd)})
	heads2d := g.Int64s("", []int64{3}, []int64{0, 0, int64(nh * hd)}) // [b, s, nh*hd]
	layerOut := make([]string, cfg.NumHiddenLayers)                    // each layer's output (a pooling head's multi-layer rows)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := func(r arch.Role) string { return arch.Layer("", l) + r.Module() } // the layout's names
		h := rms(x, p(arch.AttnNorm))
		q := rope(qkNorm(heads(qkv(h, p(arch.QProj), H, nh*hd), nh), p(arch.QNorm)))
		k := rope(qkNorm(heads(qkv(h, p(arch.KProj), H, nkv*hd), nkv), p(arch.KNorm)))
		v := heads(qkv(h, p(arch.VProj), H, nkv*hd), nkv)
		qg := g.Op("Reshape", []string{q, grouped}) // [b, nkv, rep*s, hd]
		kt := g.Op("Transpose", []string{k}, AttrInts("perm", 0, 1, 3, 2))
		s := g.Op("Add", []string{g.Op("Div", []string{g.Op("MatMul", []string{qg, kt}), scale}), ext})
		c := g.Op("MatMul", []string{g.Op("Softmax", []string{s}, AttrInt("axis", -1)), v})
		c = g.Op("Transpose", []string{g.Op("Reshape", []string{c, ungrouped})}, AttrInts("perm", 0, 2, 1, 3))
		x = g.Op("Add", []string{x, proj(g.Op("Reshape", []string{c, heads2d}), p(arch.OProj), nh*hd, H)})
		h = rms(x, p(arch.MLPNorm))
		gate := proj(h, p(arch.GateProj), H, I)
		act := g.Op("Mul", []string{gate, g.Op("Sigmoid", []string{gate})})
		up := proj(h, p(arch.UpProj), H, I)
		x = g.Op("Add", []string{x, proj(g.Op("Mul", []string{act, up}), p(arch.DownProj), I, H)})
		layerOut[l] = x
	}
	x = rms(x, arch.FinalNormModule)
	layerOut[len(layerOut)-1] = x // the last layer's row is after the final norm (hidden_states[-1])
	switch {
	case cfg.MemoryTokens > 0:
		g.OpNamed("Identity", OutputEmbedding, []string{memoryMean(g, x, ids, V, cfg.MemoryTokens)})
		g.Output(OutputEmbedding, Float, batch, Dim{Value: int64(H)})
	case cfg.Causal2Vec != nil:
		g.OpNamed("Identity", OutputEmbedding, []string{causal2VecEmbedding(g, x, isC, mask)})
		g.Output(OutputEmbedding, Float, batch, Dim{Value: int64(2 * H)})
	case task == model.TaskRerank:
		g.OpNamed("Identity", OutputLogits, []string{w.labelLogits(g, x, mask, o.LabelTokens)})
		g.Output(OutputLogits, Float, batch, Dim{Value: int64(len(o.LabelTokens))})
	case cfg.PoolingHead != nil:
		g.OpNamed("Identity", OutputEmbedding, []string{w.poolingHead(g, x, layerOut, padKeys, mask)})
		g.Output(OutputEmbedding, Float, batch, Dim{Value: int64(H)})
	default:
		g.OpNamed("Identity", OutputHidden, []string{x})
		g.Output(OutputHidden, Float, batch, seq, Dim{Value: int64(H)})
	}
	if err := w.err(); err != nil {
		return nil, err
	}
	return g, nil
}

// embedInt8 is Gather(table, ids) for the [V, H] table name stored as int8
// in blocks of int8Block along H (quantizeBlocks8): the rows gathered as
// int8, then scaled, [b, s, H]. An int4 decoder's embedding table is its
// largest float32 tensor otherwise (SmolLM2's is a fifth of the model).
func (w *weights) embedInt8(g *Graph, name, ids string, V, H int) string {
	data, _ := w.data(w.prefix+name, false, V, H)
	if data == nil {
		return ids
	}
	q, scales := quantizeBlocks8(data, V, H)
	nb := int64(H / int8Block)
	p := sanitize(w.prefix + name)
	rows := g.Op("Cast", []string{g.Op("Gather", []string{g.Int8s(p+"_int8", []int64{int64(V), int64(H)}, q), ids})}, AttrInt("to", Float))
	rows = g.Op("Reshape", []string{rows, g.Int64s("", []int64{4}, []int64{0, 0, nb, int8Block})})
	sc := g.Op("Unsqueeze", []string{g.Op("Gather", []string{g.Floats(p+"_scale", []int64{int64(V), nb}, scales), ids}), g.Int64s("", []int64{1}, []int64{3})})
	return g.Op("Reshape", []string{g.Op("Mul", []string{rows, sc}), g.Int64s("", []int64{3}, []int64{0, 0, int64(H)})})
}

// lastToken gathers each row's last real token of t [b, s, H] (right
// padding: at sum(mask)−1), [b, H].
func lastToken(g *Graph, t, mask string) string {
	idx := g.Op("Sub", []string{
		g.Op("ReduceSum", []string{mask, g.Int64s("", []int64{1}, []int64{1})}, AttrInt("keepdims", 1)),
		g.Int64s("", nil, []int64{1})}) // [b, 1]
	return g.Op("GatherND", []string{t, idx}, AttrInt("batch_dims", 1))
}

// labelLogits is the language-model head restricted to the label tokens at
// each row's last real token: [b, len(labels)]. The head is lm_head.weight
// when the checkpoint has one and does not tie it, else the token
// embeddings.
func (w *weights) labelLogits(g *Graph, x, mask string, labels []int64) string {
	H, V := w.cfg.HiddenSize, w.cfg.VocabSize
	name := w.prefix + arch.EmbedTokens
	if !w.cfg.TieWordEmbeddings {
		name = ""
		for _, n := range []string{"lm_head.weight", "model.lm_head.weight"} {
			if _, ok := w.t[n]; ok {
				name = n
			}
		}
		if name == "" {
			w.missing = append(w.missing, "lm_head.weight (tie_word_embeddings is false)")
			return x
		}
	}
	head, _ := w.data(name, false, V, H)
	if head == nil {
		return x
	}
	cols := make([]float32, H*len(labels)) // [H, n]: MatMul's layout
	for j, id := range labels {
		if id < 0 || int(id) >= V {
			if w.bad == nil {
				w.bad = fmt.Errorf("onnx: label token id %d outside the vocabulary (vocab_size %d)", id, V)
			}
			return x
		}
		for c := 0; c < H; c++ {
			cols[c*len(labels)+j] = head[int(id)*H+c]
		}
	}
	wl := g.Floats("label_head", []int64{int64(H), int64(len(labels))}, cols)
	return g.Op("MatMul", []string{lastToken(g, x, mask), wl})
}

// ropeTables are the rotary embedding's cos and sin for positions
// 0..n-1, [n, hd], each row the n/2 frequencies twice over (transformers'
// rotate_half layout): inv_freq_i = theta^(-2i/hd).
func ropeTables(n, hd int, theta float64) (cos, sin []float32) {
	cos = make([]float32, n*hd)
	sin = make([]float32, n*hd)
	for i := 0; i < hd/2; i++ {
		// As transformers computes it: in float32.
		inv := float32(1 / math.Pow(theta, float64(float32(2*i)/float32(hd))))
		for p := 0; p < n; p++ {
			a := float64(float32(p) * inv)
			c, s := float32(math.Cos(a)), float32(math.Sin(a))
			cos[p*hd+i], cos[p*hd+i+hd/2] = c, c
			sin[p*hd+i], sin[p*hd+i+hd/2] = s, s
		}
	}
	return cos, sin
}
