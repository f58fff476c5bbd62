package bert

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// naiveQuantCols is model/onnx's weight quantizer written again: W [out,
// in] to q[o][i] with scale max|row o|/64 (1 for a zero row), q =
// round(w/scale).
func naiveQuantCols(w []float32, out, in int) ([]float64, []float64) {
	q, sc := make([]float64, out*in), make([]float64, out)
	for o := 0; o < out; o++ {
		var m float32
		for i := 0; i < in; i++ {
			m = max(m, float32(math.Abs(float64(w[o*in+i]))))
		}
		s := float32(1)
		if m != 0 {
			s = m / 64
		}
		sc[o] = float64(s)
		for i := 0; i < in; i++ {
			q[o*in+i] = math.Max(-64, math.Min(64, math.Round(float64(w[o*in+i])/float64(s))))
		}
	}
	return q, sc
}

// naiveInt8 is the int8 graph's function in float64 (fuse.go), over
// sequences of ids (types 0, no padding): the integer parts exact, the
// rest in float64. Every product's input is quantized per token around 128
// with scale max|x|/127 — or, with qkvPerBatch (the graphs of before issue
// 64), the Q/K/V input once over every token of every sequence
// (DynamicQuantizeLinear); GELU is the tanh form.
func naiveInt8(cfg *model.Config, ts map[string]*safetensors.Tensor, seqs [][]int64, qkvPerBatch bool) [][]float64 {
	C, H, FF := cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize
	D := C / H
	w := func(name string) []float32 { return ts[name].Data }
	ln := func(r []float64, g, b []float32) {
		var mu, v float64
		for _, a := range r {
			mu += a
		}
		mu /= float64(len(r))
		for _, a := range r {
			v += (a - mu) * (a - mu)
		}
		v /= float64(len(r))
		for c := range r {
			r[c] = (r[c]-mu)/math.Sqrt(v+cfg.LayerNormEps)*float64(g[c]) + float64(b[c])
		}
	}
	// qlin is Σ(q(x) − zp)·Wq · wscale · xscale for one row quantized with
	// (xs, zp).
	qlin := func(x []float64, xs, zp float64, name string, out int) []float64 {
		in := len(x)
		wq, ws := naiveQuantCols(w(name+".weight"), out, in)
		xq := make([]float64, in)
		for i, v := range x {
			xq[i] = math.Max(0, math.Min(255, math.RoundToEven(v/xs)+zp)) - zp
		}
		y := make([]float64, out)
		for o := range y {
			var s float64
			for i := range xq {
				s += xq[i] * wq[o*in+i]
			}
			y[o] = s * ws[o] * xs
		}
		return y
	}
	rowq := func(x []float64, name string, out int) []float64 {
		var m float64
		for _, v := range x {
			m = math.Max(m, math.Abs(v))
		}
		return qlin(x, math.Max(m, 1e-12)/127, 128, name, out)
	}
	xs := make([][]float64, len(seqs)) // every token's row, per sequence
	for n, ids := range seqs {
		for i, id := range ids {
			r := make([]float64, C)
			for c := range r {
				r[c] = float64(w("embeddings.word_embeddings.weight")[int(id)*C+c]) + float64(w("embeddings.position_embeddings.weight")[i*C+c]) +
					float64(w("embeddings.token_type_embeddings.weight")[c])
			}
			ln(r, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
			xs[n] = append(xs[n], r...)
		}
	}
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "encoder.layer." + string(rune('0'+l)) + "."
		lo, hi := 0.0, 0.0
		for _, x := range xs {
			for _, v := range x {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		scale := (hi - lo) / 255
		zp := math.RoundToEven(math.Max(0, math.Min(255, -lo/scale)))
		for n, x := range xs {
			L := len(x) / C
			q, k, v := make([]float64, L*C), make([]float64, L*C), make([]float64, L*C)
			for i := 0; i < L; i++ {
				for j, out := range [][]float64{q, k, v} {
					name := p + "attention.self." + []string{"query", "key", "value"}[j]
					var y []float64
					if qkvPerBatch {
						y = qlin(x[i*C:i*C+C], scale, zp, name, C)
					} else {
						y = rowq(x[i*C:i*C+C], name, C)
					}
					for c := range y {
						out[i*C+c] = y[c] + float64(w(name + ".bias")[c])
					}
				}
			}
			ctx := naiveAttention(q, k, v, L, H, D, nil)
			for i := 0; i < L; i++ {
				r := x[i*C : i*C+C]
				a := rowq(ctx[i*C:i*C+C], p+"attention.output.dense", C)
				for c := range r {
					r[c] += a[c] + float64(w(p + "attention.output.dense.bias")[c])
				}
				ln(r, w(p+"attention.output.LayerNorm.weight"), w(p+"attention.output.LayerNorm.bias"))
				f := rowq(r, p+"intermediate.dense", FF)
				for c, u := range f {
					u += float64(w(p + "intermediate.dense.bias")[c])
					f[c] = 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
				}
				o := rowq(f, p+"output.dense", C)
				for c := range r {
					r[c] += o[c] + float64(w(p + "output.dense.bias")[c])
				}
				ln(r, w(p+"output.LayerNorm.weight"), w(p+"output.LayerNorm.bias"))
			}
			xs[n] = x
		}
	}
	return xs
}

// TestInt8ForwardMatchesNaive: a random BERT's int8 graph (internal/model/onnx,
// Quantize int8) read back (LoadGraph → ReadGraphInt8, NewInt8) and run
// through Forward on a padded batch gives naiveInt8's values (the graph's
// function in float64, quantizing on its own) to within the rare value
// rounded to the other side of a quantization step (mean |diff| ≤ 1e-4,
// max ≤ 0.05; 2e-8 and 2e-7 when written), and is much closer to it than to the float32 model's
// forward (so the int8 arithmetic is what runs); the padding rows are
// zero, 1, 2 and 3 goroutines give the same bits, and so does each
// sequence run alone (a text's vector is its own). The same weights with
// the Q/K/V input quantized per batch (Int8Graph.QKVPerBatch, the graphs
// converted before issue 64) give naiveInt8's values for that scheme.
func TestInt8ForwardMatchesNaive(t *testing.T) {
	cfg := tinyConfig()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.MaxPositionEmbeddings = 64, 128, 40
	ts := randomTensors(cfg, 5)
	path := writeGraph(t, cfg, ts, onnx.BuildOptions{Quantize: model.QuantizeInt8})
	m, err := LoadGraph(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.q == nil || m.q.act != "gelu_pytorch_tanh" || m.q.qkvPerBatch {
		t.Fatalf("an int8 graph loaded as %+v, want int8 layers with FastGelu, every input quantized per row", m.q)
	}
	g, err := ReadGraphInt8(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.QKVPerBatch = true
	old, err := NewInt8(cfg, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("per row", func(t *testing.T) { checkInt8Forward(t, cfg, ts, m, false) })
	t.Run("Q/K/V per batch", func(t *testing.T) { checkInt8Forward(t, cfg, ts, old, true) })
}

func checkInt8Forward(t *testing.T, cfg *model.Config, ts map[string]*safetensors.Tensor, m *Model, qkvPerBatch bool) {
	lens := []int{23, 9, 4}
	N, T, C := len(lens), 23, cfg.HiddenSize
	b := &Batch{N: N, T: T, IDs: make([]int64, N*T), Mask: make([]int64, N*T)}
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := make([][]int64, N)
	for n, L := range lens {
		for i := 0; i < L; i++ {
			b.IDs[n*T+i], b.Mask[n*T+i] = int64(rng.IntN(cfg.VocabSize)), 1
		}
		seqs[n] = b.IDs[n*T : n*T+L]
	}
	var first []float32
	for _, th := range []int{1, 2, 3} {
		got, err := m.Forward(b, th)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = got
		} else if !slices.Equal(got, first) {
			t.Errorf("%d goroutines give other values than 1", th)
		}
	}
	if !qkvPerBatch {
		for n, L := range lens {
			alone := &Batch{N: 1, T: L, IDs: seqs[n], Mask: b.Mask[n*T : n*T+L]}
			got, err := m.Forward(alone, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, first[n*T*C:n*T*C+L*C]) {
				t.Errorf("sequence %d alone gives other values than in the batch", n)
			}
		}
	}
	want := naiveInt8(cfg, ts, seqs, qkvPerBatch)
	var sum, worst, sumF float64
	count := 0
	for n, L := range lens {
		fl := naive(cfg, ts, seqs[n], make([]int64, L), nil)
		for i := 0; i < L*C; i++ {
			d := math.Abs(want[n][i] - float64(first[n*T*C+i]))
			sum += d
			worst = max(worst, d)
			sumF += math.Abs(fl[i] - float64(first[n*T*C+i]))
			count++
		}
		for i := L * C; i < T*C; i++ {
			if first[n*T*C+i] != 0 {
				t.Fatalf("sequence %d: padding value %d is %v, want 0", n, i, first[n*T*C+i])
			}
		}
	}
	mean, meanF := sum/float64(count), sumF/float64(count)
	t.Logf("int8 forward vs naive int8: mean |diff| %.2e, max %.2e; vs the float32 forward: mean %.2e", mean, worst, meanF)
	if mean > 1e-4 || worst > 0.05 {
		t.Errorf("int8 forward differs from the naive int8 graph: mean |diff| %.2e, max %.2e", mean, worst)
	}
	if mean*5 > meanF {
		t.Errorf("int8 forward is not much closer to the int8 graph (%.2e) than to float32 (%.2e)", mean, meanF)
	}
}

// TestReadGraphInt8: the int8 graph's weights come back as the converter
// wrote them (each int8 weight within half a step of the float32 one) and
// a float32 graph is refused by ReadGraphInt8, as an int8 one by ReadGraph.
func TestReadGraphInt8(t *testing.T) {
	cfg := tinyConfig()
	ts := randomTensors(cfg, 6)
	path := writeGraph(t, cfg, ts, onnx.BuildOptions{Quantize: model.QuantizeInt8})
	g, err := ReadGraphInt8(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	C := cfg.HiddenSize
	for _, name := range []string{"attention.output.dense", "intermediate.dense", "output.dense", "attention.self.qkv"} {
		ql := g.Linears["encoder.layer.1."+name]
		if ql == nil {
			t.Fatalf("%s missing", name)
		}
		var wf func(k, j int) float32 // the float32 weight at [in k, out j]
		switch name {
		case "attention.self.qkv":
			wf = func(k, j int) float32 {
				src := ts["encoder.layer.1.attention.self."+[]string{"query", "key", "value"}[j/C]+".weight"].Data
				return src[(j%C)*C+k]
			}
		default:
			wf = func(k, j int) float32 { return ts["encoder.layer.1."+name+".weight"].Data[j*ql.In+k] }
		}
		for k := 0; k < ql.In; k++ {
			for j := 0; j < ql.Out; j++ {
				if d := math.Abs(float64(ql.W[k*ql.Out+j])*float64(ql.Scale[j]) - float64(wf(k, j))); d > float64(ql.Scale[j])/2*1.0001 {
					t.Fatalf("%s[%d,%d]: %d·%v is not within half a step of %v", name, k, j, ql.W[k*ql.Out+j], ql.Scale[j], wf(k, j))
				}
			}
		}
	}
	if b := g.Tensors["encoder.layer.0.attention.self.qkv.bias"]; b == nil || !slices.Equal(b.Data[C:2*C], ts["encoder.layer.0.attention.self.key.bias"].Data) {
		t.Error("the Q/K/V bias does not hold the key bias at [C, 2C)")
	}
	if _, err := ReadGraphInt8(writeGraph(t, cfg, ts, onnx.BuildOptions{}), cfg); err == nil || !strings.Contains(err.Error(), "no int8 weights") {
		t.Errorf("a float32 graph through ReadGraphInt8: %v", err)
	}
	bad := *cfg
	bad.NumHiddenLayers = 3
	if _, err := ReadGraphInt8(path, &bad); err == nil || !strings.Contains(err.Error(), "3 layers") {
		t.Errorf("a 2-layer graph read for 3 layers: %v", err)
	}
}

// TestLoadGraphRefuses: a graph LoadGraph reads under a config New or
// NewInt8 refuses (here not a BERT model type) is an error, float32 and
// int8 (it returned no model and no error).
func TestLoadGraphRefuses(t *testing.T) {
	cfg := tinyConfig()
	ts := randomTensors(cfg, 5)
	for _, quant := range []string{"", model.QuantizeInt8} {
		path := writeGraph(t, cfg, ts, onnx.BuildOptions{Quantize: quant})
		bad := *cfg
		bad.ModelType = "xlm-roberta"
		if m, err := LoadGraph(path, &bad); err == nil || m != nil {
			t.Fatalf("quantize %q: LoadGraph under model_type xlm-roberta gave %v, %v; want an error", quant, m, err)
		}
	}
}
