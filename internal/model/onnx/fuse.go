package onnx

// The fused BERT layer: what ONNX Runtime's CPU provider runs as single
// kernels, written as its com.microsoft contrib operators rather than left
// to its optimizer, whose attention fusion does not recognise anna's
// standard-operator graph (it fuses only the GELU and the score scaling
// there; TestFusedGraph checks what the optimized graph holds).
//
// Per layer, for x [batch, seq, hidden]:
//
//	q, k, v = Split(x·Wqkv)                      Q, K and V in one [H, 3H] MatMul
//	a = If(full, MultiHeadAttention(q, k, v, bqkv),
//	             MultiHeadAttention(q, k, v, bqkv, mask))
//	x = SkipLayerNormalization(a·Wo, x, γ, β, bo)
//	f = BiasGelu(x·W1, b1)                       FastGelu for gelu_new (and quantized); Relu(x·W1 + b1) for relu
//	x = SkipLayerNormalization(f·W2, x, γ, β, b2)
//
// The masked MultiHeadAttention takes the raw [batch, seq] int32 mask and
// adds mask_filter_value (-10000, the unfused graph's maskedAttention) to
// the scores of padding keys, so both forms compute the same function.
// The If runs the unmasked one when the batch has no padding (full: every
// mask value 1): only then does ONNX Runtime's CPU provider take its
// flash-attention kernel, which does not materialise the [seq, seq]
// scores. Measured on bge-small (Python ONNX Runtime 1.24, one thread, 200
// SciFact abstracts in batches of one length): 4 % less CPU in float32
// (35.0 → 33.6 s) and 6–9 % in int8 (16.8 → 15.3–15.7 s) than the
// previous Attention and QAttention, whose CPU kernels have no such path.
// internal/inference cuts batches of long texts at length changes so that they
// take it.
//
// Quantized (BuildOptions.Quantize), every MatMul quantizes its input per
// row (token: rowQuantizedMatMul), so that a token's output depends on its
// own row alone and a text's vector on its own tokens alone, whatever
// else is in its batch. GELU is FastGelu's tanh form there.
// Decoders (llama.go) share matmul for their projections, float32, int8
// (every projection per row) or int4 (MatMulNBits).

import (
	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/model"
)

// attentionMask is a batch's padding mask in the two forms fusedLayer
// reads: index, the raw [batch, seq] int32 mask MultiHeadAttention takes
// as key_padding_mask, and full, the boolean scalar "no padding in the
// batch" (every mask value 1).
type attentionMask struct{ index, full string }

// newAttentionMask derives both forms from the graph's int64 mask input.
func newAttentionMask(g *Graph, mask string) attentionMask {
	return attentionMask{
		index: g.Op("Cast", []string{mask}, AttrInt("to", Int32)),
		full:  g.Op("Cast", []string{g.Op("ReduceMin", []string{mask}, AttrInt("keepdims", 0))}, AttrInt("to", Bool)),
	}
}

