package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/model/safetensors/safetensorstest"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/internal/train/technique/autoregembed"
	"github.com/anna-search/anna/internal/train/technique/causal2vec"
	"github.com/anna-search/anna/model"
)

// tinyDecoder writes a random 2-layer decoder checkpoint of modelType with
// the MiniLM tokenizer (its ids fit the vocabulary; its [SEP] ends every
// text, as EOS does for a decoder embedder).
func tinyDecoder(t *testing.T, modelType string) string {
	cfg := testmodels.MiniLMVocab(testmodels.Decoder(modelType))
	return testmodels.Checkpoint(t, cfg, decoder.RandomTensors(cfg, 0.02, 7))
}

// Run trains a decoder with LoRA (the decoder defaults: every projection,
// alpha rank/2, last-token pooling): the held-out loss falls, and the
// export (LoRA merged) goes through the import path to a model.onnx that
// computes what the trainer's forward of the exported checkpoint computes.
func TestRunDecoderLoRAExports(t *testing.T) {
	src := tinyDecoder(t, "llama")
	data := writeData(t, 40, false)
	out := filepath.Join(t.TempDir(), "run")
	var evals []*EvalResult
	res, err := Run(context.Background(), Config{ModelDir: src, Data: data, OutDir: out, BatchSize: 6, GroupSize: 4, MaxSteps: 12,
		LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 6, LoRA: &LoRAConfig{Rank: 4},
		Progress: func(p Progress) {
			if p.Eval != nil {
				evals = append(evals, p.Eval)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 3 {
		t.Fatalf("want 3 evaluations (before training, steps 6 and 12), got %d", len(evals))
	}
	t.Logf("final train loss %.4f; held-out loss %.4f → %.4f, accuracy %.2f → %.2f", res.FinalLoss, evals[0].Loss, evals[2].Loss, evals[0].Accuracy, evals[2].Accuracy)
	if !(evals[2].Loss < evals[0].Loss) {
		t.Errorf("held-out loss did not fall: %.4f → %.4f", evals[0].Loss, evals[2].Loss)
	}
	man, err := model.LoadManifest(res.ModelDir)
	must(t, err)
	if man.Task != model.TaskEmbed || man.Dim != 32 || man.Pooling != model.PoolingLastToken || man.Architecture != "llama" {
		t.Fatalf("unexpected manifest %+v", man)
	}
	ts, err := safetensors.ReadFile(filepath.Join(res.HFDir, "model.safetensors"))
	must(t, err)
	for n := range ts {
		if strings.Contains(n, "lora") {
			t.Fatalf("exported checkpoint still holds %s", n)
		}
	}
	params := readParams(t, out)
	if a := params["layers.1.mlp.down_proj.lora_B.weight"]; a == nil || a.Shape[1] != 4 {
		t.Fatal("checkpoint lacks the down_proj LoRA factor (default targets are every projection)")
	}
	m2, err := decoder.Load(res.HFDir, decoder.LoadOptions{})
	must(t, err)
	T := 10
	var ids, types, mask []int64
	for i := 0; i < 2; i++ {
		for t := 0; t < T; t++ {
			id, mk := int64(0), int64(0)
			if t < 6+i*3 {
				id, mk = int64(1000+97*t+i), 1
			}
			ids, types, mask = append(ids, id), append(types, 0), append(mask, mk)
		}
	}
	b := &decoder.Batch{N: 2, T: T, IDs: make([]int32, 2*T), Mask: make([]float32, 2*T)}
	for i := range ids {
		b.IDs[i], b.Mask[i] = int32(ids[i]), float32(mask[i])
	}
	a, err := m2.Forward(b)
	must(t, err)
	want := ortHidden(t, filepath.Join(res.ModelDir, "model.onnx"), ids, types, mask, 2, T, 32)
	var maxDiff float64
	for i := 0; i < 2*T; i++ {
		if mask[i] == 0 {
			continue
		}
		for c := 0; c < 32; c++ {
			maxDiff = math.Max(maxDiff, math.Abs(float64(a.Hidden[i*32+c]-want[i*32+c])))
		}
	}
	t.Logf("exported model.onnx vs the trainer's forward: max abs diff %.3g", maxDiff)
	if maxDiff > 1e-4 {
		t.Fatalf("exported model.onnx differs from the trainer's forward by %.3g", maxDiff)
	}
}

// What the ONNX decoder graph cannot serve is refused before training;
// cross-encoder objectives and cls pooling are BERT's.
func TestRunDecoderRefusals(t *testing.T) {
	llama, qwen3 := tinyDecoder(t, "llama"), tinyDecoder(t, "qwen3")
	data := writeData(t, 24, false)
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"cross-encoder", Config{ModelDir: llama, Objective: ObjectiveBCE}, "decoders train as bi-encoders only"},
		{"cls pooling", Config{ModelDir: llama, Pooling: PoolCLS}, `pooling "cls": decoders pool the last token`},
	}
	for _, c := range cases {
		c.cfg.Data, c.cfg.OutDir = data, t.TempDir()
		if _, err := Run(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing %q, got %v", c.name, c.want, err)
		}
	}
	// Qwen3 (per-head q/k norms) trains and exports: the graph has them
	// (internal/train/cuda's TestFamiliesParity checks the graph against the trainer).
	res, err := Run(context.Background(), Config{ModelDir: qwen3, Data: data, OutDir: t.TempDir(), BatchSize: 4, GroupSize: 3, MaxSteps: 1,
		EvalFraction: -1, LoRA: &LoRAConfig{Rank: 2}})
	if err != nil {
		t.Fatalf("qwen3 with export: %v", err)
	}
	if man, err := model.LoadManifest(res.ModelDir); err != nil || man.Architecture != "qwen3" {
		t.Fatalf("qwen3 export manifest: %+v, %v", man, err)
	}
	// A bidirectional run exports a bidirectional model: its config says
	// so, the trainer loads it bidirectional, and the graph follows it.
	res, err = Run(context.Background(), Config{ModelDir: llama, Data: data, OutDir: t.TempDir(), BatchSize: 4, GroupSize: 3, MaxSteps: 1,
		EvalFraction: -1, Bidirectional: true, Pooling: PoolMean})
	if err != nil {
		t.Fatalf("bidirectional with export: %v", err)
	}
	if cfg, err := model.LoadConfig(res.HFDir); err != nil || !cfg.Bidirectional() {
		t.Fatalf("bidirectional export: config %+v, %v", cfg, err)
	}
	if m, err := decoder.Load(res.HFDir, decoder.LoadOptions{}); err != nil || m.Causal {
		t.Fatalf("the exported bidirectional model loads causal (%v)", err)
	}
	// Without the export, a bidirectional Qwen3 trains, and so does a
	// multilayer head over a LoRA-adapted Llama (the head's parameters
	// move and are in the checkpoint).
	if _, err := Run(context.Background(), Config{ModelDir: qwen3, Data: data, OutDir: t.TempDir(), BatchSize: 4, GroupSize: 3, MaxSteps: 2,
		Bidirectional: true, NoExport: true, EvalFraction: -1, Pooling: PoolMean}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := Run(context.Background(), Config{ModelDir: llama, Data: data, OutDir: out, BatchSize: 4, GroupSize: 3, MaxSteps: 2,
		NoExport: true, EvalFraction: -1, Pooling: PoolMultiLayer, HeadLatents: 2, HeadHeads: 4, LoRA: &LoRAConfig{Rank: 2}}); err != nil {
		t.Fatal(err)
	}
	if lw := readParams(t, out)["pooling.layer_weights"]; lw == nil || lw.Data[0] == 0 {
		t.Fatal("the multilayer head's layer weights are not in the checkpoint or did not train")
	}
}

// A decoder trained with a trainable pooling head exports it (weights in
// model.safetensors, anna_pooling_head in config.json), the graph applies
// it, and the encoder serves it: the encoder's vectors equal the trainer's
// pooled (and normalised) output of the exported checkpoint, which loads
// with its head. Training it again defaults to that head and refuses
// another pooling.
func TestPoolingHeadServedByEncoder(t *testing.T) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	llama := tinyDecoder(t, "llama")
	data := writeData(t, 24, false)
	texts := []string{"a short one", "the second text is a little longer than the first", "x",
		"Instruct: Given a question, retrieve passages that answer it\nQuery: why is the sky blue"}
	for _, c := range []struct {
		pooling       string
		bidirectional bool
	}{{PoolLatent, false}, {PoolMultiLayer, true}} {
		t.Run(c.pooling, func(t *testing.T) {
			res, err := Run(context.Background(), Config{ModelDir: llama, Data: data, OutDir: t.TempDir(), BatchSize: 4, GroupSize: 3, MaxSteps: 2,
				EvalFraction: -1, Pooling: c.pooling, Bidirectional: c.bidirectional, HeadLatents: 3, HeadHeads: 4, LoRA: &LoRAConfig{Rank: 2}})
			if err != nil {
				t.Fatal(err)
			}
			man, err := model.LoadManifest(res.ModelDir)
			must(t, err)
			if man.Pooling != c.pooling {
				t.Fatalf("manifest pooling %q, want %q", man.Pooling, c.pooling)
			}
			enc, err := encoder.Load(context.Background(), res.ModelDir, encoder.Options{})
			must(t, err)
			defer enc.Close()
			got, err := enc.EmbedDocuments(context.Background(), texts)
			must(t, err)

			m, err := decoder.Load(res.HFDir, decoder.LoadOptions{})
			must(t, err)
			if hc := m.HeadConfig(); hc == nil || hc.Mode != c.pooling || hc.Latents != 3 || hc.Heads != 4 {
				t.Fatalf("the exported checkpoint loads with head %+v", hc)
			}
			tok, err := tokenizer.Load(filepath.Join(res.ModelDir, "tokenizer.json"))
			must(t, err)
			defer tok.Close()
			a, err := m.Forward(decoderBatch(padBatch(tok.EncodeBatch(texts, man.MaxLength), tok.PadID())))
			must(t, err)
			pooled, err := m.Pool(a, c.pooling)
			must(t, err)
			var maxDiff float64
			for n := range texts {
				v := pooled[n*32 : n*32+32]
				var ss float64
				for _, x := range v {
					ss += float64(x) * float64(x)
				}
				for i, x := range v {
					maxDiff = math.Max(maxDiff, math.Abs(float64(x)/math.Sqrt(ss)-float64(got[n][i])))
				}
			}
			t.Logf("%s head: max |encoder − trainer| = %.3g", c.pooling, maxDiff)
			if maxDiff > 1e-5 {
				t.Fatalf("the encoder's %s vectors differ from the trainer's by %.3g", c.pooling, maxDiff)
			}

			// Training the export again goes on with its head.
			again, err := Run(context.Background(), Config{ModelDir: res.HFDir, Data: data, OutDir: t.TempDir(), BatchSize: 4, GroupSize: 3, MaxSteps: 1,
				EvalFraction: -1, LoRA: &LoRAConfig{Rank: 2}})
			if err != nil {
				t.Fatal(err)
			}
			if man, err := model.LoadManifest(again.ModelDir); err != nil || man.Pooling != c.pooling {
				t.Fatalf("retrained export: manifest %+v, %v", man, err)
			}
			if _, err := Run(context.Background(), Config{ModelDir: res.HFDir, Data: data, OutDir: t.TempDir(), Pooling: PoolMean}); err == nil ||
				!strings.Contains(err.Error(), "has a trained "+c.pooling+" pooling head") {
				t.Fatalf("mean pooling over a trained head: got %v", err)
			}
		})
	}
}

// tinyDecoderBF16 is tinyDecoder with its projections stored as bfloat16,
// which a LoRA run keeps as stored (decoder.LoadOptions.KeepBase).
func tinyDecoderBF16(t *testing.T, modelType string) string {
	dir := tinyDecoder(t, modelType)
	path := filepath.Join(dir, "model.safetensors")
	ts, err := safetensors.ReadFile(path)
	must(t, err)
	safetensorstest.WriteHalf(t, path, ts, func(name string) string {
		if strings.Contains(name, "_proj.weight") {
			return "BF16"
		}
		return "F32"
	})
	return dir
}

// A decoder run interrupted and resumed from its checkpoint ends
// bit-for-bit where an uninterrupted run ends (LoRA, recomputation on),
// with a float32 base and with a bfloat16 base kept as stored.
func TestRunDecoderResumesExactly(t *testing.T) {
	t.Run("float32", func(t *testing.T) { testRunDecoderResumes(t, tinyDecoder(t, "qwen2")) })
	t.Run("bf16", func(t *testing.T) {
		src := tinyDecoderBF16(t, "qwen2")
		d, err := decoder.Load(src, decoder.LoadOptions{KeepBase: true})
		must(t, err)
		if f32, kept := d.BaseBytes(); kept*2 != f32 {
			t.Fatalf("the bfloat16 base is kept in %d bytes, want half of %d", kept, f32)
		}
		testRunDecoderResumes(t, src)
	})
}

func testRunDecoderResumes(t *testing.T, src string) {
	data := writeData(t, 24, true)
	base := Config{ModelDir: src, Data: data, BatchSize: 4, GroupSize: 3, Accum: 2, MaxSteps: 4, LR: 1e-3, DistillWeight: 0.5,
		Seed: 3, NoExport: true, EvalFraction: -1, CheckpointEvery: 100, LoRA: &LoRAConfig{Rank: 4}, Recompute: true, Pooling: PoolMean}
	full := base
	full.OutDir = filepath.Join(t.TempDir(), "full")
	if _, err := Run(context.Background(), full); err != nil {
		t.Fatal(err)
	}
	part := base
	part.OutDir = filepath.Join(t.TempDir(), "part")
	ctx, cancel := context.WithCancel(context.Background())
	part.Progress = func(p Progress) {
		if p.Step == 2 {
			cancel()
		}
	}
	if _, err := Run(ctx, part); err == nil || !strings.Contains(err.Error(), "stopped at step 2") {
		t.Fatalf("interrupted run: want a stop at step 2, got %v", err)
	}
	part.Progress, part.Resume = nil, true
	if _, err := Run(context.Background(), part); err != nil {
		t.Fatal(err)
	}
	a, b := readParams(t, full.OutDir), readParams(t, part.OutDir)
	moved := false
	for name, ta := range a {
		for i := range ta.Data {
			if math.Float32bits(ta.Data[i]) != math.Float32bits(b[name].Data[i]) {
				t.Fatalf("%s[%d]: uninterrupted %g, resumed %g", name, i, ta.Data[i], b[name].Data[i])
			}
		}
		if strings.HasSuffix(name, ".lora_B.weight") && ta.Data[0] != 0 {
			moved = true
		}
	}
	if !moved {
		t.Fatal("training left the LoRA B factors at zero")
	}
}

// A Causal2Vec run exports an anna model (decoder and MLP in one graph,
// paired with its context encoder) that the encoder serves: its query and
// document vectors equal the trainer's technique (the exported decoder
// and the saved MLP) embedding the same texts with the contextual token
// after the instruction's tokens (queries) or the BOS (documents). The
// context encoder is all-MiniLM-L6-v2 kept frozen, then a small BERT
// trained with the decoder, fully and with LoRA (ContextTrain): its export
// (OutDir/context/model, weights moved from the checkpoint's) is what the
// decoder is paired with, by path and fingerprint.
func TestCausal2VecServedByEncoder(t *testing.T) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	ctx := context.Background()
	cdir := home.DefaultModel()
	cenc, err := encoder.Load(ctx, cdir, encoder.Options{})
	if err != nil {
		t.Skipf("the default model (the context encoder) is not installed: %v", err)
	}
	defer cenc.Close()
	src, data := tinyDecoder(t, "llama"), writeData(t, 24, false)
	base := Config{ModelDir: src, Data: data, BatchSize: 4, GroupSize: 3, MaxSteps: 2, EvalFraction: -1, LoRA: &LoRAConfig{Rank: 2}, Seed: 3}
	t.Run("frozen", func(t *testing.T) {
		c := base
		c.OutDir = t.TempDir()
		c.Technique = causal2vec.Method{Encode: func(texts []string) ([][]float32, error) { return cenc.EmbedDocuments(ctx, texts) },
			Dim: cenc.Dim(), EncoderName: filepath.Base(cdir), EncoderPath: cdir, EncoderFingerprint: cenc.Fingerprint()}
		res, err := Run(ctx, c)
		must(t, err)
		checkCausal2VecServed(t, res, c.OutDir, cdir, cenc.Fingerprint())
	})
	for _, lora := range []*bert.LoRAConfig{nil, {Rank: 2}} {
		name := "trained-full"
		if lora != nil {
			name = "trained-lora"
		}
		t.Run(name, func(t *testing.T) {
			ckpt := tinyCheckpoint(t, false)
			c := base
			c.OutDir, c.LR = t.TempDir(), 1e-2
			c.Technique = causal2vec.Method{EncoderName: "tiny-bert",
				Train: &causal2vec.ContextTrain{Checkpoint: ckpt, LoRA: lora, Pooling: PoolMean, Normalize: true, MaxLength: 32}}
			res, err := Run(ctx, c)
			must(t, err)
			cmodel := filepath.Join(c.OutDir, "context", "model")
			cman, err := model.LoadManifest(cmodel)
			must(t, err)
			if cman.Pooling != PoolMean || !cman.Normalize || cman.MaxLength != 32 || cman.Dim != 32 {
				t.Fatalf("context manifest %+v", cman)
			}
			before, err := safetensors.ReadFile(filepath.Join(ckpt, "model.safetensors"))
			must(t, err)
			after, err := safetensors.ReadFile(filepath.Join(c.OutDir, "context", "hf", "model.safetensors"))
			must(t, err)
			w := "encoder.layer.0.attention.self.query.weight"
			if before[w] == nil || after[w] == nil || slices.Equal(before[w].Data, after[w].Data) {
				t.Fatalf("the context encoder's %s did not move in training", w)
			}
			// The served context encoder computes what training's did with
			// the final weights (LoRA merged into the export).
			ce, err := causal2vec.NewContextEncoder(causal2vec.ContextTrain{Checkpoint: filepath.Join(c.OutDir, "context", "hf"), Pooling: PoolMean, Normalize: true, MaxLength: 32}, 1, 1)
			must(t, err)
			defer ce.Close()
			texts := []string{"why is the sky blue", "a castle on a hill that goes on and on and on and on and on and on and on past the thirty-two tokens the encoder reads"}
			want, _, err := ce.Encode(texts)
			must(t, err)
			served, err := encoder.Load(ctx, cmodel, encoder.Options{})
			must(t, err)
			got, err := served.EmbedDocuments(ctx, texts)
			served.Close()
			must(t, err)
			for i, v := range slices.Concat(got...) {
				if math.Abs(float64(v-want[i])) > 1e-5 {
					t.Fatalf("served context vector [%d] %g, trainer's %g", i, v, want[i])
				}
			}
			checkCausal2VecServed(t, res, c.OutDir, cmodel, cman.Fingerprint)
		})
	}
}

// checkCausal2VecServed serves a Causal2Vec run's export and compares its
// vectors with the trainer's technique, the context vectors from the
// anna model at cdir (which the export must pair by fingerprint).
func checkCausal2VecServed(t *testing.T, res *Result, out, cdir, fingerprint string) {
	t.Helper()
	ctx := context.Background()
	cenc, err := encoder.Load(ctx, cdir, encoder.Options{})
	must(t, err)
	defer cenc.Close()
	embedRaw := func(texts []string) ([][]float32, error) { return cenc.EmbedDocuments(ctx, texts) }
	man, err := model.LoadManifest(res.ModelDir)
	must(t, err)
	if man.Pooling != model.PoolingCausal2Vec || man.Dim != 64 || man.Context == nil || man.Context.Fingerprint != fingerprint {
		t.Fatalf("manifest %+v (context %+v), want the context fingerprint %s", man, man.Context, fingerprint)
	}
	enc, err := encoder.Load(ctx, res.ModelDir, encoder.Options{})
	must(t, err)
	defer enc.Close()
	queries := []string{"why is the sky blue", "tell me about the river"}
	docs := []string{"a river is described here in detail", "x", "the castle story is long and it goes on for a while"}
	prompt := encoder.Prompt{Instruction: "find the passage"}
	gotQ, err := enc.EmbedQueries(ctx, queries, prompt)
	must(t, err)
	gotD, err := enc.EmbedDocuments(ctx, docs)
	must(t, err)

	// The reference: the trainer's technique over the exported checkpoint.
	tok, err := tokenizer.Load(filepath.Join(res.ModelDir, "tokenizer.json"))
	must(t, err)
	defer tok.Close()
	raw := map[string]string{}
	formatted := make([]string, len(queries))
	for i, q := range queries {
		formatted[i] = enc.FormatQuery(q, prompt)
		raw[formatted[i]] = q
	}
	prefix := len(tok.Encode(enc.FormatQuery("", prompt), 0).IDs) - 1 // [CLS] and the instruction
	d, err := decoder.Load(res.HFDir, decoder.LoadOptions{})
	must(t, err)
	tech, err := causal2vec.New(d, causal2vec.Frozen(func(texts []string) ([]float32, int, error) {
		vs, err := embedRaw(texts)
		if err != nil {
			return nil, 0, err
		}
		return slices.Concat(vs...), cenc.Dim(), nil
	}), causal2vec.Config{EncoderDim: cenc.Dim(), QueryPrefix: prefix, DocPrefix: 1,
		EncoderText: func(s string, query bool) string {
			if query {
				return raw[s]
			}
			return s
		}})
	must(t, err)
	must(t, tech.Load(filepath.Join(out, "causal2vec")))
	worst := 0.0
	for _, c := range []struct {
		texts []string
		got   [][]float32
		query bool
	}{{formatted, gotQ, true}, {docs, gotD, false}} {
		b := decoderBatch(padBatch(tok.EncodeBatch(c.texts, 0), tok.PadID()))
		want, err := tech.Embed(c.texts, b, c.query)
		must(t, err)
		for n := range c.texts {
			v := want[n*64 : n*64+64]
			var ss float64
			for _, x := range v {
				ss += float64(x) * float64(x)
			}
			for i, x := range v {
				worst = math.Max(worst, math.Abs(float64(x)/math.Sqrt(ss)-float64(c.got[n][i])))
			}
		}
	}
	t.Logf("Causal2Vec: max |encoder − trainer| = %.3g", worst)
	if worst > 1e-5 {
		t.Fatalf("the encoder's Causal2Vec vectors differ from the trainer's by %.3g", worst)
	}
}

// An AutoRegEmbed run exports an anna model (the trained encoder and its
// memory tokens in one graph) that the encoder serves: its query and
// document vectors equal the technique's Embed (the saved encoder and
// memory tokens; queries with I_next, documents with I_self).
func TestAutoRegEmbedServedByEncoder(t *testing.T) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	ctx := context.Background()
	src := tinyDecoder(t, "llama")
	cj, err := export.Config(src, map[string]any{"tie_word_embeddings": true}) // the frozen decoder generates through a head, tied as SmolLM2's
	must(t, err)
	must(t, os.WriteFile(filepath.Join(src, "config.json"), cj, 0o644))
	out := t.TempDir()
	res, err := Run(ctx, Config{ModelDir: src, Data: writeData(t, 24, false), OutDir: out, Technique: autoregembed.Method{Stage: autoregembed.Compression},
		BatchSize: 4, GroupSize: 3, MaxSteps: 2, EvalFraction: -1, LoRA: &LoRAConfig{Rank: 2}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	man, err := model.LoadManifest(res.ModelDir)
	must(t, err)
	if man.Pooling != model.PoolingMemory || man.Dim != 32 || man.Memory == nil || man.Memory.Count != 5 {
		t.Fatalf("manifest %+v", man)
	}
	enc, err := encoder.Load(ctx, res.ModelDir, encoder.Options{})
	must(t, err)
	defer enc.Close()
	queries := []string{"why is the sky blue", "tell me about the river"}
	docs := []string{"a river is described here in detail", "x", "the castle story is long and it goes on for a while"}
	gotQ, err := enc.EmbedQueries(ctx, queries, encoder.Prompt{})
	must(t, err)
	gotD, err := enc.EmbedDocuments(ctx, docs)
	must(t, err)

	tok, err := tokenizer.Load(filepath.Join(src, "tokenizer.json"))
	must(t, err)
	defer tok.Close()
	ids := func(s string) []int32 {
		var o []int32
		for _, id := range tok.IDs(s) {
			o = append(o, int32(id))
		}
		return o
	}
	special := tok.Encode("", 0).IDs // [CLS] [SEP]
	cfg, err := model.LoadConfig(src)
	must(t, err)
	base, err := safetensors.ReadFile(filepath.Join(src, "model.safetensors"))
	must(t, err)
	encT, err := safetensors.ReadFile(filepath.Join(out, autoregembed.SaveDir, "encoder.safetensors"))
	must(t, err)
	memT, err := safetensors.ReadFile(filepath.Join(out, autoregembed.SaveDir, "memory.safetensors"))
	must(t, err)
	tech, err := autoregembed.New(cfg, encT, base, autoregembed.Config{Stage: autoregembed.Compression, Memory: memT[autoregembed.MemoryName].Data,
		Prefix: []int32{int32(special[0])}, EOS: int32(special[1]), QueryInstruction: ids("\n" + autoregembed.NextInstruction + "\n"), DocInstruction: ids("\n" + autoregembed.SelfInstruction + "\n")})
	must(t, err)
	worst := 0.0
	for _, c := range []struct {
		texts []string
		got   [][]float32
		role  autoregembed.Role
	}{{queries, gotQ, autoregembed.Query}, {docs, gotD, autoregembed.Document}} {
		want, err := tech.Embed(decoderBatch(padBatch(tok.EncodeBatch(c.texts, 0), tok.PadID())), c.role)
		must(t, err)
		for n := range c.texts {
			for i, x := range want[n*32 : n*32+32] {
				worst = math.Max(worst, math.Abs(float64(x-c.got[n][i])))
			}
		}
	}
	t.Logf("AutoRegEmbed: max |encoder − trainer| = %.3g", worst)
	if worst > 1e-5 {
		t.Fatalf("the encoder's AutoRegEmbed vectors differ from the trainer's by %.3g", worst)
	}
}
