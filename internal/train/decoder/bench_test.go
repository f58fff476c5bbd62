package decoder_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

// stepFLOPs counts the matrix products of one LoRA training step of a
// decoder over N sequences of T tokens: the forward (projections, causal
// attention scores and mixing, counted in full as computed), and the
// backward's input gradients (the same again; frozen weights get no
// weight gradient) — the LoRA factors' own products are left out (a few
// percent at rank 64).
func stepFLOPs(c *model.Config, N, T int) float64 {
	n, t := float64(N), float64(T)
	C, F, D := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.HeadDim())
	Hq, Hk := float64(c.NumAttentionHeads)*D, float64(c.KVHeads())*D
	proj := 2 * n * t * (C*Hq + 2*C*Hk + Hq*C + 3*C*F)
	att := 2 * 2 * n * t * t * Hq
	return float64(c.NumHiddenLayers) * (2*proj + 3*att)
}

// BenchmarkSmolLM2LoRAStep times one LoRA step (rank 64, alpha 32, every
// projection) of SmolLM2-135M from its GGUF file — forward, last-token
// pooling, InfoNCE, backward, clipping, AdamW — over Q×(1+G) sequences of
// T tokens (BENCH_Q, BENCH_G, BENCH_T; default 4, 4, 128; the size is
// 8, 8, 128), against the same step in PyTorch CPU
// (tools/decoder_step_bench.py) in the same run (BENCH_NO_TORCH skips it;
// BENCH_RECOMPUTE times the step with recomputation; BENCH_KEEP_BASE=1
// keeps the base projections in the file's Q4_1 as training does, =0
// widens them to float32). It reports the process's peak resident memory
// and the heap the model and its workspace hold after the step.
// Run it with -benchtime=1x: every b.N round runs the PyTorch step again.
func BenchmarkSmolLM2LoRAStep(b *testing.B) {
	env := func(k string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return def
	}
	Q, G, T := env("BENCH_Q", 4), env("BENCH_G", 4), env("BENCH_T", 128)
	dir := b.TempDir()
	keep := os.Getenv("BENCH_KEEP_BASE") != "0"
	m, err := decoder.Load(gguftest.SmolLM2(b, dir), decoder.LoadOptions{KeepBase: keep})
	if err != nil {
		b.Fatal(err)
	}
	noTorch := os.Getenv("BENCH_NO_TORCH") != ""
	recompute := os.Getenv("BENCH_RECOMPUTE") != ""
	m.Recompute = recompute
	src := filepath.Join(dir, "hf")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	cj, _ := json.Marshal(m.Cfg)
	if err := os.WriteFile(filepath.Join(src, "config.json"), cj, 0o644); err != nil {
		b.Fatal(err)
	}
	if !noTorch { // the float32 checkpoint PyTorch loads
		if err := safetensors.WriteFile(filepath.Join(src, "model.safetensors"), m.Tensors(), nil); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		debug.FreeOSMemory()
	}
	if err := m.EnableLoRA(decoder.LoRAConfig{Rank: 64, Alpha: 32}, 1); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, p := range m.Params {
		if !p.Frozen && p.Shape[1] == 64 {
			for i := range p.W {
				p.W[i] = float32(0.01 * r.NormFloat64())
			}
		}
	}
	N := Q + Q*G
	batch := &decoder.Batch{N: N, T: T, IDs: make([]int32, N*T), Mask: make([]float32, N*T)}
	for i := range batch.IDs {
		batch.IDs[i], batch.Mask[i] = int32(1000+r.IntN(m.Cfg.VocabSize-1000)), 1
	}
	opt := train.NewAdamW(0.01)
	step := func() time.Duration {
		t0 := time.Now()
		m.ZeroGrad()
		if _, err := objective.ContrastiveGrad(m.Pass(batch, decoder.PoolLast), batch.N, Q, G, m.Cfg.HiddenSize, nil, objective.ContrastiveConfig{Temperature: 0.05, InBatch: true}, 1); err != nil {
			b.Fatal(err)
		}
		train.ClipGradNorm(m.Params, 1)
		opt.Update(m.Params, 1e-4)
		return time.Since(t0)
	}
	step() // warm: the workspace is allocated once
	b.ResetTimer()
	best := time.Duration(1 << 62)
	for i := 0; i < b.N; i++ {
		best = min(best, step())
	}
	b.StopTimer()
	goSec := best.Seconds()
	flops := stepFLOPs(&m.Cfg, N, T)
	b.ReportMetric(goSec, "go-s/step")
	b.ReportMetric(flops/goSec/1e9, "go-GFLOP/s")
	// The same-run GEMM rate, at the step's largest product (the MLP's
	// gate/up projection over every token), as the step's ceiling.
	{
		rows, C, F := N*T, m.Cfg.HiddenSize, m.Cfg.IntermediateSize
		x, w, c := make([]float32, rows*C), make([]float32, F*C), make([]float32, rows*F)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		tensor.Gemm(false, true, rows, F, C, 1, x, C, w, C, 0, c, F, 0)
		t0 := time.Now()
		for range 3 {
			tensor.Gemm(false, true, rows, F, C, 1, x, C, w, C, 0, c, F, 0)
		}
		gemm := 3 * 2 * float64(rows) * float64(F) * float64(C) / time.Since(t0).Seconds() / 1e9
		b.ReportMetric(gemm, "gemm-GFLOP/s")
		b.ReportMetric(flops/goSec/1e9/gemm, "step/gemm")
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB") // Linux: KiB
	}
	// What the model and its workspace hold (the peak also counts garbage
	// the collector had not yet freed).
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MB")
	runtime.KeepAlive(m)
	if noTorch {
		return
	}
	// PyTorch needs the memory the Go step holds (15 GB at 8×9×128).
	m, batch, opt, step = nil, nil, nil, nil
	runtime.GC()
	debug.FreeOSMemory()
	python := filepath.Join(home.Dir(), "venv", "bin", "python")
	script, _ := filepath.Abs(filepath.Join("..", "..", "..", "tools", "decoder_step_bench.py"))
	out, err := exec.Command(python, script, src, strconv.Itoa(Q), strconv.Itoa(G), strconv.Itoa(T), "64", "32", "2").Output()
	if err != nil {
		b.Logf("PyTorch reference skipped: decoder_step_bench.py: %v", err)
		return
	}
	var ref struct {
		Seconds float64 `json:"seconds"`
		Threads int     `json:"threads"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		b.Fatalf("decoder_step_bench.py output %q: %v", out, err)
	}
	b.ReportMetric(ref.Seconds, "torch-s/step")
	b.ReportMetric(goSec/ref.Seconds, "go/torch")
	b.Logf("SmolLM2 LoRA r64 step, %d×%d tokens (%.2f TFLOP): Go %.2fs (%.1f GFLOP/s, recompute %v, base kept %v), PyTorch %.2fs on %d threads (%.1f GFLOP/s): ratio %.2f (goal ≤ 1.0)",
		N, T, flops/1e12, goSec, flops/goSec/1e9, recompute, keep, ref.Seconds, ref.Threads, flops/ref.Seconds/1e9, goSec/ref.Seconds)
}
