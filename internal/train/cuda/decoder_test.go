package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/cuda"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/train"
)

// The device decoder against the CPU trainer's (train/decoder.Model) under
// LoRA and fully fine-tuned (every weight, gain, bias and the token
// embedding), with and without gradient checkpointing: tiny random Llama (grouped-query attention), Qwen2 (QKV biases) and
// Qwen3 (q/k norms, a head width that is not hidden/heads), causal and
// bidirectional, last-token and mean pooling, and the trainable heads
// (latent, multi-layer) run on the host over the rows the device returns
// (decoder.Model.HeadForward, as train.Run's device path does), right-padded
// sequences: hidden states at the real positions, pooled vectors, every
// trained parameter's gradient, the clipped norm and the parameters after
// AdamW, three steps.

// 1e-4 (the encoder's emulator test holds 2e-5): the CPU sums RMSNorm in
// float64 and orders its products differently, and three AdamW steps (about
// ±lr per element at first) carry the difference into the next forwards;
// Qwen3's q/k norms reach 5e-5. A wrong op is off by O(1).
func TestDecoderMatchesCPUOnEmulator(t *testing.T) {
	decoderMatchesCPU(t, cuda.NewEmulatedDevice(), 1e-4)
}

func TestDecoderMatchesCPUOnGPU(t *testing.T) {
	decoderMatchesCPU(t, cuda.OpenOrSkip(t, cuda.Options{Debug: true}, "the decoder against the CPU"), 1e-4)
}

func decoderMatchesCPU(t *testing.T, d *cuda.Device, tol float64) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, causal := range []bool{true, false} {
			for _, pool := range []string{decoder.PoolLast, decoder.PoolMean, decoder.PoolLatent, decoder.PoolMultiLayer} {
				t.Run(fmt.Sprintf("%s/causal=%v/%s", arch, causal, pool), func(t *testing.T) {
					oneDecoder(t, d, arch, causal, pool, true, false, tol)
				})
			}
		}
		for _, c := range []struct {
			causal bool
			pool   string
		}{{true, decoder.PoolLast}, {false, decoder.PoolMean}, {true, decoder.PoolMultiLayer}, {false, decoder.PoolLatent}} {
			t.Run(fmt.Sprintf("%s/full/causal=%v/%s", arch, c.causal, c.pool), func(t *testing.T) {
				oneDecoder(t, d, arch, c.causal, c.pool, false, false, tol)
			})
		}
		// gradient checkpointing: one layer's activations on the device
		t.Run(arch+"/recompute/lora/causal=true/lasttoken", func(t *testing.T) {
			oneDecoder(t, d, arch, true, decoder.PoolLast, true, true, tol)
		})
		t.Run(arch+"/recompute/full/causal=false/multilayer", func(t *testing.T) {
			oneDecoder(t, d, arch, false, decoder.PoolMultiLayer, false, true, tol)
		})
	}
}

