package cuda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/cuda"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/technique/anchor"
	"github.com/anna-search/anna/internal/train/technique/autoregembed"
	"github.com/anna-search/anna/internal/train/technique/causal2vec"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

// train.Run with Config.Device: the whole loop (batches, the loss on the
// host, clipping and AdamW on the device, held-out evaluations,
// checkpoints, resume, export) against the same run on the CPU path. A run
// stopped on one side and resumed on the other ends where the uninterrupted
// run ends, so the checkpoint carries the device's weights and moments
// both ways. On the emulator this checks the seam and the Go side; on a GPU,
// the training run's numerics.

// runCases: a BERT bi-encoder and cross-encoder (its head on the host)
// with each objective, fully fine-tuned, and under LoRA; a decoder (Llama
// with grouped-query attention) fully fine-tuned, with last-token pooling,
// with the multi-layer head and with gradient checkpointing; and under LoRA, causal with last-token pooling,
// bidirectional with mean pooling, with each trainable pooling head
// (trained on the host beside the device), and under the papers'
// techniques: Anchor's stage I, AutoRegEmbed's two stages (E, the frozen
// decoder and the reference encoder on the device, the memory tokens on the
// host), and Causal2Vec with a frozen context encoder or a trained one (a
// small BERT under LoRA, on the host) — the technique's passes on the
// device, its own parameters on the host.
var runCases = []struct {
	name, objective, pooling string
	decoder, bidirectional   bool
	tweak                    func(t *testing.T, c *train.Config)
}{
	{name: "bert/contrastive", objective: train.ObjectiveContrastive},
	{name: "bert/listwise", objective: train.ObjectiveListwise},
	{name: "bert/bce", objective: train.ObjectiveBCE},
	{name: "bert-lora/contrastive", objective: train.ObjectiveContrastive, tweak: bertLoRA},
	{name: "bert-lora/listwise", objective: train.ObjectiveListwise, tweak: bertLoRA},
	{name: "llama-lora/lasttoken", objective: train.ObjectiveContrastive, decoder: true},
	{name: "llama-lora/bidirectional-mean", objective: train.ObjectiveContrastive, decoder: true, bidirectional: true, pooling: train.PoolMean},
	{name: "llama-lora/multilayer-head", objective: train.ObjectiveContrastive, decoder: true, pooling: train.PoolMultiLayer},
	{name: "llama-lora/latent-head", objective: train.ObjectiveContrastive, decoder: true, pooling: train.PoolLatent},
	{name: "llama-full/lasttoken", objective: train.ObjectiveContrastive, decoder: true, tweak: decoderFull},
	{name: "llama-full/multilayer-head", objective: train.ObjectiveContrastive, decoder: true, pooling: train.PoolMultiLayer, tweak: decoderFull},
	{name: "llama-full/recompute", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		decoderFull(t, c)
		c.Recompute = true // gradient checkpointing on both sides
	}},
	{name: "llama-full/anchor", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		decoderFull(t, c)
		c.Technique, c.DistillWeight = anchor.Method{}, 0
	}},
	{name: "llama-full/autoregembed-compress", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		decoderFull(t, c)
		c.ModelDir, c.Technique, c.DistillWeight, c.NoExport = tinyLlamaTied(t), autoregembed.Method{Stage: autoregembed.Compression}, 0, true
	}},
	{name: "llama-full/causal2vec", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		decoderFull(t, c)
		c.Technique, c.NoExport = causal2vec.Method{Encode: testmodels.Letters, Dim: 8}, true
	}},
	{name: "llama-lora/anchor", objective: train.ObjectiveContrastive, decoder: true, tweak: func(_ *testing.T, c *train.Config) {
		c.Technique, c.DistillWeight = anchor.Method{}, 0 // stage I has no distillation term
	}},
	{name: "llama-lora/causal2vec", objective: train.ObjectiveContrastive, decoder: true, tweak: func(_ *testing.T, c *train.Config) {
		c.Technique, c.NoExport = causal2vec.Method{Encode: testmodels.Letters, Dim: 8}, true
	}},
	{name: "llama-lora/autoregembed-compress", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		c.ModelDir, c.Technique, c.DistillWeight, c.NoExport = tinyLlamaTied(t), autoregembed.Method{Stage: autoregembed.Compression}, 0, true
	}},
	{name: "llama-lora/autoregembed-align", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		// stage 2 from a short stage 1 on the CPU
		stage1 := train.Config{ModelDir: tinyLlamaTied(t), Data: c.Data, OutDir: t.TempDir(), Technique: autoregembed.Method{Stage: autoregembed.Compression},
			BatchSize: 4, GroupSize: 3, MaxSteps: 2, LR: 1e-3, Seed: 3, EvalFraction: -1, LoRA: &train.LoRAConfig{Rank: 4}, NoExport: true}
		if _, err := train.Run(context.Background(), stage1); err != nil {
			t.Fatal(err)
		}
		c.ModelDir, c.Technique, c.DistillWeight, c.NoExport = stage1.ModelDir, autoregembed.Method{Stage: autoregembed.Alignment, Stage1: stage1.OutDir}, 0, true
	}},
	{name: "llama-lora/causal2vec-trained-context", objective: train.ObjectiveContrastive, decoder: true, tweak: func(t *testing.T, c *train.Config) {
		c.Technique, c.NoExport = causal2vec.Method{Train: &causal2vec.ContextTrain{Checkpoint: tinyBERT(t), LoRA: &bert.LoRAConfig{Rank: 2}, Pooling: train.PoolMean, Normalize: true, MaxLength: 32}}, true
	}},
}

