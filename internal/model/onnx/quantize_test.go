package onnx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/model/gguf"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// TestQuantizeColumns: every weight is within half a step of its int8
// value times its column's scale, the largest magnitude of each column
// maps to ±weightQMax, and an all-zero column stays zero.
func TestQuantizeColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, cols := 37, 9
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64()) * float32(1+i%cols) // columns of different ranges
	}
	for i := 0; i < rows; i++ {
		w[i*cols+4] = 0
	}
	q, scale := quantizeColumns(w, rows, cols)
	for c := 0; c < cols; c++ {
		peak := int8(0)
		for i := 0; i < rows; i++ {
			v, k := w[i*cols+c], q[i*cols+c]
			if d := math.Abs(float64(v) - float64(k)*float64(scale[c])); d > float64(scale[c])/2*(1+1e-6) {
				t.Fatalf("w[%d,%d] = %g, int8 %d × scale %g is %g off (more than half a step)", i, c, v, k, scale[c], d)
			}
			if k < 0 {
				k = -k
			}
			peak = max(peak, k)
		}
		switch {
		case c == 4 && (peak != 0 || scale[c] != 1):
			t.Errorf("zero column: peak %d, scale %g (want 0, 1)", peak, scale[c])
		case c != 4 && peak != weightQMax:
			t.Errorf("column %d: largest |int8| %d, want %d", c, peak, weightQMax)
		}
	}
}

// TestQuantizedGraph: an int8 export of a tiny BERT runs in ONNX Runtime
// as a per-row quantized MatMulIntegerToFloat for every product (Q, K and
// V before an If of two MultiHeadAttentions; nothing quantized per batch,
// no DynamicQuantizeLinear: read back from the optimized graph it saves), holds no
// float32 copy of the quantized weights, and gives hidden states and
// logits close to the float32 graph's, on a padded batch and on one
// without padding: within 0.1
// where the hidden states' std is 1 (8-bit weights and activations of a
// random model; TestQuantizedMiniLM in package encoder checks real text).
func TestQuantizedGraph(t *testing.T) {
	needORT(t)
	for _, act := range []string{"gelu", "relu", "gelu_new"} {
		t.Run(act, func(t *testing.T) {
			cfg := tinyConfig(act)
			cfg.HiddenSize, cfg.IntermediateSize = 64, 128 // enough values per column for 8 bits to be meaningful
			ts := tinyTensors(cfg, "bert.", 5)
			L, H, NL := cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumLabels()
			q := export(t, cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt8})
			ops := optimizedOps(t, q, OutputHidden)
			t.Logf("int8, as ONNX Runtime runs it: %s", formatOps(ops))
			want := map[string]int{"com.microsoft.DynamicQuantizeMatMul": 0, "DynamicQuantizeLinear": 0, "If": L, "com.microsoft.MultiHeadAttention": 2 * L,
				"com.microsoft.MatMulIntegerToFloat": 4 * L, "QuantizeLinear": 4 * L, "MatMul": 0, "com.microsoft.QAttention": 0}
			for op, n := range want {
				if ops[op] != n {
					t.Errorf("optimized int8 graph has %d %s, want %d", ops[op], op, n)
				}
			}
			if act != "relu" && (ops["com.microsoft.FastGelu"] != L || ops["com.microsoft.BiasGelu"] != 0) { // the tanh GELU, quantized
				t.Errorf("optimized int8 graph: %d FastGelu, %d BiasGelu (want %d, 0)", ops["com.microsoft.FastGelu"], ops["com.microsoft.BiasGelu"], L)
			}
			m, err := Read(q)
			if err != nil {
				t.Fatal(err)
			}
			for name, init := range m.Initializers {
				if len(init.Shape) == 2 && init.Shape[0] != cfg.VocabSize && init.Shape[0] != cfg.MaxPositionEmbeddings && init.Shape[0] != cfg.TypeVocabSize &&
					init.DataType != Int8 && !strings.HasPrefix(name, "bert_pooler") && !strings.HasPrefix(name, "classifier") {
					t.Errorf("initializer %s %v is type %d, want int8", name, init.Shape, init.DataType)
				}
			}
			for _, task := range []string{model.TaskEmbed, model.TaskRerank} {
				fp32, q8 := export(t, cfg, ts, task, BuildOptions{}), export(t, cfg, ts, task, BuildOptions{Quantize: model.QuantizeInt8})
				for _, tb := range testBatches {
					worst := batchDiff(t, fp32, q8, task, H, NL, tb.make)
					t.Logf("%s, %s batch: int8 vs float32 max abs diff %.3g", task, tb.name, worst)
					if worst > 0.1 {
						t.Errorf("%s, %s batch: int8 outputs differ from float32 by %.3g (want ≤ 0.1; hidden states have std 1)", task, tb.name, worst)
					}
				}
			}
		})
	}
}

