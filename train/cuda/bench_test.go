package cuda_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/train"
	"github.com/anna-search/anna/train/cuda"
	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/objective"
)

// BenchmarkTrainStepOnGPU times one training step of an all-MiniLM-L6-v2
// sized BERT (random weights: the time does not depend on them) on the
// GPU, as train.Run takes it with Config.Device — forward, mean pooling,
// InfoNCE on the host, backward, clipping, AdamW — at 32 queries × (1 + 8)
// × 128 tokens (benchmarks' BenchmarkTrainStep on the CPU), in FP32 and
// TF32, and the same step in PyTorch on the same GPU in the same run
// (tools/torch_step_bench.py; python from $ANNA_TORCH_PYTHON, else
// /opt/torch/.venv/bin/python, else $ANNA_HOME's venv). It skips without a
// GPU. ANNA_BENCH_TRAIN_Q changes the queries per step.
func BenchmarkTrainStepOnGPU(b *testing.B) {
	d, err := cuda.Open(context.Background(), cuda.Options{})
	if err != nil {
		b.Skipf("no GPU here: %v", err)
	}
	desc := d.String()
	d.Close()
	Q, G, T := 32, 8, 128
	if v, err := strconv.Atoi(os.Getenv("ANNA_BENCH_TRAIN_Q")); err == nil && v > 0 {
		Q = v
	}
	cfg := &model.Config{ModelType: "bert", VocabSize: 30522, HiddenSize: 384, NumHiddenLayers: 6, NumAttentionHeads: 12,
		IntermediateSize: 1536, MaxPositionEmbeddings: 512, TypeVocabSize: 2, HiddenAct: "gelu", LayerNormEps: 1e-12,
		PositionEmbeddingType: "absolute"}
	tensors := train.RandomTensors(cfg, false, 0.02, 1)
	weights := map[string][]float32{}
	for name, tn := range tensors {
		weights[name] = tn.Data
	}
	N, C := Q+Q*G, cfg.HiddenSize
	r := rand.New(rand.NewPCG(1, 2))
	ids, mask := make([]int32, N*T), make([]float32, N*T)
	for i := range ids {
		ids[i], mask[i] = int32(1000+r.IntN(cfg.VocabSize-1000)), 1
	}
	L, FF := cfg.NumHiddenLayers, cfg.IntermediateSize
	tokens := float64(N * T)
	flops := 3 * (2*tokens*float64(L*(4*C*C+2*C*FF)) + 4*float64(N*L)*float64(T*T*C))
	b.Logf("%s; one step, %d sequences × %d tokens (%.2f TFLOP)", desc, N, T, flops/1e12)

	step := func(math cuda.MathMode) float64 {
		d, err := cuda.Open(context.Background(), cuda.Options{Math: math})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		enc, err := d.TrainEncoder(cfg, "", weights)
		if err != nil {
			b.Fatal(err)
		}
		defer enc.Close()
		cc := train.ContrastiveConfig{Temperature: 0.05, InBatch: true}
		best := 0.0
		for i := 0; i < 4; i++ { // the first warms up (allocations, cuBLAS heuristics)
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := enc.ZeroGrad(); err != nil {
				b.Fatal(err)
			}
			if err := enc.Forward(ids, nil, mask, N, T); err != nil {
				b.Fatal(err)
			}
			e, err := enc.Pool(train.PoolMean)
			if err != nil {
				b.Fatal(err)
			}
			_, _, de, err := objective.ContrastiveStep(e, Q, G, C, nil, cc, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := enc.Backward(train.PoolMean, de); err != nil {
				b.Fatal(err)
			}
			s, err := enc.GradSumSquares()
			if err != nil || s != s {
				b.Fatalf("gradient: Σg² %v, %v", s, err)
			}
			if err := enc.AdamW(2e-5, 0.01, 0.9, 0.999, 1e-8, i+1); err != nil {
				b.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			if sec := time.Since(t0).Seconds(); i > 0 && (best == 0 || sec < best) {
				best = sec
			}
		}
		return best
	}
	var fp32, tf32 float64
	for i := 0; i < b.N; i++ {
		fp32, tf32 = step(cuda.MathFP32), step(cuda.MathTF32)
	}
	b.ReportMetric(fp32*1e3, "fp32-ms/step")
	b.ReportMetric(tf32*1e3, "tf32-ms/step")
	b.ReportMetric(flops/fp32/1e12, "fp32-TFLOP/s")
	b.ReportMetric(flops/tf32/1e12, "tf32-TFLOP/s")

	python := torchPython()
	dir := b.TempDir()
	cj, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join("..", "..", "tools", "torch_step_bench.py")
	for _, m := range []struct {
		name string
		sec  float64
	}{{"fp32", fp32}, {"tf32", tf32}} {
		out, err := exec.Command(python, script, dir, strconv.Itoa(Q), strconv.Itoa(G), strconv.Itoa(T), "4", "cuda", m.name).Output()
		if err != nil {
			b.Logf("PyTorch reference (%s) skipped: %s %s: %v", m.name, python, script, err)
			continue
		}
		var ref struct {
			Seconds float64 `json:"seconds"`
			Name    string  `json:"name"`
		}
		if err := json.Unmarshal(out, &ref); err != nil {
			b.Fatalf("torch_step_bench.py output %q: %v", out, err)
		}
		b.ReportMetric(ref.Seconds*1e3, "torch-"+m.name+"-ms/step")
		b.ReportMetric(m.sec/ref.Seconds, "anna/torch-"+m.name)
		b.Logf("%s: anna %.1f ms (%.1f TFLOP/s), PyTorch on %s %.1f ms: ratio %.2f", m.name, m.sec*1e3, flops/m.sec/1e12,
			ref.Name, ref.Seconds*1e3, m.sec/ref.Seconds)
	}
}

// torchPython is the python that runs the PyTorch references:
// $ANNA_TORCH_PYTHON, else the GPU machines' /opt/torch/.venv, else
// $ANNA_HOME's venv.
func torchPython() string {
	for _, p := range []string{os.Getenv("ANNA_TORCH_PYTHON"), "/opt/torch/.venv/bin/python", filepath.Join(os.Getenv("HOME"), ".cache", "anna", "venv", "bin", "python")} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return "python3"
}

// BenchmarkDecoderStepOnGPU times one LoRA step (rank 64, alpha 32, every
// projection) of a SmolLM2-135M sized decoder (random weights) on the GPU
// as train.Run takes it — forward, last-token pooling, InfoNCE on the host,
// backward, clipping, AdamW — at the decoder issue's 8 × (1 + 1 + 7) × 128
// tokens (ANNA_BENCH_DEC_Q changes the queries), FP32 and TF32, against
// the same step in PyTorch on the same GPU (tools/decoder_step_bench.py:
// transformers' LlamaModel, LoRA applied by hand as peft does). It skips
// without a GPU.
func BenchmarkDecoderStepOnGPU(b *testing.B) {
	d, err := cuda.Open(context.Background(), cuda.Options{})
	if err != nil {
		b.Skipf("no GPU here: %v", err)
	}
	desc := d.String()
	d.Close()
	Q, G, T := 8, 8, 128
	if v, err := strconv.Atoi(os.Getenv("ANNA_BENCH_DEC_Q")); err == nil && v > 0 {
		Q = v
	}
	cfg := &model.Config{ModelType: "llama", VocabSize: 49152, HiddenSize: 576, NumHiddenLayers: 30, NumAttentionHeads: 9,
		NumKeyValueHeads: 3, IntermediateSize: 1536, MaxPositionEmbeddings: 2048, HiddenAct: "silu", RMSNormEps: 1e-5,
		RopeTheta: 100000}
	m, err := decoder.New(cfg, decoder.RandomTensors(cfg, 0.02, 1))
	if err != nil {
		b.Fatal(err)
	}
	if err := m.EnableLoRA(decoder.LoRAConfig{Rank: 64, Alpha: 32}, 1); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range m.Params {
		if !p.Frozen && len(p.Shape) == 2 && p.Shape[1] == 64 { // B: nonzero, as after the first steps
			for i := range p.W {
				p.W[i] = float32(r.NormFloat64() * 0.01)
			}
		}
	}
	N, C := Q+Q*G, cfg.HiddenSize
	ids, mask := make([]int32, N*T), make([]float32, N*T)
	for i := range ids {
		ids[i], mask[i] = int32(1000+r.IntN(cfg.VocabSize-1000)), 1
	}
	nn, t := float64(N), float64(T)
	Cf, F, D := float64(C), float64(cfg.IntermediateSize), float64(cfg.HeadDim())
	Hq, Hk := float64(cfg.NumAttentionHeads)*D, float64(cfg.KVHeads())*D
	proj := 2 * nn * t * (Cf*Hq + 2*Cf*Hk + Hq*Cf + 3*Cf*F)
	flops := float64(cfg.NumHiddenLayers) * (2*proj + 3*2*2*nn*t*t*Hq) // forward + input gradients (frozen base)
	b.Logf("%s; one LoRA step, %d sequences × %d tokens (%.2f TFLOP)", desc, N, T, flops/1e12)

	step := func(math cuda.MathMode) float64 {
		d, err := cuda.Open(context.Background(), cuda.Options{Math: math})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		dec, err := cuda.NewDecoder(d, m)
		if err != nil {
			b.Fatal(err)
		}
		defer dec.Close()
		cc := train.ContrastiveConfig{Temperature: 0.05, InBatch: true}
		best := 0.0
		for i := 0; i < 4; i++ { // the first warms up
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := dec.ZeroGrad(); err != nil {
				b.Fatal(err)
			}
			if err := dec.Forward(ids, nil, mask, N, T); err != nil {
				b.Fatal(err)
			}
			e, err := dec.Pool(decoder.PoolLast)
			if err != nil {
				b.Fatal(err)
			}
			_, _, de, err := objective.ContrastiveStep(e, Q, G, C, nil, cc, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := dec.Backward(decoder.PoolLast, de); err != nil {
				b.Fatal(err)
			}
			if s, err := dec.GradSumSquares(); err != nil || s != s {
				b.Fatalf("gradient: Σg² %v, %v", s, err)
			}
			if err := dec.AdamW(1e-4, 0.01, 0.9, 0.999, 1e-8, i+1); err != nil {
				b.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			if sec := time.Since(t0).Seconds(); i > 0 && (best == 0 || sec < best) {
				best = sec
			}
		}
		return best
	}
	var fp32, tf32 float64
	for i := 0; i < b.N; i++ {
		fp32, tf32 = step(cuda.MathFP32), step(cuda.MathTF32)
	}
	b.ReportMetric(fp32*1e3, "fp32-ms/step")
	b.ReportMetric(tf32*1e3, "tf32-ms/step")
	b.ReportMetric(flops/fp32/1e12, "fp32-TFLOP/s")
	b.ReportMetric(flops/tf32/1e12, "tf32-TFLOP/s")

	dir := b.TempDir()
	cj, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), m.Tensors(), nil); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join("..", "..", "tools", "decoder_step_bench.py")
	for _, mm := range []struct {
		name string
		sec  float64
	}{{"fp32", fp32}, {"tf32", tf32}} {
		out, err := exec.Command(torchPython(), script, dir, strconv.Itoa(Q), strconv.Itoa(G), strconv.Itoa(T), "64", "32", "4", "cuda", mm.name).Output()
		if err != nil {
			b.Logf("PyTorch reference (%s) skipped: %s: %v", mm.name, script, err)
			continue
		}
		var ref struct {
			Seconds float64 `json:"seconds"`
		}
		if err := json.Unmarshal(out, &ref); err != nil {
			b.Fatalf("decoder_step_bench.py output %q: %v", out, err)
		}
		b.ReportMetric(ref.Seconds*1e3, "torch-"+mm.name+"-ms/step")
		b.ReportMetric(mm.sec/ref.Seconds, "anna/torch-"+mm.name)
		b.Logf("%s: anna %.1f ms (%.1f TFLOP/s), PyTorch %.1f ms: ratio %.2f", mm.name, mm.sec*1e3, flops/mm.sec/1e12,
			ref.Seconds*1e3, mm.sec/ref.Seconds)
	}
}