// fusedLayer appends BERT layer l in the fused form and returns its
// output. The packed Q/K/V product is named arch.FusedQKV(l), outside the
// checkpoint's prefix.
func (w *weights) fusedLayer(g *Graph, x string, l int, m attentionMask, eps Attr, quant string) string {
	H, I, nh := w.cfg.HiddenSize, w.cfg.IntermediateSize, int64(w.cfg.NumAttentionHeads)
	p, fused := arch.EncoderLayer(l), arch.FusedQKV(l)
	a := x // if a weight is missing: keep going so every missing tensor is reported
	if wqkv, bqkv := w.packedQKV(p); wqkv != nil {
		var qkv, bias string // [batch, seq, 3H]; bias: what MultiHeadAttention adds (none if added already)
		if quant == "" {
			wt := g.Floats(sanitize(fused+".weight"), []int64{int64(H), int64(3 * H)}, wqkv)
			bias = g.Floats(sanitize(fused+".bias"), []int64{int64(3 * H)}, bqkv)
			qkv = g.Op("MatMul", []string{x, wt})
		} else {
			wt, sc := w.int8Weight(g, fused, w.packedQKVInt8(p, wqkv), H, 3*H)
			bias = g.Floats(sanitize(fused+".bias"), []int64{int64(3 * H)}, bqkv)
			qkv = w.quantizedMatMul(g, x, wt, sc, H)
		}
		h3 := int64(H)
		sp := g.OpN("Split", []string{qkv, g.Int64s("", []int64{3}, []int64{h3, h3, h3})}, 3, AttrInt("axis", -1))
		ins := []string{sp[0], sp[1], sp[2], bias}
		mha := func(ins []string) func(b *Graph) string {
			return func(b *Graph) string {
				return b.MS("MultiHeadAttention", ins, AttrInt("num_heads", nh), AttrFloat("mask_filter_value", maskedAttention))
			}
		}
		a = g.If(m.full, Float, []Dim{{Param: "batch"}, {Param: "sequence"}, {Value: h3}}, mha(ins), mha(append(ins, m.index)))
	}
	x = w.skipLayerNorm(g, w.matmul(g, a, p+arch.EncAttnOut.Module(), H, H, quant), x, p, arch.EncAttnOut, arch.EncAttnNorm, eps)

	f := w.matmul(g, x, p+arch.EncInter.Module(), H, I, quant)
	b1 := w.tensor(g, p+arch.EncInter.Module()+".bias", false, I)
	// Quantized, GELU takes the tanh form too: its difference from erf's
	// (at most 4.7e-4) is lost in int8's noise — bge-small's int8 vectors
	// against float32's, cosine 0.99909 with erf, 0.99907 with tanh — and
	// FastGelu took 5 % less of the int8 run (Python ONNX Runtime, 100
	// SciFact abstracts, one thread: 9.10 vs 9.57 CPU-s).
	switch act := w.cfg.HiddenAct; {
	case act == "relu":
		f = g.Op("Relu", []string{g.Op("Add", []string{f, b1})})
	case act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu" && quant != "" && !w.perTensor:
		f = g.MS("FastGelu", []string{f, b1})
	default:
		f = g.MS("BiasGelu", []string{f, b1})
	}
	return w.skipLayerNorm(g, w.matmul(g, f, p+arch.EncOut.Module(), I, H, quant), x, p, arch.EncOut, arch.EncOutNorm, eps)
}

// packedQKV is the layer's query, key and value weights as the one
// [H, 3H] matrix of the layer's Q/K/V product (row i: Wq[:, i], Wk[:, i],
// Wv[:, i], each Linear weight being [out, in]) and their biases
// concatenated; nil when a tensor is missing or malformed.
func (w *weights) packedQKV(p string) ([]float32, []float32) {
	H := w.cfg.HiddenSize
	var ws, bs [3][]float32
	for i, r := range []arch.Role{arch.EncQuery, arch.EncKey, arch.EncValue} {
		ws[i], _ = w.data(w.prefix+p+r.Module()+".weight", false, H, H)
		bs[i], _ = w.data(w.prefix+p+r.Module()+".bias", false, H)
	}
	for i := range ws {
		if ws[i] == nil || bs[i] == nil {
			return nil, nil
		}
	}
	packed := make([]float32, H*3*H)
	for i := 0; i < H; i++ { // input feature
		row := packed[i*3*H : (i+1)*3*H]
		for k, m := range ws {
			for o := 0; o < H; o++ { // output feature
				row[k*H+o] = m[o*H+i]
			}
		}
	}
	return packed, append(append(append(make([]float32, 0, 3*H), bs[0]...), bs[1]...), bs[2]...)
}