// TestQuantizeRefuses: an unknown quantization, a quantized decoder and a
// quantized unfused graph are clear errors.
func TestQuantizeRefuses(t *testing.T) {
	cfg := tinyConfig("gelu")
	ts := tinyTensors(cfg, "", 1)
	if _, err := BuildWith(cfg, ts, model.TaskEmbed, BuildOptions{Quantize: "int3"}); err == nil || !strings.Contains(err.Error(), `quantization "int3" not supported (want int8 or int4`) {
		t.Errorf("int3: %v", err)
	}
	if _, err := BuildWith(cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt4}); err == nil || !strings.Contains(err.Error(), "int4 is for decoders") {
		t.Errorf("BERT int4: %v", err)
	}
	if _, err := BuildWith(cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt8, Unfused: true}); err == nil || !strings.Contains(err.Error(), "always fused") {
		t.Errorf("unfused int8: %v", err)
	}
	llama := tinyLlamaConfig()
	if _, err := BuildWith(llama, randomLlama(llama, 1), model.TaskEmbed, BuildOptions{Unfused: true}); err == nil || !strings.Contains(err.Error(), "unfused form is a BERT encoder option") {
		t.Errorf("llama unfused: %v", err)
	}
}

// tinyLlamaConfig is a random Llama small enough for a unit test, with an
// FFN width (80) that is not a multiple of the int4 block (32).
func tinyLlamaConfig() *model.Config {
	return &model.Config{ModelType: "llama", VocabSize: 50, HiddenSize: 64, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		IntermediateSize: 80, MaxPositionEmbeddings: 32, HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 10000}
}

// randomLlama is a Llama checkpoint of cfg's sizes with random weights.
func randomLlama(cfg *model.Config, seed uint64) map[string]*safetensors.Tensor {
	r := rand.New(rand.NewPCG(seed, 3))
	ts := map[string]*safetensors.Tensor{}
	add := func(name string, base, std float64, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(base + std*r.NormFloat64())
		}
		ts[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: d}
	}
	H, I, KV := cfg.HiddenSize, cfg.IntermediateSize, cfg.KVHeads()*cfg.HeadDim()
	add("model.embed_tokens.weight", 0, 1, cfg.VocabSize, H)
	add("model.norm.weight", 1, 0.1, H)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 1, 0.1, H)
		add(p+"post_attention_layernorm.weight", 1, 0.1, H)
		add(p+"self_attn.q_proj.weight", 0, 0.1, H, H)
		add(p+"self_attn.k_proj.weight", 0, 0.1, KV, H)
		add(p+"self_attn.v_proj.weight", 0, 0.1, KV, H)
		add(p+"self_attn.o_proj.weight", 0, 0.1, H, H)
		add(p+"mlp.gate_proj.weight", 0, 0.1, I, H)
		add(p+"mlp.up_proj.weight", 0, 0.1, I, H)
		add(p+"mlp.down_proj.weight", 0, 0.1, H, I)
	}
	return ts
}

// TestQuantizeBlocks4: every weight is within half a step of
// (q − zp)·scale, every block's range maps onto q ∈ [0, 15] (its least
// value to 0, its greatest to 15), a padded tail dequantizes to the row it
// came from, a block of equal values comes back exactly, and so does a
// block already on a Q4_1 grid (min + k·d, as a Q4_1 GGUF dequantizes).
func TestQuantizeBlocks4(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	out, in := 5, 80 // 3 blocks a row, the last half full
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(r.NormFloat64()) * float32(1+i%7)
	}
	for k := 32; k < 64; k++ {
		w[2*in+k] = 0.25                             // row 2's middle block: equal values
		w[3*in+k] = 0.7 - 0.0625*float32(r.IntN(16)) // row 3's: on a Q4_1 grid, min 0.7 − 15/16
	}
	w[3*in+32], w[3*in+33] = 0.7, 0.7-0.0625*15 // the grid's ends present, as Q4_1's quantizer makes them
	packed, scales, zps := quantizeBlocks4(w, out, in)
	if len(packed) != out*3*16 || len(scales) != out*3 || len(zps) != out*3 {
		t.Fatalf("sizes %d, %d, %d; want %d, %d, %d", len(packed), len(scales), len(zps), out*3*16, out*3, out*3)
	}
	got := dequantizeBlocks4(packed, scales, zps, out, in)
	for n := 0; n < out; n++ {
		for k := 0; k < in; k++ {
			step := float64(scales[n*3+k/32])
			if d := math.Abs(float64(w[n*in+k] - got[n*in+k])); d > step/2*(1+1e-5) {
				t.Fatalf("w[%d,%d] = %g dequantizes to %g: %g off, more than half of step %g", n, k, w[n*in+k], got[n*in+k], d, step)
			}
		}
	}
	for k := 32; k < 64; k++ {
		if got[2*in+k] != 0.25 {
			t.Fatalf("equal block: %g comes back as %g", w[2*in+k], got[2*in+k])
		}
		if d := math.Abs(float64(got[3*in+k] - w[3*in+k])); d > 1e-6 {
			t.Fatalf("Q4_1 grid block: %g comes back as %g (%.3g off)", w[3*in+k], got[3*in+k], d)
		}
	}
	for n := 0; n < out; n++ {
		for b := 0; b < 3; b++ {
			if n == 2 && b == 1 {
				continue
			}
			lo, hi := uint8(15), uint8(0)
			for i := 0; i < min(32, in-32*b); i++ {
				q := packed[(n*3+b)*16+i/2] >> (4 * (i % 2)) & 15
				lo, hi = min(lo, q), max(hi, q)
			}
			if lo != 0 || hi != 15 {
				t.Errorf("row %d block %d: q in [%d, %d], want [0, 15]", n, b, lo, hi)
			}
		}
	}
}

