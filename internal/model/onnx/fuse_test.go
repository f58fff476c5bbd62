package onnx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/model"
)

// optimizedOps has ONNX Runtime load onnxBytes with anna's session options
// (full optimisation), save the graph it will run, and returns that
// graph's operator counts ("com.microsoft.Attention", "MatMul", ...).
func optimizedOps(t *testing.T, onnxBytes []byte, output string) map[string]int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "optimized.onnx")
	sess, err := ort.NewSessionFromBytes(onnxBytes, []string{InputIDs, InputMask, InputTypeIDs}, []string{output},
		ort.Options{IntraOpThreads: 1, OptimizedModelPath: path})
	if err != nil {
		t.Fatal(err)
	}
	sess.Destroy()
	m, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return opCounts(m)
}

// opCounts counts m's operators, those of If branches included.
func opCounts(m *ReadModel) map[string]int {
	ops := map[string]int{}
	var count func(m *ReadModel)
	count = func(m *ReadModel) {
		for _, n := range m.Nodes {
			name := n.OpType
			if n.Domain != "" {
				name = n.Domain + "." + name
			}
			ops[name]++
			for _, a := range n.Attrs {
				if a.G != nil {
					count(a.G)
				}
			}
		}
	}
	count(m)
	return ops
}

func formatOps(ops map[string]int) string {
	var s []string
	for op, n := range ops {
		s = append(s, fmt.Sprintf("%s×%d", op, n))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// paddedBatch is two sequences of different lengths, right-padded.
func paddedBatch() (ids, types, mask []int64, batch, seq int) {
	seqs := [][]int64{{2, 17, 33, 8, 41, 3, 11}, {2, 9, 3}}
	batch, seq = 2, 7
	ids, types, mask = make([]int64, batch*seq), make([]int64, batch*seq), make([]int64, batch*seq)
	for b := range seqs {
		for i := range seqs[b] {
			ids[b*seq+i], mask[b*seq+i] = seqs[b][i], 1
			types[b*seq+i] = int64(i % 2)
		}
	}
	return ids, types, mask, batch, seq
}

// fullBatch is two sequences of the same length: no padding, so the
// fused graph's attention takes its unmasked branch.
func fullBatch() (ids, types, mask []int64, batch, seq int) {
	ids = []int64{2, 17, 33, 8, 41, 3, 2, 9, 12, 5, 40, 3}
	batch, seq = 2, 6
	types, mask = make([]int64, batch*seq), make([]int64, batch*seq)
	for i := range mask {
		mask[i], types[i] = 1, int64(i%seq/3)
	}
	return ids, types, mask, batch, seq
}

// testBatches are the batches the fused and int8 graphs are checked on:
// one with padding (the masked attention) and one without (the unmasked).
var testBatches = []struct {
	name string
	make func() (ids, types, mask []int64, batch, seq int)
}{{"padded", paddedBatch}, {"full", fullBatch}}

// batchDiff runs graphs a and b of task on the batch batch makes and
// returns the largest absolute difference between their outputs, padding
// positions of hidden states left out (no one reads them).
func batchDiff(t *testing.T, a, b []byte, task string, hidden, labels int, batch func() (ids, types, mask []int64, batch, seq int)) float64 {
	t.Helper()
	ids, types, mask, B, S := batch()
	out, shape := OutputHidden, ortgo.NewShape(int64(B), int64(S), int64(hidden))
	if task == model.TaskRerank {
		out, shape = OutputLogits, ortgo.NewShape(int64(B), int64(labels))
	}
	x := runModel(t, a, out, ids, types, mask, B, S, shape)
	y := runModel(t, b, out, ids, types, mask, B, S, shape)
	worst := 0.0
	for i := range x {
		if task == model.TaskEmbed && mask[i/hidden] == 0 {
			continue
		}
		worst = math.Max(worst, math.Abs(float64(x[i]-y[i])))
	}
	return worst
}

func export(t *testing.T, cfg *model.Config, ts map[string]*safetensors.Tensor, task string, o BuildOptions) []byte {
	t.Helper()
	g, err := BuildWith(cfg, ts, task, o)
	if err != nil {
		t.Fatal(err)
	}
	return graphBytes(t, g)
}

// TestFusedGraph: the graph ONNX Runtime runs for a fused export (saved by
// the session, read back) has per layer one If choosing between two
// MultiHeadAttentions (unmasked, masked), two SkipLayerNormalizations
// and one BiasGelu (FastGelu for gelu_new), and none of the unfused
// graph's Softmax, Erf or per-layer LayerNormalization; the unfused graph
// gets no Attention or SkipLayerNormalization from ONNX Runtime's
// optimizer (which is why anna writes the fused operators itself). Then
// the two forms give the same outputs on a padded batch and on one
// without padding (each branch of the If), for each activation and for
// RoBERTa's positions, both tasks.
func TestFusedGraph(t *testing.T) {
	needORT(t)
	cfg := tinyConfig("gelu")
	L := cfg.NumHiddenLayers
	fused := optimizedOps(t, export(t, cfg, tinyTensors(cfg, "", 7), model.TaskEmbed, BuildOptions{}), OutputHidden)
	t.Logf("fused, as ONNX Runtime runs it: %s", formatOps(fused))
	want := map[string]int{"If": L, "com.microsoft.MultiHeadAttention": 2 * L, "com.microsoft.SkipLayerNormalization": 2 * L, "com.microsoft.BiasGelu": L,
		"Softmax": 0, "Erf": 0, "LayerNormalization": 1, "Transpose": 0}
	for op, n := range want {
		if fused[op] != n {
			t.Errorf("optimized fused graph has %d %s, want %d", fused[op], op, n)
		}
	}
	unfused := optimizedOps(t, export(t, cfg, tinyTensors(cfg, "", 7), model.TaskEmbed, BuildOptions{Unfused: true}), OutputHidden)
	t.Logf("unfused, as ONNX Runtime runs it: %s", formatOps(unfused))
	if unfused["com.microsoft.Attention"] != 0 || unfused["com.microsoft.SkipLayerNormalization"] != 0 {
		t.Logf("note: ONNX Runtime now fuses the unfused graph's attention or residual LayerNorms itself")
	}
	gnew := tinyConfig("gelu_new")
	if ops := optimizedOps(t, export(t, gnew, tinyTensors(gnew, "", 7), model.TaskEmbed, BuildOptions{}), OutputHidden); ops["com.microsoft.FastGelu"] != L {
		t.Errorf("gelu_new: optimized graph has %d FastGelu, want %d (%s)", ops["com.microsoft.FastGelu"], L, formatOps(ops))
	}

	for _, c := range []struct{ act, prefix, arch string }{{"gelu", "", "bert"}, {"relu", "bert.", "bert"}, {"gelu_new", "bert.", "bert"}, {"gelu", "roberta.", "roberta"}} {
		t.Run(c.arch+"/"+c.act, func(t *testing.T) {
			cfg := tinyConfig(c.act)
			cfg.ModelType = c.arch
			if c.arch == "roberta" {
				cfg.PadTokenID = 1
			}
			ts := tinyTensors(cfg, c.prefix, 11)
			H, NL := cfg.HiddenSize, cfg.NumLabels()
			tasks := []string{model.TaskEmbed, model.TaskRerank}
			if c.arch == "roberta" {
				tasks = tasks[:1] // tinyTensors has BERT's head only
			}
			for _, task := range tasks {
				fused, unfused := export(t, cfg, ts, task, BuildOptions{}), export(t, cfg, ts, task, BuildOptions{Unfused: true})
				for _, tb := range testBatches {
					worst := batchDiff(t, fused, unfused, task, H, NL, tb.make)
					t.Logf("%s, %s batch: fused vs unfused max abs diff %.2g", task, tb.name, worst)
					if worst > 1e-5 {
						t.Errorf("%s, %s batch: fused and unfused graphs differ by %g (want ≤ 1e-5)", task, tb.name, worst)
					}
				}
			}
		})
	}
}

// TestUnfusedIsThePreviousGraph: the unfused form is byte for byte the
// graph anna wrote before the fused one (its first 8 bytes of sha256 for
// this tiny model were recorded from commit 4341513), so benchmarks that
// compare the two measure what the fusion changed.
func TestUnfusedIsThePreviousGraph(t *testing.T) {
	cfg := tinyConfig("gelu")
	b := export(t, cfg, tinyTensors(cfg, "", 3), model.TaskEmbed, BuildOptions{Unfused: true})
	if got, want := sha8(b), previousTinySHA; got != want {
		t.Errorf("unfused tiny export sha256 %s, the previous graph's %s", got, want)
	}
}

// previousTinySHA is sha8 of tinyConfig("gelu")'s embed export with
// tinyTensors seed 3, as commit 4341513 (before the fused graph) wrote it.
const previousTinySHA = "20e12781f26eeb23"

func sha8(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