// matmul is x·Wᵀ for the Linear module name's weight (no bias): a MatMul
// with the float32 weight, a per-row quantized product with the int8 one
// (model.QuantizeInt8, rowQuantizedMatMul), or a MatMulNBits with 4-bit blocks
// (model.QuantizeInt4).
func (w *weights) matmul(g *Graph, x, name string, in, out int, quant string) string {
	if quant == model.QuantizeInt4 {
		data, _ := w.data(w.prefix+name+".weight", false, out, in)
		if data == nil {
			return x
		}
		packed, scales, zps := quantizeBlocks4(data, out, in)
		nb := int64((in + int4Block - 1) / int4Block)
		p := sanitize(w.prefix + name + ".weight")
		b := g.Uint8s(p+"_int4", []int64{int64(out), nb, int4Block / 2}, packed)
		sc := g.Floats(p+"_scale", []int64{int64(out) * nb}, scales)
		zp := g.Floats(p+"_zero_point", []int64{int64(out) * nb}, zps)
		// accuracy_level 1: activations stay float32 (level 4's int8
		// products ran no faster on an AVX2 CPU without VNNI).
		return g.MS("MatMulNBits", []string{x, b, sc, zp}, AttrInt("K", int64(in)), AttrInt("N", int64(out)),
			AttrInt("bits", 4), AttrInt("block_size", int4Block), AttrInt("accuracy_level", 1))
	}
	if quant == "" {
		wt := w.tensor(g, name+".weight", true, out, in)
		if wt == "" {
			return x
		}
		return g.Op("MatMul", []string{x, wt})
	}
	src := w.int8[w.prefix+name]
	var data []float32
	if src == nil {
		if data, _ = w.data(w.prefix+name+".weight", true, out, in); data == nil {
			return x
		}
	}
	wt, sc := w.int8Weight(g, w.prefix+name, &int8Source{cols: src, float: data}, in, out)
	return w.quantizedMatMul(g, x, wt, sc, in)
}

// int8Source is one product's weight for an int8 graph: the int8 columns
// of a quantized source graph (BuildOptions.Int8), kept as they are, else
// the float32 weight [in, out], quantized here (quantizeColumns).
type int8Source struct {
	cols  *Int8Columns
	float []float32
}

// int8Weight adds the int8 weight [in, out] of module name and its
// per-column scales as initializers.
func (w *weights) int8Weight(g *Graph, name string, src *int8Source, in, out int) (wt, sc string) {
	q, scale := []int8(nil), []float32(nil)
	if src.cols != nil {
		q, scale = src.cols.W, src.cols.Scale
	} else {
		q, scale = quantizeColumns(src.float, in, out)
	}
	wt = g.Int8s(sanitize(name+".weight_int8"), []int64{int64(in), int64(out)}, q)
	sc = g.Floats(sanitize(name+".weight_scale"), []int64{int64(out)}, scale)
	return wt, sc
}

// packedQKVInt8 is the Q/K/V product's weight for an int8 graph: the
// source graph's int8 query, key and value columns side by side when it
// has them (as packedQKV lays out the float32 ones), else packed, the
// float32 one.
func (w *weights) packedQKVInt8(p string, packed []float32) *int8Source {
	H := w.cfg.HiddenSize
	var cols [3]*Int8Columns
	for i, r := range []arch.Role{arch.EncQuery, arch.EncKey, arch.EncValue} {
		if cols[i] = w.int8[w.prefix+p+r.Module()]; cols[i] == nil || cols[i].In != H || cols[i].Out != H {
			return &int8Source{float: packed}
		}
	}
	qkv := &Int8Columns{In: H, Out: 3 * H, W: make([]int8, 0, 3*H*H), Scale: make([]float32, 0, 3*H)}
	for i := 0; i < H; i++ {
		for _, c := range cols {
			qkv.W = append(qkv.W, c.W[i*H:(i+1)*H]...)
		}
	}
	for _, c := range cols {
		qkv.Scale = append(qkv.Scale, c.Scale...)
	}
	return &int8Source{cols: qkv}
}

// quantizedMatMul is x·W for the int8 weight wt [in, out] with per-column
// scales sc: x quantized per row (rowQuantizedMatMul), or with
// perTensorActivations per tensor (tensorQuantizedMatMul).
func (w *weights) quantizedMatMul(g *Graph, x, wt, sc string, in int) string {
	if w.perTensor {
		return tensorQuantizedMatMul(g, x, wt, sc)
	}
	return rowQuantizedMatMul(g, x, wt, sc, in)
}