// TestQuantizedDecoder: a tiny random Llama's int4 graph runs in ONNX
// Runtime as one MatMulNBits per projection and computes exactly what the
// float32 graph of the weights it dequantizes to computes, its int8
// embedding table included (so its packing is MatMulNBits' layout: a
// nibble out of place would show), close to the float32 graph.
func TestQuantizedDecoder(t *testing.T) {
	needORT(t)
	cfg := tinyLlamaConfig()
	ts := randomLlama(cfg, 9)
	ids, types, mask, B, S := paddedBatch()
	H := cfg.HiddenSize
	shape := ortgo.NewShape(int64(B), int64(S), int64(H))
	run := func(ts map[string]*safetensors.Tensor, q string) []float32 {
		return runModel(t, export(t, cfg, ts, model.TaskEmbed, BuildOptions{Quantize: q}), OutputHidden, ids, types, mask, B, S, shape)
	}
	deq := map[string]*safetensors.Tensor{}
	for name, tn := range ts {
		deq[name] = tn
		switch {
		case strings.HasSuffix(name, "_proj.weight"):
			out, in := tn.Shape[0], tn.Shape[1]
			p, s, z := quantizeBlocks4(tn.Data, out, in)
			deq[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: tn.Shape, Data: dequantizeBlocks4(p, s, z, out, in)}
		case name == "model.embed_tokens.weight":
			deq[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: tn.Shape, Data: dequantizeBlocks8(quantizeBlocks8(tn.Data, tn.Shape[0], tn.Shape[1]))}
		}
	}
	f32, int4, ref := run(ts, ""), run(ts, model.QuantizeInt4), run(deq, "")
	// relRMS is got's relative RMS error against f32 over unpadded tokens.
	relRMS := func(got []float32) float64 {
		var d2, n2 float64
		for i := range got {
			if mask[i/H] != 0 {
				d2 += float64(got[i]-f32[i]) * float64(got[i]-f32[i])
				n2 += float64(f32[i]) * float64(f32[i])
			}
		}
		return math.Sqrt(d2 / n2)
	}
	var exact float64
	for i := range int4 {
		if mask[i/H] != 0 {
			exact = math.Max(exact, math.Abs(float64(int4[i]-ref[i])))
		}
	}
	rel := relRMS(int4)
	t.Logf("int4 vs float32 of its dequantized weights: max abs diff %.3g; relative RMS error vs float32 %.3g", exact, rel)
	if exact > 1e-4 {
		t.Errorf("int4 graph differs from the float32 graph of its dequantized weights by %.3g (want ≤ 1e-4)", exact)
	}
	// Gaussian weights over 15 steps of a block's range are off by ~8 %
	// each (a real Q4 GGUF loses nothing: TestSmolLM2Int4KeepsItsWeights).
	if rel > 0.15 {
		t.Errorf("int4 hidden states' relative RMS error vs float32 %.3g (want ≤ 0.15)", rel)
	}
	ops := optimizedOps(t, export(t, cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt4}), OutputHidden)
	if L := cfg.NumHiddenLayers; ops["com.microsoft.MatMulNBits"] != 7*L {
		t.Errorf("optimized int4 graph has %d MatMulNBits, want %d (one per projection): %s", ops["com.microsoft.MatMulNBits"], 7*L, formatOps(ops))
	}

	// int8: every projection a per-row quantized product (7-bit weights,
	// 8-bit activations of a random model: a few percent off).
	rel = relRMS(run(ts, model.QuantizeInt8))
	t.Logf("int8 vs float32: relative RMS error %.3g", rel)
	if rel > 0.05 {
		t.Errorf("int8 hidden states' relative RMS error vs float32 %.3g (want ≤ 0.05)", rel)
	}
	ops = optimizedOps(t, export(t, cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt8}), OutputHidden)
	if L := cfg.NumHiddenLayers; ops["com.microsoft.MatMulIntegerToFloat"] != 7*L {
		t.Errorf("optimized int8 graph has %d MatMulIntegerToFloat, want %d (one per projection): %s", ops["com.microsoft.MatMulIntegerToFloat"], 7*L, formatOps(ops))
	}
}

