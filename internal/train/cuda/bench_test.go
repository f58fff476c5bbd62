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

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/cuda"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
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
	tensors := bert.RandomTensors(cfg, false, 0.02, 1)
	weights := map[string][]float32{}
	for name, tn := range tensors {
		weights[name] = tn.Data
	}
	N, C := Q+Q*G, cfg.HiddenSize
	L, FF := cfg.NumHiddenLayers, cfg.IntermediateSize
	tokens := float64(N * T)
	flops := 3 * (2*tokens*float64(L*(4*C*C+2*C*FF)) + 4*float64(N*L)*float64(T*T*C))
	b.Logf("%s; one step, %d sequences × %d tokens (%.2f TFLOP)", desc, N, T, flops/1e12)
	sb := stepBench{Q: Q, G: G, T: T, C: C, pool: train.PoolMean, lr: 2e-5, flops: flops,
		build: func(d *cuda.Device) (train.DeviceEncoder, error) { return d.TrainEncoder(cfg, "", weights, nil) }}
	sb.run(b, cfg, tensors, "torch_step_bench.py")
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

// BenchmarkDecoderStepOnGPU times one step of a SmolLM2-135M sized decoder
// (random weights) on the GPU as train.Run takes it — forward, last-token
// pooling, InfoNCE on the host, backward, clipping, AdamW — under LoRA
// (rank 64, alpha 32, every projection) and fully fine-tuned, at the
// decoder issue's 8 × (1 + 1 + 7) × 128 tokens (ANNA_BENCH_DEC_Q changes
// the queries), FP32 and TF32, against the same step in PyTorch on the
// same GPU (tools/decoder_step_bench.py: transformers' LlamaModel, LoRA
// applied by hand as peft does, or every parameter trained). It skips
// without a GPU.
func BenchmarkDecoderStepOnGPU(b *testing.B) {
	b.Run("lora-r64", func(b *testing.B) { decoderStepOnGPU(b, 64) })
	b.Run("full", func(b *testing.B) { decoderStepOnGPU(b, 0) })
}

// decoderStepOnGPU is BenchmarkDecoderStepOnGPU at one LoRA rank (0: full
// fine-tuning).
func decoderStepOnGPU(b *testing.B, rank int) {
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
	if rank > 0 {
		if err := m.EnableLoRA(decoder.LoRAConfig{Rank: rank, Alpha: 32}, 1); err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for _, p := range m.Params {
			if !p.Frozen && len(p.Shape) == 2 && p.Shape[1] == rank { // B: nonzero, as after the first steps
				for i := range p.W {
					p.W[i] = float32(r.NormFloat64() * 0.01)
				}
			}
		}
	}
	N, C := Q+Q*G, cfg.HiddenSize
	nn, t := float64(N), float64(T)
	Cf, F, D := float64(C), float64(cfg.IntermediateSize), float64(cfg.HeadDim())
	Hq, Hk := float64(cfg.NumAttentionHeads)*D, float64(cfg.KVHeads())*D
	proj := 2 * nn * t * (Cf*Hq + 2*Cf*Hk + Hq*Cf + 3*Cf*F)
	passes, what := 2.0, "LoRA r"+strconv.Itoa(rank) // forward + input gradients (frozen base)
	if rank == 0 {
		passes, what = 3, "fully fine-tuned" // + weight gradients
	}
	flops := float64(cfg.NumHiddenLayers) * (passes*proj + 3*2*2*nn*t*t*Hq)
	b.Logf("%s; one %s step, %d sequences × %d tokens (%.2f TFLOP)", desc, what, N, T, flops/1e12)
	sb := stepBench{Q: Q, G: G, T: T, C: C, pool: decoder.PoolLast, lr: 1e-4, flops: flops,
		build: func(d *cuda.Device) (train.DeviceEncoder, error) { return d.TrainDecoder(m) }}
	sb.run(b, cfg, m.Tensors(), "decoder_step_bench.py", strconv.Itoa(rank), "32")
}