// tensorQuantizedMatMul is x·W with x quantized over the whole tensor
// (DynamicQuantizeLinear: uint8, one scale and zero point for the batch),
// the arithmetic of ONNX Runtime's quantize_dynamic (DynamicQuantizeLinear,
// MatMulInteger, the two scales' product): what a dynamically quantized
// source graph computes, and so, for a text alone, what anna's graph of
// its weights must compute to be checked against it. A text's vector then
// depends on the other texts of its batch: graphs that are served quantize
// per row.
func tensorQuantizedMatMul(g *Graph, x, wt, sc string) string {
	xq := g.OpN("DynamicQuantizeLinear", []string{x}, 3) // uint8 x, its scale, its zero point
	return g.MS("MatMulIntegerToFloat", []string{xq[0], wt, xq[1], sc, xq[2]})
}

// rowQuantizedMatMul is x·W for x [batch, seq, in] and the int8 weight wt
// [in, out] with per-column scales sc, x quantized per row (per token):
// s = max|x_row| / 127, q = round(x_row / s) + 128 as uint8 (zero point
// 128, symmetric), so every activation is within s/2 of (q − 128)·s, and
//
//	y = MatMulIntegerToFloat(q, wt, 1, sc, 128) · s
//
// DynamicQuantizeMatMul, what ran here before, takes one scale for the
// whole batch: a token with a large activation (BERT's feed-forward
// outputs have them at [SEP] and punctuation) coarsened every token of
// every document beside it.
// Per row, MiniLM's int8 vectors of 256 SciFact abstracts went from cosine
// 0.9935 to 0.9965 with their float32 vectors (bge-small: 0.9981 to
// 0.9991) for 5% (MiniLM) and 9% (bge-small) more int8 time
// (BenchmarkQuantSciFact's ratios, ONNX Runtime 1.24, VNNI CPU),
// and SciFact nDCG@10 came within 0.005 of float32's (BenchmarkQuantNDCG).
// QuantizeLinear quantizes along one axis only, so x is viewed as [rows,
// in] for it. The Q/K/V product is quantized per row too (it kept one
// scale per batch until a text's vector was made its own, issue 64: a
// text's int8 vector then moved with its batch, cosine 0.997 to itself
// alone).
func rowQuantizedMatMul(g *Graph, x, wt, sc string, in int) string {
	// max|x| as max(max x, −min x): two reading passes, where Abs would
	// also write a copy of x (1.4% of bge-small's int8 time).
	hi := g.Op("ReduceMax", []string{x}, AttrInts("axes", -1), AttrInt("keepdims", 1))
	lo := g.Op("Neg", []string{g.Op("ReduceMin", []string{x}, AttrInts("axes", -1), AttrInt("keepdims", 1))})
	s := g.Op("Mul", []string{g.Op("Max", []string{hi, lo, g.Scalar(1e-12)}), g.Scalar(1.0 / 127)}) // [batch, seq, 1]
	rows := g.Op("Reshape", []string{s, g.Int64s("", []int64{1}, []int64{-1})})
	zp := g.Uint8s("", nil, []uint8{128})
	x2 := g.Op("Reshape", []string{x, g.Int64s("", []int64{2}, []int64{-1, int64(in)})})
	q := g.Op("QuantizeLinear", []string{x2, rows, g.Op("Expand", []string{zp, g.Op("Shape", []string{rows})})}, AttrInt("axis", 0))
	q = g.Op("Reshape", []string{q, g.Op("Shape", []string{x})})
	y := g.MS("MatMulIntegerToFloat", []string{q, wt, g.Scalar(1), sc, zp})
	return g.Op("Mul", []string{y, s})
}

// skipLayerNorm is LayerNorm(y + x + bias) for the dense module
// prefix+".dense" (its bias) and prefix+".LayerNorm" (γ, β), one
// SkipLayerNormalization.
func (w *weights) skipLayerNorm(g *Graph, y, x, p string, dense, norm arch.Role, eps Attr) string {
	H := w.cfg.HiddenSize
	b := w.tensor(g, p+dense.Module()+".bias", false, H)
	gamma := w.tensor(g, p+norm.Module()+".weight", false, H)
	beta := w.tensor(g, p+norm.Module()+".bias", false, H)
	if b == "" || gamma == "" || beta == "" {
		return x
	}
	return g.MS("SkipLayerNormalization", []string{y, x, gamma, beta, b}, eps)
}
