package onnx

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/pyref"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
)

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// tinyRef is a tiny random model made by tools/transformers_reference.py:
// the directory with its config, weights and outputs (hidden.f32, and
// logits.f32 for a cross-encoder), what anna reads of it, and the batch it
// was run on, flattened.
type tinyRef struct {
	dir              string
	cfg              *model.Config
	tensors          map[string]*safetensors.Tensor
	ids, mask, types []int64
}

// tinyReference has transformers build a tiny random arch model (seeded)
// and run it on the right-padded batch ids/mask.
func tinyReference(t *testing.T, python, tools, arch string, seed int, ids, mask [][]int64) tinyRef {
	t.Helper()
	return tinyRun(t, python, tools, "tiny", arch, seed, ids, mask)
}

// tinyRun is tinyReference with the tool's mode: tiny, or tiny-lm for a
// ...ForCausalLM model whose logits.f32 are the language-model logits at
// each row's last real token.
func tinyRun(t *testing.T, python, tools, mode, arch string, seed int, ids, mask [][]int64) tinyRef {
	t.Helper()
	ref := tinyRef{dir: t.TempDir()}
	b, _ := json.Marshal(map[string]any{"ids": ids, "mask": mask})
	os.WriteFile(filepath.Join(ref.dir, "ids.json"), b, 0o644)
	if out, err := exec.Command(python, filepath.Join(tools, "transformers_reference.py"), mode, arch, fmt.Sprint(seed), ref.dir).CombinedOutput(); err != nil {
		t.Fatalf("transformers_reference.py: %v\n%s", err, out)
	}
	var err error
	if ref.cfg, err = model.LoadConfig(ref.dir); err != nil {
		t.Fatal(err)
	}
	if ref.tensors, err = ReadCheckpoint(ref.dir); err != nil {
		t.Fatal(err)
	}
	for r := range ids {
		ref.ids = append(ref.ids, ids[r]...)
		ref.mask = append(ref.mask, mask[r]...)
	}
	ref.types = make([]int64, len(ref.ids))
	return ref
}

// TestDecodersMatchTransformers: tiny random Llama, Mistral, Qwen2 and Qwen3
// models made by transformers (Qwen3 by transformers 4.51.3, the others by
// 4.46.3) (tools/transformers_reference.py), imported from their
// safetensors and run by ONNX Runtime through anna's graph, give
// transformers' last hidden states (<= 1e-4) on every real token of a
// right-padded batch.
func TestDecodersMatchTransformers(t *testing.T) {
	needORT(t)
	python, tools := pyref.Python(t, "torch", "transformers"), pyref.Tool(t, "")
	for i, arch := range []string{"llama", "mistral", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			ids := [][]int64{{5, 17, 3, 60, 22, 9, 41, 2}, {7, 33, 12, 2, 0, 0, 0, 0}}
			mask := [][]int64{{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}}
			ref := tinyReference(t, python, tools, arch, 70+i, ids, mask)
			g, err := Build(ref.cfg, ref.tensors, model.TaskEmbed)
			if err != nil {
				t.Fatal(err)
			}
			B, S, H := len(ids), len(ids[0]), ref.cfg.HiddenSize
			got := runModel(t, graphBytes(t, g), OutputHidden, ref.ids, ref.types, ref.mask, B, S, ortgo.NewShape(int64(B), int64(S), int64(H)))
			want := readF32(t, filepath.Join(ref.dir, "hidden.f32"))
			worst := 0.0
			for r := 0; r < B; r++ {
				for s := 0; s < S; s++ {
					if mask[r][s] == 0 {
						continue
					}
					for j := 0; j < H; j++ {
						k := (r*S+s)*H + j
						worst = math.Max(worst, math.Abs(float64(got[k]-want[k])))
					}
				}
			}
			t.Logf("%s: max abs difference %.2g", arch, worst)
			if worst > 1e-4 {
				t.Errorf("%s: hidden states differ from transformers' by %g", arch, worst)
			}
		})
	}
}