func TestRunOnEmulatorMatchesCPU(t *testing.T) {
	for _, c := range runCases {
		t.Run(c.name, func(t *testing.T) {
			runMatchesCPU(t, cuda.NewEmulatedDevice(), c.decoder, c.bidirectional, c.objective, c.pooling, c.tweak, 1e-4)
		})
	}
}

func TestRunOnGPUMatchesCPU(t *testing.T) {
	d := cuda.OpenOrSkip(t, cuda.Options{}, "train.Run on the device against the CPU")
	for _, c := range runCases {
		t.Run(c.name, func(t *testing.T) {
			runMatchesCPU(t, d, c.decoder, c.bidirectional, c.objective, c.pooling, c.tweak, 1e-3)
		})
	}
}

// tinyLlama writes a random 2-layer Llama (4 query heads over 2 key/value
// heads) with the MiniLM tokenizer.
func tinyLlama(t *testing.T) string {
	cfg := testmodels.MiniLMVocab(testmodels.Decoder("llama"))
	return testmodels.Checkpoint(t, cfg, decoder.RandomTensors(cfg, 0.02, 7))
}

// bertLoRA puts LoRA factors on every linear layer of the BERT encoder
// (its own weights frozen; a cross-encoder's head still trained, on the
// host).
func bertLoRA(_ *testing.T, c *train.Config) {
	c.LoRA = &train.LoRAConfig{Rank: 4, Targets: []string{"query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"}}
}

// decoderFull fully fine-tunes the decoder: every weight and the token
// embedding trained on the device.
func decoderFull(_ *testing.T, c *train.Config) { c.LoRA = nil }

// tinyLlamaTied is tinyLlama with its LM head tied to the embedding, as
// SmolLM2's (AutoRegEmbed's frozen decoder generates through it).
func tinyLlamaTied(t *testing.T) string {
	cfg := testmodels.MiniLMVocab(testmodels.Decoder("llama"))
	cfg.TieWordEmbeddings = true
	return testmodels.Checkpoint(t, cfg, decoder.RandomTensors(cfg, 0.02, 7))
}