// dequantizeBlocks8 is quantizeBlocks8's inverse, q·scale.
func dequantizeBlocks8(q []int8, scales []float32) []float32 {
	w := make([]float32, len(q))
	for i, v := range q {
		w[i] = float32(v) * scales[i/int8Block]
	}
	return w
}

// TestQuantizeBlocks8: within half a step of q·scale, each block's largest
// magnitude at ±127, an all-zero block zero, and a block already on a Q8_0
// grid back exactly.
func TestQuantizeBlocks8(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 7))
	rows, cols := 3, 64
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64()) * float32(1+i%5)
	}
	for i := 32; i < 64; i++ {
		w[i] = 0
		w[cols+i] = 0.01 * float32(r.IntN(255)-127)
	}
	w[cols+40] = 1.27
	q, s := quantizeBlocks8(w, rows, cols)
	got := dequantizeBlocks8(q, s)
	for i := range w {
		if d := math.Abs(float64(w[i] - got[i])); d > float64(s[i/32])/2*(1+1e-6) {
			t.Fatalf("w[%d] = %g comes back as %g", i, w[i], got[i])
		}
	}
	for b := range s {
		peak := int8(0)
		for _, v := range q[b*32 : (b+1)*32] {
			peak = max(peak, v, -v)
		}
		switch {
		case b == 1 && (peak != 0 || s[b] != 1):
			t.Errorf("zero block: peak %d scale %g", peak, s[b])
		case b != 1 && peak != 127:
			t.Errorf("block %d: largest |q| %d, want 127", b, peak)
		}
	}
	for i := cols + 32; i < 2*cols; i++ {
		if math.Abs(float64(got[i]-w[i])) > 1e-6 {
			t.Fatalf("Q8_0 grid: %g comes back as %g", w[i], got[i])
		}
	}
}

// TestSmolLM2Int4KeepsItsWeights: every projection of SmolLM2's Q4_1 GGUF,
// dequantized as gguf-py does (LlamaFromGGUF) and quantized again by
// quantizeBlocks4, comes back on its own grid, and so does its Q8_0 token
// table through quantizeBlocks8: the int4 graph holds the file's weights,
// to float rounding (Q4_1 blocks are 32 along the input, as MatMulNBits'
// are, and llama.cpp's quantizer puts each block's least and greatest
// value at q = 0 and 15; Q8_0's largest magnitude at ±127).
func TestSmolLM2Int4KeepsItsWeights(t *testing.T) {
	f, err := gguf.Open(gguftest.SmolLM2(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts, _, err := LlamaFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	n, worst := 0, 0.0
	for name, tn := range ts {
		if !strings.HasSuffix(name, "_proj.weight") {
			continue
		}
		n++
		out, in := tn.Shape[0], tn.Shape[1]
		p, s, z := quantizeBlocks4(tn.Data, out, in)
		got := dequantizeBlocks4(p, s, z, out, in)
		for i, v := range tn.Data {
			// relative to the block's step, the unit of the grid
			d := math.Abs(float64(got[i]-v)) / float64(s[(i/in)*((in+int4Block-1)/int4Block)+(i%in)/int4Block])
			worst = math.Max(worst, d)
		}
	}
	emb := ts["embed_tokens.weight"]
	q, s := quantizeBlocks8(emb.Data, emb.Shape[0], emb.Shape[1])
	worst8 := 0.0
	for i, v := range dequantizeBlocks8(q, s) {
		worst8 = math.Max(worst8, math.Abs(float64(v-emb.Data[i]))/float64(s[i/int8Block]))
	}
	t.Logf("%d projections: largest |requantized − file| %.3g of a step; token embeddings (Q8_0) %.3g of a step", n, worst, worst8)
	if worst8 > 1e-3 {
		t.Errorf("requantized token embeddings off the file's grid by %.3g of a step", worst8)
	}
	if n != 210 {
		t.Errorf("%d projections, want 210 (30 blocks × 7)", n)
	}
	if worst > 1e-3 {
		t.Errorf("requantized weights off the file's grid by %.3g of a step (want float rounding, ≤ 1e-3)", worst)
	}
}