// TestDecoderRerankMatchesTransformers: the decoder reranker's graph (task
// rerank, the "yes/no logit" form) of tiny random LlamaForCausalLM (untied
// lm_head), Qwen2ForCausalLM and Qwen3ForCausalLM (tied embeddings; Qwen3
// is Qwen3-Reranker's architecture, run by transformers 4.51.3) models gives
// transformers' language-model logits of the label tokens at each row's
// last real token (<= 1e-4), on a right-padded batch.
func TestDecoderRerankMatchesTransformers(t *testing.T) {
	needORT(t)
	python, tools := pyref.Python(t, "torch", "transformers"), pyref.Tool(t, "")
	labels := []int64{11, 42}
	for i, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			ids := [][]int64{{5, 17, 3, 60, 22, 9, 41, 2}, {7, 33, 12, 2, 0, 0, 0, 0}, {8, 0, 0, 0, 0, 0, 0, 0}}
			mask := [][]int64{{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0, 0}}
			ref := tinyRun(t, python, tools, "tiny-lm", arch, 90+i, ids, mask)
			if ref.cfg.TieWordEmbeddings != (arch != "llama") {
				t.Fatalf("%s: tie_word_embeddings %v", arch, ref.cfg.TieWordEmbeddings)
			}
			g, err := BuildWith(ref.cfg, ref.tensors, model.TaskRerank, BuildOptions{LabelTokens: labels})
			if err != nil {
				t.Fatal(err)
			}
			B, V := len(ids), ref.cfg.VocabSize
			got := runModel(t, graphBytes(t, g), OutputLogits, ref.ids, ref.types, ref.mask, B, len(ids[0]), ortgo.NewShape(int64(B), int64(len(labels))))
			want := readF32(t, filepath.Join(ref.dir, "logits.f32"))
			worst := 0.0
			for r := 0; r < B; r++ {
				for j, id := range labels {
					worst = math.Max(worst, math.Abs(float64(got[r*len(labels)+j]-want[r*V+int(id)])))
				}
			}
			t.Logf("%s reranker: label logits max abs difference %.2g", arch, worst)
			if worst > 1e-4 {
				t.Errorf("%s: label logits differ from transformers' by %g", arch, worst)
			}
		})
	}
	// Without labels there is no decoder reranker.
	cfg := &model.Config{ModelType: "llama", VocabSize: 64, HiddenSize: 32, NumHiddenLayers: 1, NumAttentionHeads: 4, IntermediateSize: 48,
		MaxPositionEmbeddings: 64, HiddenAct: "silu", RMSNormEps: 1e-5, RopeTheta: 1e4}
	if _, err := BuildWith(cfg, nil, model.TaskRerank, BuildOptions{}); err == nil || !strings.Contains(err.Error(), "label tokens") {
		t.Errorf("a decoder reranker without labels: %v", err)
	}
}

