package onnx

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

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
// as QAttention and DynamicQuantizeMatMul (read back from the optimized
// graph it saves), holds no float32 copy of the quantized weights, and
// gives hidden states and logits close to the float32 graph's: within 0.1
// where the hidden states' std is 1 (8-bit weights and activations of a
// random model; TestQuantizedMiniLM in package encoder checks real text).
func TestQuantizedGraph(t *testing.T) {
	needORT(t)
	ids, types, mask, B, S := paddedBatch()
	for _, act := range []string{"gelu", "relu", "gelu_new"} {
		t.Run(act, func(t *testing.T) {
			cfg := tinyConfig(act)
			cfg.HiddenSize, cfg.IntermediateSize = 64, 128 // enough values per column for 8 bits to be meaningful
			ts := tinyTensors(cfg, "bert.", 5)
			L, H, NL := cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumLabels()
			q := export(t, cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt8})
			ops := optimizedOps(t, q, OutputHidden)
			t.Logf("int8, as ONNX Runtime runs it: %s", formatOps(ops))
			if ops["com.microsoft.QAttention"] != L || ops["com.microsoft.DynamicQuantizeMatMul"] != 3*L || ops["MatMul"] != 0 {
				t.Errorf("optimized int8 graph: %d QAttention, %d DynamicQuantizeMatMul, %d MatMul (want %d, %d, 0)",
					ops["com.microsoft.QAttention"], ops["com.microsoft.DynamicQuantizeMatMul"], ops["MatMul"], L, 3*L)
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
				out, shape := OutputHidden, ortgo.NewShape(int64(B), int64(S), int64(H))
				if task == model.TaskRerank {
					out, shape = OutputLogits, ortgo.NewShape(int64(B), int64(NL))
				}
				f := runModel(t, export(t, cfg, ts, task, BuildOptions{}), out, ids, types, mask, B, S, shape)
				g := runModel(t, export(t, cfg, ts, task, BuildOptions{Quantize: model.QuantizeInt8}), out, ids, types, mask, B, S, shape)
				worst := 0.0
				for i := range f {
					if task == model.TaskEmbed && mask[i/H] == 0 {
						continue
					}
					worst = math.Max(worst, math.Abs(float64(f[i]-g[i])))
				}
				t.Logf("%s: int8 vs float32 max abs diff %.3g", task, worst)
				if worst > 0.1 {
					t.Errorf("%s: int8 outputs differ from float32 by %.3g (want ≤ 0.1; hidden states have std 1)", task, worst)
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
	if _, err := BuildWith(cfg, ts, model.TaskEmbed, BuildOptions{Quantize: "int4"}); err == nil || !strings.Contains(err.Error(), `quantization "int4" not supported (want int8`) {
		t.Errorf("int4: %v", err)
	}
	if _, err := BuildWith(cfg, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt8, Unfused: true}); err == nil || !strings.Contains(err.Error(), "always fused") {
		t.Errorf("unfused int8: %v", err)
	}
	llama := &model.Config{ModelType: "llama", VocabSize: 50, HiddenSize: 16, NumHiddenLayers: 1, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		IntermediateSize: 24, MaxPositionEmbeddings: 32, HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 10000}
	if _, err := BuildWith(llama, ts, model.TaskEmbed, BuildOptions{Quantize: model.QuantizeInt8}); err == nil || !strings.Contains(err.Error(), "not supported for llama decoders") {
		t.Errorf("llama int8: %v", err)
	}
}
