package inference

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model"
)

// decoderDir writes a tiny random decoder of arch with technique (see
// testmodels.WithTechnique) as a model directory (MiniLM's tokenizer, so
// its vocabulary), for task, with quantize ("" or int8), and returns it.
func decoderDir(t *testing.T, arch, technique, task, quantize string) string {
	t.Helper()
	cfg := testmodels.MiniLMVocab(testmodels.Decoder(arch))
	cfg.MaxPositionEmbeddings = 256 // the reranker's prompt
	ts := llama.RandomTensors(cfg, 0.15, 21)
	if err := testmodels.WithTechnique(cfg, ts, technique, 22); err != nil {
		t.Fatal(err)
	}
	s := onnx.Settings{Task: task, Quantize: quantize, MaxLength: 256}
	switch {
	case task == model.TaskRerank:
		cfg.TieWordEmbeddings = true
	case technique == "plain":
		s.Pooling = model.PoolingLastToken
	case technique == model.AttentionBidirectional:
		s.Pooling = model.PoolingMean
	case technique == model.PoolingMemory:
		s.Memory = &model.MemoryTokens{Count: testmodels.MemoryCount, QueryInstruction: "q", DocumentInstruction: "d"}
	case technique == model.PoolingCausal2Vec:
		s.Context = &model.ContextModel{Name: "letters", Fingerprint: "letters", Dim: testmodels.ContextDimTiny}
	}
	dir := filepath.Join(t.TempDir(), arch+"-"+technique)
	if _, err := onnx.WriteDir(context.Background(), dir, cfg, nil, ts, testmodels.MiniLMTokenizer(t), s); err != nil {
		t.Fatal(err)
	}
	return dir
}

var decoderTexts = []string{"", "what do ribosomes do?", "Ribosomes translate messenger RNA into protein.",
	strings.Repeat("Mitochondria produce most of the cell's ATP. ", 6), "a", "Proteins fold.", "the cell membrane"}

// runDecoder runs the texts (as pairs with a query for a reranker) through
// dir's model on backend and returns each input's output: its real rows'
// hidden states, or its pooled row.
func runDecoder(t *testing.T, dir, backend string, o Options) [][]float32 {
	t.Helper()
	ctx := context.Background()
	md, err := model.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Task: md.Manifest.Task, Name: "test", Want: "that"}
	o.Backend = backend
	m, err := Open(ctx, dir, spec, o)
	if err != nil {
		t.Fatalf("backend %s: %v", backend, err)
	}
	defer m.Close()
	in := Inputs{Texts: decoderTexts}
	man, cfg := m.Manifest(), m.Config()
	switch {
	case man.Task == model.TaskRerank:
		in.First = func(int) string { return "what do ribosomes do?" }
	case cfg.MemoryTokens > 0:
		in.Reserve = cfg.MemoryTokens
		in.Prepare = func(_ int, ids []int64) []int64 {
			for j := 0; j < cfg.MemoryTokens; j++ {
				ids = append(ids, int64(cfg.VocabSize+j))
			}
			return ids
		}
	case cfg.Causal2Vec != nil:
		in.Reserve = 1
		in.Prepare = func(_ int, ids []int64) []int64 {
			return slices.Insert(ids, min(1, len(ids)), model.ContextPlaceholder)
		}
		in.Context, _ = testmodels.Letters(decoderTexts)
	}
	out := make([][]float32, len(decoderTexts))
	var mu sync.Mutex
	err = m.Run(ctx, in, func(b Batch) error {
		mu.Lock()
		defer mu.Unlock()
		dim := len(b.Out) / len(b.Rows)
		for j, i := range b.Rows {
			row := b.Out[j*dim : (j+1)*dim]
			if m.output == model.OutputHidden { // the real rows only
				H := dim / b.Seq
				row = nil
				for s := 0; s < b.Seq; s++ {
					if b.Mask[j*b.Seq+s] != 0 {
						row = append(row, b.Out[(j*b.Seq+s)*H:(j*b.Seq+s+1)*H]...)
					}
				}
			}
			out[i] = slices.Clone(row)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("backend %s: %v", backend, err)
	}
	return out
}

func maxDiff(t *testing.T, a, b [][]float32) float64 {
	t.Helper()
	worst := 0.0
	for i := range a {
		if len(a[i]) != len(b[i]) || len(a[i]) == 0 {
			t.Fatalf("input %d: %d vs %d values", i, len(a[i]), len(b[i]))
		}
		for j := range a[i] {
			worst = max(worst, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return worst
}

// decoderCases are the decoders the Go backend runs: every architecture,
// pooling outside the graph (last token, mean over bidirectional
// attention), the trained heads, AutoRegEmbed, Causal2Vec and a reranker.
var decoderCases = []struct{ arch, technique, task string }{
	{"llama", "plain", model.TaskEmbed}, {"qwen2", "plain", model.TaskEmbed}, {"qwen3", "plain", model.TaskEmbed},
	{"mistral", model.AttentionBidirectional, model.TaskEmbed}, {"llama", model.PoolingLatent, model.TaskEmbed},
	{"qwen2", model.PoolingMultiLayer, model.TaskEmbed}, {"llama", model.PoolingMemory, model.TaskEmbed},
	{"qwen3", model.PoolingCausal2Vec, model.TaskEmbed}, {"llama", "plain", model.TaskRerank},
}

// goAndORT runs the model at dir through Run with the Go backend in
// batches of 3 over two workers, reports an error where that differs by
// more than 1e-6 from one input at a time, and returns its outputs and,
// where ONNX Runtime is built, ONNX Runtime's in batches of 3 (else nil).
func goAndORT(t *testing.T, dir string) (goOut, ortOut [][]float32) {
	t.Helper()
	goOut = runDecoder(t, dir, BackendGo, Options{BatchSize: 3, Workers: 2, IntraOpThreads: 2})
	alone := runDecoder(t, dir, BackendGo, Options{BatchSize: 1, Workers: 1, IntraOpThreads: 1})
	if d := maxDiff(t, goOut, alone); d > 1e-6 {
		t.Errorf("batches of 3 and of 1 differ by %.2e", d)
	}
	if !ort.Built {
		return goOut, nil
	}
	return goOut, runDecoder(t, dir, BackendORT, Options{BatchSize: 3, Workers: 2, IntraOpThreads: 2})
}

// TestGoDecoderMatchesORT: the Go backend runs every decoder case through
// Run (batched by length over two workers, right padding) and gives ONNX
// Runtime's outputs within 1e-5 (skipped without ONNX Runtime); in every
// build its outputs do not depend on how inputs are batched.
func TestGoDecoderMatchesORT(t *testing.T) {
	for _, c := range decoderCases {
		t.Run(c.arch+"/"+c.technique+"/"+c.task, func(t *testing.T) {
			goOut, ortOut := goAndORT(t, decoderDir(t, c.arch, c.technique, c.task, ""))
			if ortOut == nil {
				return
			}
			d := maxDiff(t, goOut, ortOut)
			t.Logf("largest difference from ONNX Runtime %.2e", d)
			if d > 1e-5 {
				t.Errorf("the Go backend differs from ONNX Runtime by %.2e (want ≤ 1e-5)", d)
			}
		})
	}
}