func graphBytes(t *testing.T, g *Graph) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := g.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSmolLM2MatchesTransformers: SmolLM2-135M-Instruct imported from its
// GGUF file (dequantized, Q/K rows un-permuted, tokenizer built from the
// vocabulary) and run by ONNX Runtime through anna's graph, as one
// right-padded batch, against transformers' LlamaModel loaded from the same
// file, each text alone: last hidden states within 1e-3 on every token of
// 32 varied texts. Needs the file (annactl models download
// smollm2-135m-instruct) and transformers (make pydeps).
func TestSmolLM2MatchesTransformers(t *testing.T) {
	needORT(t)
	python, tools := pyref.Python(t, "torch", "transformers", "gguf", "accelerate"), pyref.Tool(t, "")
	dir := t.TempDir()
	path := gguftest.SmolLM2(t, dir)
	mdir := filepath.Join(dir, "models", "smollm2") // a parent that does not exist yet
	m, err := ImportGGUF(context.Background(), path, mdir, Settings{MaxLength: 512})
	if err != nil {
		t.Fatal(err)
	}
	if m.Architecture != "llama" || m.Pooling != model.PoolingLastToken || m.Dim != 576 {
		t.Errorf("manifest: %+v", m)
	}
	tok, err := tokenizer.Load(filepath.Join(mdir, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	texts := []string{"Hello world", "What is the capital of France?", "Instruct: Given a question, retrieve passages that answer it\nQuery: how do tides work",
		"The mitochondria is the powerhouse of the cell.", "Ünïcödé — “quotes”, emoji 🙂 and 中文", "12345 + 67890 = 80235", "  leading and trailing spaces  ",
		"a", "def f(x):\n    return x * 2\n", "<|im_start|>user\nhi<|im_end|>"}
	for i := len(texts); i < 32; i++ {
		texts = append(texts, fmt.Sprintf("Sentence %d about retrieval: %s", i, strings.Repeat("dense vectors and sparse terms ", i%7)))
	}
	var ids [][]int64
	S := 0
	for _, s := range texts {
		e := tok.Encode(s, 0)
		if e.IDs[len(e.IDs)-1] != 2 {
			t.Fatalf("%q: %v does not end with EOS", s, e.IDs)
		}
		ids = append(ids, e.IDs)
		S = max(S, len(e.IDs))
	}
	// The same file as a decoder reranker (the yes/no logit form through
	// Qwen3-Reranker's prompt); one pair's document is cut to fit.
	rdir := filepath.Join(dir, "reranker")
	rm, err := ImportGGUF(context.Background(), path, rdir, Settings{Task: model.TaskRerank, MaxLength: 96})
	if err != nil {
		t.Fatal(err)
	}
	pp := rm.PairPrompt
	if rm.Task != model.TaskRerank || pp == nil || rm.NumLabels != 2 {
		t.Fatalf("reranker manifest: %+v", rm)
	}
	pairs := [][2]string{{"what is the capital of France?", "Paris is the capital and largest city of France."},
		{"what is the capital of France?", "The mitochondria is the powerhouse of the cell."},
		{"how do tides work", strings.Repeat("The gravitational pull of the moon raises the oceans on the near and far sides of the earth. ", 8)}}
	b, _ := json.Marshal(map[string]any{"ids": ids, "rerank": map[string]any{"prefix": pp.Prefix, "body": pp.Body, "suffix": pp.Suffix,
		"labels": pp.Labels, "pairs": pairs, "max_length": rm.MaxLength}})
	os.WriteFile(filepath.Join(dir, "ids.json"), b, 0o644)
	if out, err := exec.Command(python, filepath.Join(tools, "transformers_reference.py"), "gguf", path, dir).CombinedOutput(); err != nil {
		t.Fatalf("transformers_reference.py: %v\n%s", err, out)
	}
	want := readF32(t, filepath.Join(dir, "hidden.f32"))
	onnxBytes, err := os.ReadFile(filepath.Join(mdir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	B, H := len(ids), m.Dim
	var flat, mask []int64
	for _, r := range ids {
		flat = append(flat, r...)
		flat = append(flat, make([]int64, S-len(r))...)
		for j := 0; j < S; j++ {
			mask = append(mask, int64(min(1, max(0, len(r)-j))))
		}
	}
	got := runModel(t, onnxBytes, OutputHidden, flat, make([]int64, len(flat)), mask, B, S, ortgo.NewShape(int64(B), int64(S), int64(H)))
	worst, at := 0.0, 0
	for r, row := range ids {
		for s := range row {
			for j := 0; j < H; j++ {
				d := math.Abs(float64(got[(r*S+s)*H+j] - want[at]))
				worst = math.Max(worst, d)
				at++
			}
		}
	}
	if at != len(want) {
		t.Fatalf("transformers gave %d values, want %d", len(want), at)
	}
	t.Logf("SmolLM2, %d texts (%d tokens): max abs difference %.2g", B, at/H, worst)
	if worst > 1e-3 {
		t.Errorf("hidden states differ from transformers' by %g", worst)
	}

	// The reranker: anna's prompt layout gives transformers' ids, and its
	// graph the label logits at the last token.
	var ref struct {
		IDs    [][]int64 `json:"ids"`
		Labels []int64   `json:"labels"`
	}
	rb, err := os.ReadFile(filepath.Join(dir, "rerank_ids.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(rb, &ref)
	prefix, suffix := tok.IDs(pp.Prefix), tok.IDs(pp.Suffix)
	rerankBytes, err := os.ReadFile(filepath.Join(rdir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	wantLogits := readF32(t, filepath.Join(dir, "rerank.f32"))
	worst = 0
	for i, p := range pairs {
		e := tok.EncodePrompt(prefix, pp.Fill(p[0], p[1]), suffix, rm.MaxLength)
		if !slices.Equal(e.IDs, ref.IDs[i]) {
			t.Fatalf("pair %d: anna lays out %v, transformers %v", i, e.IDs, ref.IDs[i])
		}
		if i == 2 && len(e.IDs) != rm.MaxLength {
			t.Fatalf("the long pair is %d tokens, want it cut to %d", len(e.IDs), rm.MaxLength)
		}
		got := runModel(t, rerankBytes, OutputLogits, e.IDs, make([]int64, len(e.IDs)), e.Mask, 1, len(e.IDs), ortgo.NewShape(1, 2))
		for j := range got {
			worst = math.Max(worst, math.Abs(float64(got[j]-wantLogits[i*2+j])))
		}
		t.Logf("pair %d: logits no %.3f yes %.3f (transformers %.3f %.3f)", i, got[0], got[1], wantLogits[i*2], wantLogits[i*2+1])
	}
	if worst > 1e-3 {
		t.Errorf("reranker label logits differ from transformers' by %g", worst)
	}
}

// TestXLMRobertaMatchesTransformers: a tiny random XLM-RoBERTa cross-encoder
// (XLMRobertaForSequenceClassification) from transformers, imported from
// its safetensors, gives transformers' hidden states on every real token of
// a right-padded batch (positions counted from the pad id) as an embedder,
// and its logits as a reranker (<= 1e-4).
func TestXLMRobertaMatchesTransformers(t *testing.T) {
	needORT(t)
	python, tools := pyref.Python(t, "torch", "transformers"), pyref.Tool(t, "")
	// Pad id 1 fills the second row, as the tokenizer pads.
	ids := [][]int64{{0, 17, 3, 60, 22, 9, 41, 2}, {0, 33, 12, 2, 1, 1, 1, 1}}
	mask := [][]int64{{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}}
	ref := tinyReference(t, python, tools, "xlm-roberta", 5, ids, mask)
	dir, flat, fm, types := ref.dir, ref.ids, ref.mask, ref.types
	B, S, H := len(ids), len(ids[0]), ref.cfg.HiddenSize
	for _, task := range []string{model.TaskEmbed, model.TaskRerank} {
		g, err := Build(ref.cfg, ref.tensors, task)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		if task == model.TaskEmbed {
			got := runModel(t, graphBytes(t, g), OutputHidden, flat, types, fm, B, S, ortgo.NewShape(int64(B), int64(S), int64(H)))
			want := readF32(t, filepath.Join(dir, "hidden.f32"))
			for k := range got {
				if fm[k/H] == 1 {
					worst = math.Max(worst, math.Abs(float64(got[k]-want[k])))
				}
			}
		} else {
			got := runModel(t, graphBytes(t, g), OutputLogits, flat, types, fm, B, S, ortgo.NewShape(int64(B), 1))
			want := readF32(t, filepath.Join(dir, "logits.f32"))
			for k := range got {
				worst = math.Max(worst, math.Abs(float64(got[k]-want[k])))
			}
		}
		t.Logf("xlm-roberta %s: max abs difference %.2g", task, worst)
		if worst > 1e-4 {
			t.Errorf("xlm-roberta %s: differs from transformers by %g", task, worst)
		}
	}
}
