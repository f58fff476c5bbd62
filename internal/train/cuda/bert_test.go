package cuda_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/cuda"
	"github.com/anna-search/anna/train"
)

// The encoder against the Go CPU trainer itself (bert.Model): forward,
// mean pooling, backward into every parameter, a clip and an AdamW step,
// on a tiny random BERT with padded sequences. On the emulator this checks
// that the GPU path strings the ops together as bert.Model does; on a GPU
// it is the full training step's numerics against the CPU.

func TestEncoderMatchesCPUOnEmulator(t *testing.T) {
	compareWithCPU(t, cuda.NewEmulatedDevice(), 2e-5)
}

func TestEncoderMatchesCPUOnGPU(t *testing.T) {
	compareWithCPU(t, cuda.OpenOrSkip(t, cuda.Options{Debug: true}, "the encoder against the CPU"), 1e-4)
}

func compareWithCPU(t *testing.T, d *cuda.Device, tol float64) {
	cfg := testmodels.BERT()
	tensors := bert.RandomTensors(cfg, false, 0.1, 11)
	cpu, err := bert.NewModel(cfg, tensors, false, 11)
	if err != nil {
		t.Fatal(err)
	}
	weights := map[string][]float32{}
	for name, tn := range tensors {
		weights[name] = tn.Data
	}
	enc, err := cuda.NewEncoder(d, cuda.EncoderConfig{Vocab: cfg.VocabSize, Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers,
		Heads: cfg.NumAttentionHeads, FF: cfg.IntermediateSize, MaxPos: cfg.MaxPositionEmbeddings, TypeVocab: cfg.TypeVocabSize,
		Act: cfg.HiddenAct, Eps: float32(cfg.LayerNormEps)}, "", weights)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { enc.Close() }()

	rng := rand.New(rand.NewPCG(5, 6))
	N, T, C := 5, 12, cfg.HiddenSize
	seqs := reftest.PaddedZero(rng, N, T, 2, cfg.VocabSize, func(int) int { return 3 }) // as train/bert's gradient check
	b := &bert.Batch{N: N, T: T, IDs: seqs.IDs, Types: seqs.PairTypes(), Mask: seqs.Mask}
	for n := range N {
		b.IDs[n*T] = 1 // [CLS]
	}

	opt := train.NewAdamW(0.01)
	for step := 1; step <= 3; step++ {
		if step == 3 {
			// Resume: a fresh encoder from the CPU's weights and the device's
			// moments must carry on exactly as the one it replaces.
			fresh, err := cuda.NewEncoder(d, enc.Cfg, "", weightsOf(cpu))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range enc.Params {
				m, v, err := p.Moments()
				if err != nil || m == nil {
					t.Fatalf("%s moments: %v (nil: %v)", p.Name, err, m == nil)
				}
				if err := fresh.Param(p.Name).SetMoments(d, m, v); err != nil {
					t.Fatal(err)
				}
			}
			enc.Close()
			enc = fresh
		}
		a, err := cpu.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Forward(b.IDs, b.Types, b.Mask, N, T); err != nil {
			t.Fatal(err)
		}
		hid := make([]float32, N*T*C)
		if err := cuda.Download(hid, enc.Hidden()); err != nil {
			t.Fatal(err)
		}
		reftest.Close(t, "hidden state", hid, a.Hidden, tol, 0)
		want, err := cpu.Pool(a, train.PoolMean)
		if err != nil {
			t.Fatal(err)
		}
		got, err := enc.Pool(train.PoolMean)
		if err != nil {
			t.Fatal(err)
		}
		reftest.Close(t, "mean pooled", got, want, tol, 0)

		dp := make([]float32, N*C)
		for i := range dp {
			dp[i] = float32(rng.NormFloat64())
		}
		cpu.ZeroGrad()
		dh := make([]float32, N*T*C)
		cpu.PoolBackward(a, train.PoolMean, dp, dh)
		cpu.Backward(a, dh)
		if err := enc.ZeroGrad(); err != nil {
			t.Fatal(err)
		}
		if err := enc.Backward(train.PoolMean, dp); err != nil {
			t.Fatal(err)
		}
		// The key bias's gradient is zero in exact arithmetic (a softmax
		// does not see a constant added to every score of a row), so both
		// sides hold rounding noise: gradients are compared against a floor
		// of 1e-3 of the global gradient norm, and the key biases' AdamW
		// updates (which turn that noise into full-size steps) are skipped.
		var gn float64
		for _, p := range cpu.Params {
			for _, g := range p.G {
				gn += float64(g) * float64(g)
			}
		}
		floor := 1e-3 * math.Sqrt(gn)
		compared := 0
		for _, p := range cpu.Params {
			gp := enc.Param(p.Name)
			if p.Frozen {
				if gp != nil {
					t.Errorf("%s is frozen on the CPU but trained on the device", p.Name)
				}
				continue
			}
			if gp == nil {
				t.Errorf("%s is trained on the CPU, missing on the device", p.Name)
				continue
			}
			g, err := gp.Download(true)
			if err != nil {
				t.Fatal(err)
			}
			reftest.Close(t, "gradient of "+p.Name, g, p.G, tol, floor)
			compared++
		}
		if compared != len(enc.Params) {
			t.Errorf("compared %d gradients, the encoder has %d parameters", compared, len(enc.Params))
		}

		norm := train.ClipGradNorm(cpu.Params, 1.0)
		dnorm, err := enc.ClipGradNorm(1.0)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(norm-dnorm) > tol*norm {
			t.Errorf("gradient norm %v on the device, %v on the CPU", dnorm, norm)
		}
		opt.Update(cpu.Params, 1e-3)
		if err := enc.AdamW(1e-3, 0.01, 0.9, 0.999, 1e-8, step); err != nil {
			t.Fatal(err)
		}
		for _, p := range cpu.Params {
			if gp := enc.Param(p.Name); gp != nil && !strings.HasSuffix(p.Name, "attention.self.key.bias") {
				w, err := gp.Download(false)
				if err != nil {
					t.Fatal(err)
				}
				reftest.Close(t, "updated "+p.Name, w, p.W, tol, 0)
			}
		}
	}
}

func weightsOf(m *bert.Model) map[string][]float32 {
	w := map[string][]float32{}
	for _, p := range m.Params {
		w[p.Name] = append([]float32(nil), p.W...)
	}
	return w
}