func oneDecoder(t *testing.T, d *cuda.Device, arch string, causal bool, pool string, lora, recompute bool, tol float64) {
	cfg := testmodels.Decoder(arch)
	headPool := pool == decoder.PoolLatent || pool == decoder.PoolMultiLayer
	// build makes the CPU reference and, for a head, the host model whose
	// head runs beside the device (the same weights).
	build := func() *decoder.Model {
		m, err := decoder.New(cfg, decoder.RandomTensors(cfg, 0.1, 11))
		if err != nil {
			t.Fatal(err)
		}
		m.Causal, m.Recompute = causal, recompute
		if headPool {
			if err := m.EnableHead(decoder.HeadConfig{Mode: pool, Latents: 3, Heads: 4}, 2); err != nil {
				t.Fatal(err)
			}
		}
		if !lora {
			return m
		}
		if err := m.EnableLoRA(decoder.LoRAConfig{Rank: 4, Alpha: 8}, 3); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for _, p := range m.Params {
			// lora_B is zero at init: give A a gradient; so are the head's
			// layer weights and biases.
			if strings.HasSuffix(p.Name, ".lora_B.weight") || strings.HasPrefix(p.Name, "pooling.") {
				reftest.Fill(rng, 0.1, p.W)
			}
		}
		return m
	}
	cpu, host := build(), build()
	rng := rand.New(rand.NewPCG(5, 7))
	dev, err := cuda.NewDecoder(d, host)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if len(dev.Params) == 0 {
		t.Fatal("nothing trains on the device")
	}

	N, T, C := 5, 9, cfg.HiddenSize
	seqs := reftest.Padded(rng, N, T, 0, cfg.VocabSize, nil) // as train/decoder's gradient check
	b := &decoder.Batch{N: N, T: T, IDs: seqs.IDs, Mask: seqs.Mask}
	lens := seqs.Lens
	opt, hostOpt := train.NewAdamW(0.01), train.NewAdamW(0.01)
	for step := 1; step <= 3; step++ {
		a, err := cpu.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.Forward(b.IDs, nil, b.Mask, N, T); err != nil {
			t.Fatal(err)
		}
		hid := make([]float32, N*T*C)
		if err := cuda.Download(hid, dev.Hidden()); err != nil {
			t.Fatal(err)
		}
		var gotReal, wantReal []float32 // padded positions hold values nothing reads
		for n := 0; n < N; n++ {
			gotReal = append(gotReal, hid[n*T*C:(n*T+lens[n])*C]...)
			wantReal = append(wantReal, a.Hidden[n*T*C:(n*T+lens[n])*C]...)
		}
		reftest.Close(t, "hidden state", gotReal, wantReal, tol, 0)
		want, err := cpu.Pool(a, pool)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.Pool(pool)
		if err != nil {
			t.Fatal(err)
		}
		var ha *decoder.Acts
		if headPool {
			if ha, got, err = host.HeadForward(pool, got, b); err != nil {
				t.Fatal(err)
			}
		}
		reftest.Close(t, "pooled", got, want, tol, 0)

		dp := make([]float32, N*C)
		for i := range dp {
			dp[i] = float32(rng.NormFloat64())
		}
		cpu.ZeroGrad()
		dh := make([]float32, N*T*C)
		cpu.PoolBackward(a, pool, dp, dh)
		cpu.Backward(a, dh)
		if err := dev.ZeroGrad(); err != nil {
			t.Fatal(err)
		}
		host.ZeroGrad()
		dd := dp
		if headPool {
			dd = host.HeadBackward(ha, dp)
		}
		if err := dev.Backward(pool, dd); err != nil {
			t.Fatal(err)
		}
		compared := 0
		for _, p := range cpu.HeadParams() {
			reftest.Close(t, "gradient of "+p.Name, host.Param(p.Name).G, p.G, tol, 0)
		}
		for _, p := range cpu.Params {
			if strings.HasPrefix(p.Name, "pooling.") { // compared above
				continue
			}
			gp := dev.Param(p.Name)
			if p.Frozen {
				if gp != nil {
					t.Errorf("%s is frozen on the CPU but trained on the device", p.Name)
				}
				continue
			}
			if gp == nil {
				t.Fatalf("%s trains on the CPU, missing on the device", p.Name)
			}
			g, err := gp.Download(true)
			if err != nil {
				t.Fatal(err)
			}
			reftest.Close(t, "gradient of "+p.Name, g, p.G, tol, 0)
			compared++
		}
		if compared != len(dev.Params) {
			t.Errorf("compared %d gradients, the device trains %d", compared, len(dev.Params))
		}
		norm := train.ClipGradNorm(cpu.Params, 1.0)
		var dnorm float64
		if headPool { // one norm over the device's gradients and the host head's
			ss, err := dev.GradSumSquares()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range host.HeadParams() {
				for _, g := range p.G {
					ss += float64(g) * float64(g)
				}
			}
			dnorm = math.Sqrt(ss)
			c := float32(1 / (dnorm + 1e-6)) // train's clip factor at max norm 1 (every norm here is above it)
			if err := dev.ScaleGrads(c); err != nil {
				t.Fatal(err)
			}
			for _, p := range host.HeadParams() {
				for i := range p.G {
					p.G[i] *= c
				}
			}
			hostOpt.Update(host.HeadParams(), 1e-3)
		} else if dnorm, err = dev.ClipGradNorm(1.0); err != nil {
			t.Fatal(err)
		}
		if math.Abs(norm-dnorm) > tol*norm {
			t.Errorf("gradient norm %v on the device, %v on the CPU", dnorm, norm)
		}
		if norm <= 1 {
			t.Fatalf("gradient norm %v: the test wants clipping to happen", norm)
		}
		opt.Update(cpu.Params, 1e-3)
		if err := dev.AdamW(1e-3, 0.01, 0.9, 0.999, 1e-8, step); err != nil {
			t.Fatal(err)
		}
		for _, p := range cpu.HeadParams() {
			reftest.Close(t, "updated "+p.Name, host.Param(p.Name).W, p.W, tol, 0)
		}
		for _, p := range dev.Params {
			w, err := p.Download(false)
			if err != nil {
				t.Fatal(err)
			}
			reftest.Close(t, "updated "+p.Name, w, cpu.Param(p.Name).W, tol, 0)
		}
	}
}