// tinyBERT writes a small random BERT (hidden 32, 2 layers) with the real
// MiniLM vocabulary and tokenizer, and a random cross-encoder head (which
// a bi-encoder run leaves alone).
func tinyBERT(t *testing.T) string {
	cfg := testmodels.MiniLMVocab(testmodels.BERT())
	return testmodels.Checkpoint(t, cfg, bert.RandomTensors(cfg, true, 0.02, 7))
}

// mined writes n FlagEmbedding lines with teacher scores: the positive
// shares the query's topic word.
func mined(t *testing.T, n int) string {
	t.Helper()
	topics := []string{"apple", "river", "guitar", "planet", "doctor", "bread", "engine", "forest", "ocean", "castle", "violin", "tiger"}
	var sb strings.Builder
	for i := 0; i < n; i++ {
		a := topics[i%len(topics)]
		b, _ := json.Marshal(map[string]any{
			"query": fmt.Sprintf("tell me about the %s %d", a, i),
			"pos":   []string{fmt.Sprintf("a %s is described here in detail", a)},
			"neg": []string{fmt.Sprintf("a %s is described here", topics[(i+1)%len(topics)]),
				fmt.Sprintf("the %s story", topics[(i+3)%len(topics)]), fmt.Sprintf("about a %s", topics[(i+5)%len(topics)])},
			"pos_scores": []float64{0.9}, "neg_scores": []float64{0.2, 0.1, 0.3},
		})
		sb.Write(b)
		sb.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// trace is what a run reported: each step's loss and gradient norm, each
// evaluation's loss.
type trace struct{ loss, norm, eval map[int]float64 }

func run(t *testing.T, ctx context.Context, cfg train.Config, stopAt int, cancel func()) (trace, error) {
	t.Helper()
	tr := trace{map[int]float64{}, map[int]float64{}, map[int]float64{}}
	cfg.Progress = func(p train.Progress) {
		if p.Eval != nil {
			tr.eval[p.Step] = p.Eval.Loss
			return
		}
		tr.loss[p.Step], tr.norm[p.Step] = p.Loss, p.GradNorm
		if p.Step == stopAt {
			cancel()
		}
	}
	_, err := train.Run(ctx, cfg)
	return tr, err
}

// runMatchesCPU trains a BERT bi-encoder (contrastive) or cross-encoder
// (listwise, bce; its head on the host), or a decoder, with
// distillation.
func runMatchesCPU(t *testing.T, d *cuda.Device, dec, bidirectional bool, objective, pooling string, tweak func(*testing.T, *train.Config), tol float64) {
	data := mined(t, 30)
	base := train.Config{Data: data, Objective: objective, Pooling: pooling, BatchSize: 4, GroupSize: 3, Accum: 2, MaxSteps: 4,
		LR: 1e-3, DistillWeight: 0.5, Seed: 3, EvalFraction: 0.2, EvalEvery: 2, CheckpointEvery: 100}
	if dec {
		base.ModelDir, base.LoRA, base.Bidirectional = tinyLlama(t), &train.LoRAConfig{Rank: 4}, bidirectional
	} else {
		base.ModelDir = tinyBERT(t)
	}
	if tweak != nil {
		tweak(t, &base)
	}
	at := func(name string, dev bool) train.Config {
		c := base
		c.OutDir = filepath.Join(t.TempDir(), name)
		if dev {
			c.Device = d
		}
		return c
	}
	bg := context.Background()
	cpu, dev := at("cpu", false), at("device", true)
	cpuTr, err := run(t, bg, cpu, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	devTr, err := run(t, bg, dev, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpuTr.loss) != 4 || len(cpuTr.eval) != 3 || len(devTr.loss) != 4 || len(devTr.eval) != 3 {
		t.Fatalf("steps and evaluations reported: cpu %d/%d, device %d/%d; want 4/3", len(cpuTr.loss), len(cpuTr.eval), len(devTr.loss), len(devTr.eval))
	}
	sameTrace(t, "device run", devTr, cpuTr, tol)
	want := params(t, cpu.OutDir)
	sameParams(t, "device run", params(t, dev.OutDir), want, objective, tol)
	if !base.NoExport {
		// The export holds the device's weights, not the host's loaded ones
		// (a decoder's with its LoRA factors merged): the CPU run's export.
		hf := func(out string) map[string]*safetensors.Tensor {
			ts, err := safetensors.ReadFile(filepath.Join(out, "hf", "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			return ts
		}
		sameParams(t, "device export", hf(dev.OutDir), hf(cpu.OutDir), objective, tol)
		if _, err := model.LoadManifest(filepath.Join(dev.OutDir, "model")); err != nil {
			t.Fatalf("device run's anna model: %v", err)
		}
	}

	// Stopped at step 2 on one side, resumed on the other.
	for _, c := range []struct {
		name           string
		first, resumed bool // on the device
	}{{"cpu then device", false, true}, {"device then cpu", true, false}} {
		first := at(strings.ReplaceAll(c.name, " ", "-"), c.first)
		first.NoExport = true
		ctx, cancel := context.WithCancel(bg)
		tr1, err := run(t, ctx, first, 2, cancel)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "stopped at step 2") {
			t.Fatalf("%s: want a stop at step 2, got %v", c.name, err)
		}
		second := first
		second.Resume, second.Device = true, nil
		if c.resumed {
			second.Device = d
		}
		tr2, err := run(t, bg, second, -1, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, ok := tr2.loss[1]; ok || len(tr2.loss) != 2 {
			t.Fatalf("%s: the second run reported steps %v; want 3 and 4 (resumed)", c.name, tr2.loss)
		}
		for s, l := range tr1.loss {
			tr2.loss[s], tr2.norm[s] = l, tr1.norm[s]
		}
		for s, l := range tr1.eval {
			tr2.eval[s] = l
		}
		sameTrace(t, c.name, tr2, cpuTr, tol)
		sameParams(t, c.name, params(t, first.OutDir), want, objective, tol)
	}
}

func params(t *testing.T, out string) map[string]*safetensors.Tensor {
	t.Helper()
	ts, err := safetensors.ReadFile(filepath.Join(out, "checkpoint", "params.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func sameTrace(t *testing.T, what string, got, want trace, tol float64) {
	t.Helper()
	for _, k := range []struct {
		name      string
		got, want map[int]float64
	}{{"loss", got.loss, want.loss}, {"gradient norm", got.norm, want.norm}, {"held-out loss", got.eval, want.eval}} {
		if len(k.got) != len(k.want) {
			t.Errorf("%s: %d %s reports, want %d", what, len(k.got), k.name, len(k.want))
		}
		for s, w := range k.want {
			if g, ok := k.got[s]; !ok || math.IsNaN(g) || math.Abs(g-w) > tol*math.Abs(w) {
				t.Errorf("%s: step %d %s %v, CPU %v", what, s, k.name, g, w)
			}
		}
	}
}

// sameParams compares every tensor by relative L2 error, but for the
// weights whose gradient is zero in exact arithmetic, so rounding noise on
// both sides, which AdamW turns into full-size steps of either sign: the
// key biases (a softmax ignores a constant added to a row) and, under the
// listwise objective, the classifier's bias (so do the softmax over a
// query's candidates and the KL to the teacher's). Neither changes any
// output; the losses compared by sameTrace show it.
func sameParams(t *testing.T, what string, got, want map[string]*safetensors.Tensor, objective string, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || len(g.Data) != len(w.Data) {
			t.Errorf("%s: tensor %s missing or misshapen", what, name)
			continue
		}
		if strings.HasSuffix(name, "attention.self.key.bias") || objective == train.ObjectiveListwise && name == "classifier.bias" {
			continue
		}
		if rel, bad := reftest.RelErr(g.Data, w.Data, 0); bad >= 0 || !(rel <= tol) {
			t.Errorf("%s: %s differs from the CPU run's by %.3g relative", what, name, rel)
		}
	}
}
