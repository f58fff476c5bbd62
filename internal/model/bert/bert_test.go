package bert

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/testmodels"
	trainbert "github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
)

func tinyConfig() *model.Config {
	return &model.Config{ModelType: "bert", VocabSize: 50, HiddenSize: 8, NumHiddenLayers: 2, NumAttentionHeads: 2,
		IntermediateSize: 16, MaxPositionEmbeddings: 12, TypeVocabSize: 2, HiddenAct: "gelu", LayerNormEps: 1e-12, PositionEmbeddingType: "absolute"}
}

// randomTensors is a random BertModel checkpoint of cfg.
func randomTensors(cfg *model.Config, seed uint64) map[string]*safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*safetensors.Tensor{}
	put := func(name string, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(rng.NormFloat64() * 0.3)
		}
		out[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: d}
	}
	C, FF := cfg.HiddenSize, cfg.IntermediateSize
	put("embeddings.word_embeddings.weight", cfg.VocabSize, C)
	put("embeddings.position_embeddings.weight", cfg.MaxPositionEmbeddings, C)
	put("embeddings.token_type_embeddings.weight", cfg.TypeVocabSize, C)
	put("embeddings.LayerNorm.weight", C)
	put("embeddings.LayerNorm.bias", C)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "encoder.layer." + string(rune('0'+l)) + "."
		for _, n := range []string{"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"} {
			put(p+n+".weight", C, C)
			put(p+n+".bias", C)
		}
		put(p+"intermediate.dense.weight", FF, C)
		put(p+"intermediate.dense.bias", FF)
		put(p+"output.dense.weight", C, FF)
		put(p+"output.dense.bias", C)
		for _, n := range []string{"attention.output.LayerNorm", "output.LayerNorm"} {
			put(p+n+".weight", C)
			put(p+n+".bias", C)
		}
	}
	return out
}

func writeGraph(t *testing.T, cfg *model.Config, ts map[string]*safetensors.Tensor, o onnx.BuildOptions) string {
	t.Helper()
	g, err := onnx.BuildWith(cfg, ts, model.TaskEmbed, o)
	if err != nil {
		t.Fatal(err)
	}
	return testmodels.WriteGraph(t, g)
}

// TestReadGraph: the weights written by the converter, fused (packed QKV)
// and unfused, come back exactly under their Hugging Face names; an int8
// graph is refused as quantized.
func TestReadGraph(t *testing.T) {
	cfg := tinyConfig()
	want := randomTensors(cfg, 1)
	for _, o := range []onnx.BuildOptions{{}, {Unfused: true}} {
		readBack(t, writeGraph(t, cfg, want, o), cfg, want, o.Unfused)
	}
	_, err := ReadGraph(writeGraph(t, cfg, want, onnx.BuildOptions{Quantize: model.QuantizeInt8}), cfg)
	if err == nil || !strings.Contains(err.Error(), "quantized") {
		t.Errorf("int8 graph: %v, want it refused as quantized", err)
	}
}

// readBack checks that ReadGraph gives the graph at path's weights as
// want, exactly and nothing more (unfused: the graph's form, for messages).
func readBack(t *testing.T, path string, cfg *model.Config, want map[string]*safetensors.Tensor, unfused bool) {
	t.Helper()
	got, err := ReadGraph(path, cfg)
	if err != nil {
		t.Fatalf("unfused %v: %v", unfused, err)
	}
	if len(got) != len(want) {
		t.Errorf("unfused %v: %d tensors, want %d", unfused, len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) {
			t.Errorf("unfused %v: %s differs (present %v)", unfused, name, ok)
		}
	}
}