// stepBench is what both benchmarks time: one training step of a device
// model as train.Run takes it (forward, pooling, InfoNCE on the host,
// backward, the clipping norm, AdamW), over N = Q·(1+G) sequences of T
// random tokens.
type stepBench struct {
	Q, G, T, C int
	pool       string
	lr         float64
	flops      float64
	// build puts the model on a device.
	build func(*cuda.Device) (train.DeviceEncoder, error)
}

// best is the fastest of three steps after a warm-up (allocations, cuBLAS
// heuristics) on a fresh device with the given math.
func (sb stepBench) best(b *testing.B, math cuda.MathMode) float64 {
	d, err := cuda.Open(context.Background(), cuda.Options{Math: math})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	m, err := sb.build(d)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	N := sb.Q + sb.Q*sb.G
	r := rand.New(rand.NewPCG(1, 2))
	ids, mask := make([]int32, N*sb.T), make([]float32, N*sb.T)
	for i := range ids {
		ids[i], mask[i] = int32(1000+r.IntN(20000)), 1
	}
	cc := train.ContrastiveConfig{Temperature: 0.05, InBatch: true}
	best := 0.0
	for i := 0; i < 4; i++ {
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := m.ZeroGrad(); err != nil {
			b.Fatal(err)
		}
		if err := m.Forward(ids, nil, mask, N, sb.T); err != nil {
			b.Fatal(err)
		}
		e, err := m.Pool(sb.pool)
		if err != nil {
			b.Fatal(err)
		}
		_, _, de, err := objective.ContrastiveStep(e, sb.Q, sb.G, sb.C, nil, cc, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Backward(sb.pool, de); err != nil {
			b.Fatal(err)
		}
		if s, err := m.GradSumSquares(); err != nil || s != s {
			b.Fatalf("gradient: Σg² %v, %v", s, err)
		}
		if err := m.AdamW(sb.lr, 0.01, 0.9, 0.999, 1e-8, i+1); err != nil {
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

// run times the step in FP32 and TF32 and the PyTorch reference on the
// same GPU (script with args, then "4 cuda fp32|tf32"), writing cfg and
// tensors where the script reads them, and reports every figure.
func (sb stepBench) run(b *testing.B, cfg *model.Config, tensors map[string]*safetensors.Tensor, script string, args ...string) {
	var fp32, tf32 float64
	for i := 0; i < b.N; i++ {
		fp32, tf32 = sb.best(b, cuda.MathFP32), sb.best(b, cuda.MathTF32)
	}
	b.ReportMetric(fp32*1e3, "fp32-ms/step")
	b.ReportMetric(tf32*1e3, "tf32-ms/step")
	b.ReportMetric(sb.flops/fp32/1e12, "fp32-TFLOP/s")
	b.ReportMetric(sb.flops/tf32/1e12, "tf32-TFLOP/s")
	dir := b.TempDir()
	cj, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
		b.Fatal(err)
	}
	script = filepath.Join("..", "..", "..", "tools", script)
	for _, m := range []struct {
		name string
		sec  float64
	}{{"fp32", fp32}, {"tf32", tf32}} {
		a := append(append([]string{script, dir, strconv.Itoa(sb.Q), strconv.Itoa(sb.G), strconv.Itoa(sb.T)}, args...), "4", "cuda", m.name)
		out, err := exec.Command(torchPython(), a...).Output()
		if err != nil {
			b.Logf("PyTorch reference (%s) skipped: %s: %v", m.name, script, err)
			continue
		}
		var ref struct {
			Seconds float64 `json:"seconds"`
		}
		if err := json.Unmarshal(out, &ref); err != nil {
			b.Fatalf("%s output %q: %v", script, out, err)
		}
		b.ReportMetric(ref.Seconds*1e3, "torch-"+m.name+"-ms/step")
		b.ReportMetric(m.sec/ref.Seconds, "anna/torch-"+m.name)
		b.Logf("%s: anna %.1f ms (%.1f TFLOP/s), PyTorch %.1f ms: ratio %.2f", m.name, m.sec*1e3, sb.flops/m.sec/1e12,
			ref.Seconds*1e3, m.sec/ref.Seconds)
	}
}
