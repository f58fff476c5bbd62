package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/technique/anchor"
	"github.com/anna-search/anna/internal/train/technique/autoregembed"
	"github.com/anna-search/anna/internal/train/technique/causal2vec"
	"github.com/anna-search/anna/model"
)

// writePromptData is writeData with an instruction on every query.
func writePromptData(t *testing.T, n int, prompt string) string {
	t.Helper()
	p := writeData(t, n, true)
	b, err := os.ReadFile(p)
	must(t, err)
	must(t, os.WriteFile(p, []byte(strings.ReplaceAll(string(b), `"prompt":""`, `"prompt":"`+prompt+`"`)), 0o644))
	return p
}

// letterEncoder is a frozen context encoder for tests: each text's letter
// counts folded into 8 dimensions. It records the texts it sees.
type letterEncoder struct {
	mu   sync.Mutex
	seen []string
}

func (e *letterEncoder) embed(texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.seen = append(e.seen, texts...)
	e.mu.Unlock()
	return testmodels.Letters(texts)
}

// The techniques run through Run's loop: Anchor's stage I lowers its
// held-out reconstruction loss and exports an anna model (the decoder, for
// stage II); Causal2Vec lowers its held-out contrastive loss, its encoder
// sees queries without the decoder's instruction, it saves its MLP and
// pairing, and a run stopped and resumed ends where a straight run does.
func TestRunTechniques(t *testing.T) {
	src := tinyDecoder(t, "llama")
	const prompt = "Represent this question for retrieval: "
	data := writePromptData(t, 40, prompt)
	ctx := context.Background()
	lossFalls := func(t *testing.T, cfg Config) *Result {
		t.Helper()
		var evals []*EvalResult
		cfg.Progress = func(p Progress) {
			if p.Eval != nil {
				evals = append(evals, p.Eval)
			}
		}
		res, err := Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(evals) < 2 || !(evals[len(evals)-1].Loss < evals[0].Loss) {
			t.Fatalf("held-out loss did not fall: %+v", evals)
		}
		t.Logf("%s: held-out loss %.4f → %.4f", cfg.Technique.Name(), evals[0].Loss, evals[len(evals)-1].Loss)
		return res
	}
	t.Run("anchor", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run")
		res := lossFalls(t, Config{ModelDir: src, Data: data, OutDir: out, Technique: anchor.Method{}, BatchSize: 6, GroupSize: 2,
			MaxSteps: 8, LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 8, LoRA: &LoRAConfig{Rank: 4}})
		if man, err := model.LoadManifest(res.ModelDir); err != nil || man.Pooling != model.PoolingLastToken {
			t.Fatalf("stage I export: %+v %v", man, err)
		}
		if _, err := Run(ctx, Config{ModelDir: src, Data: data, OutDir: t.TempDir(), Technique: anchor.Method{}, DistillWeight: 0.5, MaxSteps: 1}); err == nil || !strings.Contains(err.Error(), "distillation") {
			t.Fatalf("anchor with distillation: %v", err)
		}
	})
	t.Run("causal2vec-trained-context", func(t *testing.T) {
		// The context encoder (a small BERT, LoRA) trained with the
		// decoder: the held-out loss falls, its parameters are in the
		// checkpoint under context. names, and a run stopped after step 4
		// and resumed ends bit-identical to the straight one.
		cfg := Config{ModelDir: src, Data: data, BatchSize: 6, GroupSize: 4, MaxSteps: 8,
			LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 8, LoRA: &LoRAConfig{Rank: 4}, NoExport: true,
			Technique: causal2vec.Method{Train: &causal2vec.ContextTrain{Checkpoint: tinyCheckpoint(t, false), LoRA: &bert.LoRAConfig{Rank: 2}, Pooling: PoolMean, Normalize: true, MaxLength: 32}}}
		cfg.OutDir = filepath.Join(t.TempDir(), "run")
		lossFalls(t, cfg)
		want := readParams(t, cfg.OutDir)
		ctxParams := 0
		for name, w := range want {
			if strings.HasPrefix(name, causal2vec.ContextPrefix) {
				ctxParams++
				if strings.HasSuffix(name, ".lora_B.weight") && !slices.ContainsFunc(w.Data, func(x float32) bool { return x != 0 }) {
					t.Fatalf("%s still zero after training", name)
				}
			}
		}
		if ctxParams == 0 {
			t.Fatal("the checkpoint holds no context encoder parameters")
		}
		sameParams(t, want, resumedParams(t, cfg))
	})
	t.Run("causal2vec", func(t *testing.T) {
		enc := &letterEncoder{}
		frozen := causal2vec.Method{Encode: enc.embed, Dim: 8}
		named := frozen
		named.EncoderName = "letters"
		cfg := Config{ModelDir: src, Data: data, Technique: named, BatchSize: 6, GroupSize: 4, MaxSteps: 8,
			LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 8, LoRA: &LoRAConfig{Rank: 4}, NoExport: true, DistillWeight: 0.5}
		cfg.OutDir = filepath.Join(t.TempDir(), "run")
		res := lossFalls(t, cfg)
		for _, s := range enc.seen {
			if strings.HasPrefix(s, prompt) {
				t.Fatalf("the context encoder saw the decoder's instruction: %q", s)
			}
		}
		man, err := causal2vec.ReadManifest(res.HFDir)
		if err != nil || man.Encoder.Model != "letters" || man.EmbeddingDim != 64 {
			t.Fatalf("causal2vec export: %+v %v", man, err)
		}
		// Stopped after step 4 (Ctrl-C: a checkpoint), resumed: the same
		// final parameters, MLP included, as the straight run.
		want := readParams(t, filepath.Dir(res.HFDir))
		if _, ok := want["causal2vec.mlp.0.weight"]; !ok {
			t.Fatal("the checkpoint holds no MLP")
		}
		sameParams(t, want, resumedParams(t, cfg))
		// Data mixing examples with teacher scores (mined) and without
		// (NLI triples), distillation off: the batches go without scores
		// (the ablation script's data; it once failed "8 teacher scores,
		// want 16").
		b, err := os.ReadFile(data)
		must(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := 0; i < len(lines); i += 2 {
			lines[i] = regexp.MustCompile(`,"(pos|neg)_scores":\[[^]]*\]`).ReplaceAllString(lines[i], "")
		}
		mixed := filepath.Join(t.TempDir(), "mixed.jsonl")
		must(t, os.WriteFile(mixed, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		if _, err := Run(ctx, Config{ModelDir: src, Data: mixed, OutDir: t.TempDir(), Technique: frozen, BatchSize: 6, GroupSize: 4, MaxSteps: 2,
			EvalFraction: -1, LoRA: &LoRAConfig{Rank: 4}, NoExport: true}); err != nil {
			t.Fatalf("causal2vec on data with and without teacher scores: %v", err)
		}
		if _, err := Run(ctx, Config{ModelDir: src, Data: data, OutDir: t.TempDir(), Technique: frozen, MaxSteps: 1}); err == nil || !strings.Contains(err.Error(), "NoExport") {
			t.Fatalf("causal2vec with export: %v", err)
		}
	})
	t.Run("autoregembed", func(t *testing.T) {
		// The frozen decoder generates through the LM head: tie it to the
		// embedding, as SmolLM2 does.
		var mc map[string]any
		b, err := os.ReadFile(filepath.Join(src, "config.json"))
		must(t, err)
		must(t, json.Unmarshal(b, &mc))
		mc["tie_word_embeddings"] = true
		b, _ = json.Marshal(mc)
		must(t, os.WriteFile(filepath.Join(src, "config.json"), b, 0o644))
		stage1 := filepath.Join(t.TempDir(), "compress")
		res := lossFalls(t, Config{ModelDir: src, Data: data, OutDir: stage1, Technique: autoregembed.Method{Stage: autoregembed.Compression}, BatchSize: 6, GroupSize: 2,
			MaxSteps: 8, LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 8, LoRA: &LoRAConfig{Rank: 4}, NoExport: true})
		if res.HFDir != filepath.Join(stage1, autoregembed.SaveDir) {
			t.Fatalf("compression stage saved to %q", res.HFDir)
		}
		lossFalls(t, Config{ModelDir: src, Data: data, OutDir: filepath.Join(t.TempDir(), "align"), Technique: autoregembed.Method{Stage: autoregembed.Alignment, Stage1: stage1},
			BatchSize: 6, GroupSize: 3, MaxSteps: 8, LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 8,
			LoRA: &LoRAConfig{Rank: 4}, NoExport: true})
		if _, err := Run(ctx, Config{ModelDir: src, Data: data, OutDir: t.TempDir(), Technique: autoregembed.Method{Stage: autoregembed.Alignment}, MaxSteps: 1, NoExport: true}); err == nil || !strings.Contains(err.Error(), "compression stage") {
			t.Fatalf("alignment without the first stage: %v", err)
		}
	})
}

// resumedParams runs cfg into a new output directory, stopped after step 4
// (as Ctrl-C stops it: a checkpoint) and resumed, and returns its final
// checkpoint's parameters.
func resumedParams(t *testing.T, cfg Config) map[string]*safetensors.Tensor {
	t.Helper()
	cfg.OutDir = filepath.Join(t.TempDir(), "split")
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Progress = func(p Progress) {
		if p.Step == 4 && p.Eval == nil {
			cancel()
		}
	}
	if _, err := Run(stop, cfg); err == nil {
		t.Fatal("the cancelled run did not stop")
	}
	cfg.Progress, cfg.Resume = nil, true
	_, err := Run(context.Background(), cfg)
	must(t, err)
	return readParams(t, cfg.OutDir)
}

// sameParams fails unless got holds exactly want's tensors, bit for bit.
func sameParams(t *testing.T, want, got map[string]*safetensors.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the straight and the resumed run's checkpoints hold %d and %d tensors", len(want), len(got))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || !slices.Equal(w.Data, g.Data) {
			t.Fatalf("%s differs between the straight and the resumed run", name)
		}
	}
}