// TestForwardMatchesNaive: Forward equals a float64 transcription of BERT
// (embeddings, then per layer attention, residual, LayerNorm, GELU MLP,
// residual, LayerNorm) at every real position of a padded batch.
func TestForwardMatchesNaive(t *testing.T) {
	cfg := tinyConfig()
	ts := randomTensors(cfg, 2)
	m, err := New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{N: 2, T: 5, IDs: []int64{1, 7, 9, 3, 2, 1, 4, 2, 0, 0},
		Types: []int64{0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, Mask: []int64{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}
	got, err := m.Forward(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	C := cfg.HiddenSize
	for n, L := range []int{5, 3} {
		want := naive(cfg, ts, b.IDs[n*b.T:n*b.T+L], b.Types[n*b.T:n*b.T+L], nil)
		for i := range want {
			if d := math.Abs(want[i] - float64(got[n*b.T*C+i])); d > 1e-4 {
				t.Fatalf("sequence %d value %d: %v, want %v", n, i, got[n*b.T*C+i], want[i])
			}
		}
	}
}

// TestForwardWideMatchesNaive: the same with shapes that fill the
// kernels' tiles and leave partial ones (hidden 64 in 2 heads of 32,
// sequences of 37, 20 and 5 tokens, one with a hole in its mask), the
// padding rows zero, and the same bits on 1, 2 and 3 goroutines.
func TestForwardWideMatchesNaive(t *testing.T) {
	cfg := tinyConfig()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.MaxPositionEmbeddings = 64, 128, 40
	ts := randomTensors(cfg, 4)
	m, err := New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	lens := []int{37, 20, 5}
	N, T, C := len(lens), 37, cfg.HiddenSize
	b := &Batch{N: N, T: T, IDs: make([]int64, N*T), Types: make([]int64, N*T), Mask: make([]int64, N*T)}
	rng := rand.New(rand.NewPCG(9, 9))
	for n, L := range lens {
		for i := 0; i < L; i++ {
			b.IDs[n*T+i], b.Mask[n*T+i] = int64(rng.IntN(cfg.VocabSize)), 1
			if i > L/2 {
				b.Types[n*T+i] = 1
			}
		}
	}
	b.Mask[1*T+7] = 0 // a hole: key 7 of sequence 1 is hidden
	var first []float32
	for _, th := range []int{1, 2, 3} {
		got, err := m.Forward(b, th)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = got
			for n, L := range lens {
				want := naive(cfg, ts, b.IDs[n*T:n*T+L], b.Types[n*T:n*T+L], b.Mask[n*T:n*T+L])
				for i := range want {
					if d := math.Abs(want[i] - float64(got[n*T*C+i])); d > 1e-4 {
						t.Fatalf("sequence %d value %d: %v, want %v", n, i, got[n*T*C+i], want[i])
					}
				}
				for i := L * C; i < T*C; i++ {
					if got[n*T*C+i] != 0 {
						t.Fatalf("sequence %d: padding value %d is %v, want 0", n, i, got[n*T*C+i])
					}
				}
			}
			continue
		}
		if !slices.Equal(got, first) {
			t.Errorf("%d goroutines give other values than 1", th)
		}
	}
}

// naiveAttention is multi-head self-attention over one sequence of L rows
// of H heads D wide in float64: per head softmax(Q·Kᵀ/√D)·V, where keys
// whose mask is 0 get no attention (mask nil: none hidden).
func naiveAttention(q, k, v []float64, L, H, D int, mask []int64) []float64 {
	C := H * D
	ctx := make([]float64, L*C)
	for h := 0; h < H; h++ {
		for i := 0; i < L; i++ {
			s := make([]float64, L)
			var mx = math.Inf(-1)
			for j := 0; j < L; j++ {
				for d := 0; d < D; d++ {
					s[j] += q[i*C+h*D+d] * k[j*C+h*D+d]
				}
				s[j] /= math.Sqrt(float64(D))
				if mask != nil && mask[j] == 0 {
					s[j] = math.Inf(-1)
				}
				mx = math.Max(mx, s[j])
			}
			var z float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				z += s[j]
			}
			for j := range s {
				for d := 0; d < D; d++ {
					ctx[i*C+h*D+d] += s[j] / z * v[j*C+h*D+d]
				}
			}
		}
	}
	return ctx
}

// naive is BERT over one unpadded sequence in float64; keys whose mask is
// 0 get no attention (mask nil: none hidden).
func naive(cfg *model.Config, ts map[string]*safetensors.Tensor, ids, types, mask []int64) []float64 {
	C, H, FF, L := cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, len(ids)
	D := C / H
	w := func(name string) []float32 { return ts[name].Data }
	ln := func(x []float64, g, b []float32) {
		for i := 0; i < L; i++ {
			r := x[i*C : i*C+C]
			var mu, v float64
			for _, a := range r {
				mu += a
			}
			mu /= float64(C)
			for _, a := range r {
				v += (a - mu) * (a - mu)
			}
			v /= float64(C)
			for c := range r {
				r[c] = (r[c]-mu)/math.Sqrt(v+cfg.LayerNormEps)*float64(g[c]) + float64(b[c])
			}
		}
	}
	lin := func(x []float64, in, out int, name string) []float64 {
		W, B := w(name+".weight"), w(name+".bias")
		y := make([]float64, L*out)
		for i := 0; i < L; i++ {
			for o := 0; o < out; o++ {
				s := float64(B[o])
				for k := 0; k < in; k++ {
					s += x[i*in+k] * float64(W[o*in+k])
				}
				y[i*out+o] = s
			}
		}
		return y
	}
	x := make([]float64, L*C)
	for i := 0; i < L; i++ {
		for c := 0; c < C; c++ {
			x[i*C+c] = float64(w("embeddings.word_embeddings.weight")[int(ids[i])*C+c]) +
				float64(w("embeddings.position_embeddings.weight")[i*C+c]) + float64(w("embeddings.token_type_embeddings.weight")[int(types[i])*C+c])
		}
	}
	ln(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "encoder.layer." + string(rune('0'+l)) + "."
		q, k, v := lin(x, C, C, p+"attention.self.query"), lin(x, C, C, p+"attention.self.key"), lin(x, C, C, p+"attention.self.value")
		ctx := naiveAttention(q, k, v, L, H, D, mask)
		a := lin(ctx, C, C, p+"attention.output.dense")
		for i := range a {
			a[i] += x[i]
		}
		ln(a, w(p+"attention.output.LayerNorm.weight"), w(p+"attention.output.LayerNorm.bias"))
		f := lin(a, C, FF, p+"intermediate.dense")
		for i, u := range f {
			f[i] = 0.5 * u * (1 + math.Erf(u/math.Sqrt2))
		}
		o := lin(f, FF, C, p+"output.dense")
		for i := range o {
			o[i] += a[i]
		}
		ln(o, w(p+"output.LayerNorm.weight"), w(p+"output.LayerNorm.bias"))
		x = o
	}
	return x
}

// TestBadInput: misuse is an error naming what is wrong, never a panic.
func TestBadInput(t *testing.T) {
	cfg := tinyConfig()
	ts := randomTensors(cfg, 3)
	delete(ts, "encoder.layer.1.output.dense.bias")
	ts["embeddings.LayerNorm.weight"].Shape = []int{9}
	if _, err := New(cfg, ts); err == nil || !strings.Contains(err.Error(), "encoder.layer.1.output.dense.bias") || !strings.Contains(err.Error(), "embeddings.LayerNorm.weight (shape [9]") {
		t.Errorf("missing and misshapen tensors: %v", err)
	}
	m, err := New(cfg, randomTensors(cfg, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		b    Batch
		want string
	}{
		{Batch{N: 1, T: 2, IDs: []int64{1}, Mask: []int64{1, 1}}, "does not match"},
		{Batch{N: 1, T: 2, IDs: []int64{1, 50}, Mask: []int64{1, 1}}, "outside the vocabulary"},
		{Batch{N: 1, T: 2, IDs: []int64{1, 2}, Types: []int64{0, 2}, Mask: []int64{1, 1}}, "outside the type vocabulary"},
		{Batch{N: 1, T: 2, IDs: []int64{1, 2}, Mask: []int64{0, 1}}, "no tokens"},
		{Batch{N: 1, T: 13, IDs: make([]int64, 13), Mask: slices.Repeat([]int64{1}, 13)}, "max_position_embeddings"},
	} {
		if _, err := m.Forward(&c.b, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("batch %+v: %v, want %q", c.b, err, c.want)
		}
	}
}

// TestReadGraphCrossEncoder: a BertForSequenceClassification checkpoint
// (encoder names under "bert.", the classifier outside it) comes back from
// its cross-encoder graph, fused and unfused, exactly under its own names,
// and the model LoadGraph builds scores as New's on the checkpoint does,
// bit for bit; its int8 graph loads too and scores near it. (The fused
// graph names its Q/K/V product without the prefix, arch.FusedQKV;
// ReadGraph looked for it under the prefix and failed.)
func TestReadGraphCrossEncoder(t *testing.T) {
	cfg := tinyConfig()
	cfg.NumLabelsField = 2
	want := trainbert.RandomTensors(cfg, true, 0.3, 4)
	ref, err := New(cfg, want)
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{N: 2, T: 5, IDs: []int64{2, 17, 33, 8, 3, 2, 9, 3, 0, 0}, Types: []int64{0, 0, 1, 1, 1, 0, 1, 1, 0, 0}, Mask: []int64{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}
	logits := func(m *Model) []float32 {
		h, err := m.Forward(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Classify(h, b.N, b.T, 1)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	wantLogits := logits(ref)
	for _, o := range []onnx.BuildOptions{{}, {Unfused: true}} {
		g, err := onnx.BuildWith(cfg, want, model.TaskRerank, o)
		if err != nil {
			t.Fatal(err)
		}
		path := testmodels.WriteGraph(t, g)
		readBack(t, path, cfg, want, o.Unfused)
		m, err := LoadGraph(path, cfg)
		if err != nil {
			t.Fatalf("unfused %v: %v", o.Unfused, err)
		}
		if l := logits(m); !slices.Equal(l, wantLogits) {
			t.Errorf("unfused %v: logits %v, the checkpoint's %v", o.Unfused, l, wantLogits)
		}
	}
	// The int8 graph names its Q/K/V product as the fused one does.
	g, err := onnx.BuildWith(cfg, want, model.TaskRerank, onnx.BuildOptions{Quantize: model.QuantizeInt8})
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadGraph(testmodels.WriteGraph(t, g), cfg)
	if err != nil {
		t.Fatalf("int8: %v", err)
	}
	l := logits(m)
	if len(l) != len(wantLogits) {
		t.Fatalf("int8: %d logits, want %d", len(l), len(wantLogits))
	}
	worst := 0.0
	for i := range l {
		worst = max(worst, math.Abs(float64(l[i]-wantLogits[i])))
	}
	t.Logf("int8 logits %v, float32 %v: largest difference %.2g", l, wantLogits, worst)
	if worst > 0.05 {
		t.Errorf("int8: logits %v, the checkpoint's %v", l, wantLogits)
	}
}
