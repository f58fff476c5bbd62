package llama

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model"
)

// tinyGraph builds a tiny random decoder of arch with technique (see
// testmodels.WithTechnique), exports its graph as internal/model/onnx does (with
// label tokens: a reranker's) and returns the config, the tensors and the
// graph's path.
func tinyGraph(t *testing.T, arch, technique string, labels []int64) (*model.Config, map[string]*safetensors.Tensor, string) {
	t.Helper()
	cfg := testmodels.Decoder(arch)
	ts := RandomTensors(cfg, 0.15, 11)
	if err := testmodels.WithTechnique(cfg, ts, technique, 12); err != nil {
		t.Fatal(err)
	}
	task := model.TaskEmbed
	if labels != nil {
		task, cfg.TieWordEmbeddings = model.TaskRerank, true
	}
	return cfg, ts, writeGraph(t, cfg, ts, task, onnx.BuildOptions{LabelTokens: labels})
}

// writeGraph exports the graph of cfg with tensors ts for task, as model/
// onnx does with opts, to a file in t's temporary folder, and returns its
// path.
func writeGraph(t *testing.T, cfg *model.Config, ts map[string]*safetensors.Tensor, task string, opts onnx.BuildOptions) string {
	t.Helper()
	g, err := onnx.BuildWith(cfg, ts, task, opts)
	if err != nil {
		t.Fatal(err)
	}
	return testmodels.WriteGraph(t, g)
}

// refRope rotates one head v (len(v) wide) to position p as transformers'
// LlamaRotaryEmbedding does (rotate_half), with its rotary angles:
// inv_freq and position·inv_freq in float32.
func refRope(v []float64, p int, theta float64) {
	D := len(v)
	h := D / 2
	out := make([]float64, D)
	for i := 0; i < h; i++ {
		inv := float32(1 / math.Pow(theta, float64(float32(2*i)/float32(D))))
		a := float64(float32(p) * inv)
		c, s := math.Cos(a), math.Sin(a)
		out[i] = v[i]*c - v[i+h]*s
		out[i+h] = v[i+h]*c + v[i]*s
	}
	copy(v, out)
}

// refModel is a naive float64 forward of one unpadded sequence, written
// from transformers' LlamaModel (and the trainer's techniques) and
// independent of the graph and of Embedder.
type refModel struct {
	cfg *model.Config
	ts  map[string]*safetensors.Tensor
}

func (m refModel) w(name string) []float32 {
	if t, ok := m.ts[name]; ok {
		return t.Data
	}
	panic("reference: no tensor " + name)
}

// linear is x·Wᵀ (+ b) for W [out, in].
func linear(x []float64, w []float32, b []float32, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range y {
		var s float64
		for i, v := range x {
			s += v * float64(w[o*in+i])
		}
		if b != nil {
			s += float64(b[o])
		}
		y[o] = s
	}
	return y
}

func rms(x []float64, g []float32, eps float64) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	inv := 1 / math.Sqrt(s/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * inv * float64(g[i])
	}
	return y
}

func gelu(x []float64) {
	for i, v := range x {
		x[i] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
	}
}

func softmax(s []float64) {
	mx := math.Inf(-1)
	for _, v := range s {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range s {
		s[i] = math.Exp(v - mx)
		sum += s[i]
	}
	for i := range s {
		s[i] /= sum
	}
}

// forward returns the final hidden states (after the norm) and each
// layer's output before it, of ids (memory ids ≥ vocab, the placeholder
// replaced by contextual).
func (m refModel) forward(ids []int64, contextual []float64) (hidden [][]float64, layers [][][]float64) {
	cfg := m.cfg
	H, D := cfg.HiddenSize, cfg.HeadDim()
	nh, nkv := cfg.NumAttentionHeads, cfg.KVHeads()
	S := len(ids)
	eps := cfg.RMSNormEps
	x := make([][]float64, S)
	for t, id := range ids {
		x[t] = make([]float64, H)
		switch {
		case id == model.ContextPlaceholder:
			copy(x[t], contextual)
		case id >= int64(cfg.VocabSize):
			for c := range x[t] {
				x[t][c] = float64(m.w("autoregembed.memory")[(int(id)-cfg.VocabSize)*H+c])
			}
		default:
			for c := range x[t] {
				x[t][c] = float64(m.w("embed_tokens.weight")[int(id)*H+c])
			}
		}
	}
	rope := func(v []float64, p int) { refRope(v, p, cfg.RopeTheta) }
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "layers." + string(rune('0'+l)) + "."
		bias := func(n string) []float32 {
			if cfg.QKVBias() {
				return m.w(p + "self_attn." + n + ".bias")
			}
			return nil
		}
		q, k, v := make([][]float64, S), make([][]float64, S), make([][]float64, S)
		for t := range x {
			h := rms(x[t], m.w(p+"input_layernorm.weight"), eps)
			q[t] = linear(h, m.w(p+"self_attn.q_proj.weight"), bias("q_proj"), nh*D)
			k[t] = linear(h, m.w(p+"self_attn.k_proj.weight"), bias("k_proj"), nkv*D)
			v[t] = linear(h, m.w(p+"self_attn.v_proj.weight"), bias("v_proj"), nkv*D)
			for hh := 0; hh < nh; hh++ {
				if cfg.QKNorm() {
					copy(q[t][hh*D:], rms(q[t][hh*D:(hh+1)*D], m.w(p+"self_attn.q_norm.weight"), eps))
				}
				rope(q[t][hh*D:(hh+1)*D], t)
			}
			for hh := 0; hh < nkv; hh++ {
				if cfg.QKNorm() {
					copy(k[t][hh*D:], rms(k[t][hh*D:(hh+1)*D], m.w(p+"self_attn.k_norm.weight"), eps))
				}
				rope(k[t][hh*D:(hh+1)*D], t)
			}
		}
		att := make([][]float64, S)
		for i := range x {
			ctx := make([]float64, nh*D)
			for hh := 0; hh < nh; hh++ {
				g := hh / (nh / nkv)
				seen := S
				if !cfg.Bidirectional() {
					seen = i + 1
				}
				s := make([]float64, seen)
				for j := range s {
					for d := 0; d < D; d++ {
						s[j] += q[i][hh*D+d] * k[j][g*D+d]
					}
					s[j] /= math.Sqrt(float64(D))
				}
				softmax(s)
				for j, pj := range s {
					for d := 0; d < D; d++ {
						ctx[hh*D+d] += pj * v[j][g*D+d]
					}
				}
			}
			att[i] = linear(ctx, m.w(p+"self_attn.o_proj.weight"), nil, H)
		}
		for i := range x {
			for c := range x[i] {
				x[i][c] += att[i][c]
			}
			h := rms(x[i], m.w(p+"post_attention_layernorm.weight"), eps)
			g := linear(h, m.w(p+"mlp.gate_proj.weight"), nil, cfg.IntermediateSize)
			u := linear(h, m.w(p+"mlp.up_proj.weight"), nil, cfg.IntermediateSize)
			for j := range g {
				g[j] = g[j] / (1 + math.Exp(-g[j])) * u[j]
			}
			d := linear(g, m.w(p+"mlp.down_proj.weight"), nil, H)
			for c := range x[i] {
				x[i][c] += d[c]
			}
		}
		snap := make([][]float64, S)
		for i := range x {
			snap[i] = slices.Clone(x[i])
		}
		layers = append(layers, snap)
	}
	for i := range x {
		hidden = append(hidden, rms(x[i], m.w("norm.weight"), eps))
	}
	return hidden, layers
}

// head is the trainable pooling head over rows X (all real).
func (m refModel) head(X [][]float64) []float64 {
	hc := m.cfg.PoolingHead
	H := m.cfg.HiddenSize
	d := H / hc.Heads
	K, V := make([][]float64, len(X)), make([][]float64, len(X))
	for j, x := range X {
		K[j] = linear(x, m.w("pooling.k_proj.weight"), nil, H)
		V[j] = linear(x, m.w("pooling.v_proj.weight"), nil, H)
	}
	lat := m.w("pooling.latents")
	out := make([]float64, H)
	for i := 0; i < hc.Latents; i++ {
		c := make([]float64, H)
		for h := 0; h < hc.Heads; h++ {
			s := make([]float64, len(X))
			for j := range s {
				for t := 0; t < d; t++ {
					s[j] += float64(lat[i*H+h*d+t]) * K[j][h*d+t]
				}
				s[j] /= math.Sqrt(float64(d))
			}
			softmax(s)
			for j, p := range s {
				for t := 0; t < d; t++ {
					c[h*d+t] += p * V[j][h*d+t]
				}
			}
		}
		z := linear(c, m.w("pooling.o_proj.weight"), nil, H)
		u := linear(z, m.w("pooling.mlp.fc1.weight"), m.w("pooling.mlp.fc1.bias"), H)
		gelu(u)
		y := linear(u, m.w("pooling.mlp.fc2.weight"), m.w("pooling.mlp.fc2.bias"), H)
		for t := range out {
			out[t] += (z[t] + y[t]) / float64(hc.Latents)
		}
	}
	return out
}

// embed is the reference output of one unpadded sequence (what the graph
// outputs for it: hidden rows flattened, or the pooled row).
func (m refModel) embed(ids []int64, ctxVec []float32, labels []int64) []float64 {
	cfg := m.cfg
	H := cfg.HiddenSize
	var contextual []float64
	if cv := cfg.Causal2Vec; cv != nil {
		v := make([]float64, len(ctxVec))
		for i, f := range ctxVec {
			v[i] = float64(f)
		}
		h := linear(v, m.w("causal2vec.mlp.0.weight"), m.w("causal2vec.mlp.0.bias"), H)
		gelu(h)
		contextual = linear(h, m.w("causal2vec.mlp.2.weight"), m.w("causal2vec.mlp.2.bias"), H)
	}
	hidden, layers := m.forward(ids, contextual)
	last := len(ids) - 1
	switch {
	case cfg.MemoryTokens > 0:
		out := make([]float64, H)
		for t, id := range ids {
			if id >= int64(cfg.VocabSize) {
				for c := range out {
					out[c] += hidden[t][c] / float64(cfg.MemoryTokens)
				}
			}
		}
		return out
	case cfg.Causal2Vec != nil:
		at := slices.Index(ids, model.ContextPlaceholder)
		return slices.Concat(hidden[at], hidden[last])
	case labels != nil:
		out := make([]float64, len(labels))
		for j, id := range labels {
			for c := 0; c < H; c++ {
				out[j] += hidden[last][c] * float64(m.w("embed_tokens.weight")[int(id)*H+c])
			}
		}
		return out
	case cfg.PoolingHead != nil && cfg.PoolingHead.Mode == model.PoolingLatent:
		return m.head(hidden)
	case cfg.PoolingHead != nil:
		X := make([][]float64, cfg.NumHiddenLayers)
		lw := m.w("pooling.layer_weights")
		for l := range X {
			row := layers[l][last]
			if l == cfg.NumHiddenLayers-1 {
				row = hidden[last]
			}
			X[l] = make([]float64, H)
			for c := range X[l] {
				X[l][c] = row[c] + float64(lw[l*H+c])
			}
		}
		return m.head(X)
	}
	return slices.Concat(hidden...)
}

// tinyBatch is three sequences of lengths 7, 4 and 1 (right-padded to 7)
// for cfg: memory tokens last for AutoRegEmbed, the placeholder second for
// Causal2Vec, with Letters-like context rows.
func tinyBatch(cfg *model.Config) (seqs [][]int64, b *EmbedBatch) {
	seqs = [][]int64{{5, 17, 3, 60, 22, 9, 41}, {7, 33, 12, 2}, {11}}
	if k := cfg.MemoryTokens; k > 0 {
		seqs = [][]int64{{5, 17, 3, 60}, {7, 33}, {11}}
		for i := range seqs {
			for j := 0; j < k; j++ {
				seqs[i] = append(seqs[i], int64(cfg.VocabSize+j))
			}
		}
	}
	if cfg.Causal2Vec != nil {
		seqs = [][]int64{{5, model.ContextPlaceholder, 3, 60, 22, 9, 41}, {7, model.ContextPlaceholder, 12, 2}, {model.ContextPlaceholder}}
	}
	T := 0
	for _, s := range seqs {
		T = max(T, len(s))
	}
	b = &EmbedBatch{N: len(seqs), T: T}
	for i, s := range seqs {
		for t := 0; t < T; t++ {
			id, m := int64(0), int64(0)
			if t < len(s) {
				id, m = s[t], 1
			}
			b.IDs, b.Mask = append(b.IDs, id), append(b.Mask, m)
		}
		if cv := cfg.Causal2Vec; cv != nil {
			for j := 0; j < cv.ContextDim; j++ {
				b.Context = append(b.Context, float32(i+1)*0.3-float32(j)*0.07)
			}
		}
	}
	return seqs, b
}

// forwardTiny runs the Embedder of cfg and g over tinyBatch(cfg) on 1 and
// on 3 threads, reports an error when the two outputs differ, and returns
// the embedder, tinyBatch's sequences and batch, and the output.
func forwardTiny(t *testing.T, cfg *model.Config, g *GraphWeights) (*Embedder, [][]int64, *EmbedBatch, []float32) {
	t.Helper()
	e, err := NewEmbedder(cfg, g)
	if err != nil {
		t.Fatal(err)
	}
	seqs, b := tinyBatch(cfg)
	var outs [2][]float32
	for i, th := range []int{1, 3} {
		if outs[i], err = e.Forward(b, th); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Errorf("1 and 3 threads give different outputs")
	}
	return e, seqs, b, outs[0]
}

// TestReadGraphRoundTrip: the weights read back from an exported graph
// are the checkpoint's, bit for bit, for every architecture and technique.
func TestReadGraphRoundTrip(t *testing.T) {
	for _, c := range []struct{ arch, technique string }{{"llama", "plain"}, {"qwen2", "plain"}, {"qwen3", "plain"},
		{"llama", model.PoolingLatent}, {"llama", model.PoolingMultiLayer}, {"llama", model.PoolingMemory}, {"llama", model.PoolingCausal2Vec}} {
		cfg, ts, path := tinyGraph(t, c.arch, c.technique, nil)
		g, err := ReadGraph(path, cfg)
		if err != nil {
			t.Fatalf("%s %s: %v", c.arch, c.technique, err)
		}
		if len(g.Tensors) != len(ts) {
			t.Errorf("%s %s: %d tensors read, the checkpoint has %d", c.arch, c.technique, len(g.Tensors), len(ts))
		}
		for name, want := range ts {
			got := g.Tensors[name]
			if got == nil || !slices.Equal(got.Shape, want.Shape) || !slices.Equal(got.Data, want.Data) {
				t.Errorf("%s %s: tensor %s not read back as written", c.arch, c.technique, name)
			}
		}
	}
}

// TestEmbedderMatchesReference: the Go forward over a right-padded batch
// gives, per sequence, what a naive float64 forward of the unpadded
// sequence gives (within 1e-5): the last hidden states for Llama (grouped
// heads), Qwen2 (q/k/v biases), Qwen3 (per-head q/k norms, a head width
// that is not hidden/heads) and bidirectional attention, the pooled
// embedding of the latent and multi-layer heads, of AutoRegEmbed's memory
// tokens and of Causal2Vec, and a reranker's label logits.
func TestEmbedderMatchesReference(t *testing.T) {
	cases := []struct {
		arch, technique string
		labels          []int64
	}{{"llama", "plain", nil}, {"qwen2", "plain", nil}, {"qwen3", "plain", nil}, {"mistral", model.AttentionBidirectional, nil},
		{"llama", model.PoolingLatent, nil}, {"qwen2", model.PoolingMultiLayer, nil}, {"llama", model.PoolingMemory, nil},
		{"qwen3", model.PoolingCausal2Vec, nil}, {"llama", "plain", []int64{9, 40}}}
	for _, c := range cases {
		name := c.arch + "/" + c.technique
		if c.labels != nil {
			name += "/rerank"
		}
		t.Run(name, func(t *testing.T) {
			cfg, ts, path := tinyGraph(t, c.arch, c.technique, c.labels)
			g, err := ReadGraph(path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			e, seqs, b, got := forwardTiny(t, cfg, g)
			ref := refModel{cfg, ts}
			H, dim := cfg.HiddenSize, e.Dim()
			worst := 0.0
			for n, s := range seqs {
				var ctxVec []float32
				if cv := cfg.Causal2Vec; cv != nil {
					ctxVec = b.Context[n*cv.ContextDim : (n+1)*cv.ContextDim]
				}
				want := ref.embed(s, ctxVec, c.labels)
				row := got[n*dim : (n+1)*dim]
				if e.Output() == model.OutputHidden {
					row = got[n*b.T*H : (n*b.T+len(s))*H]
					for _, v := range got[(n*b.T+len(s))*H : (n+1)*b.T*H] {
						if v != 0 {
							t.Fatalf("sequence %d: a padding row is not zero", n)
						}
					}
				}
				if len(row) != len(want) {
					t.Fatalf("sequence %d: %d values, the reference %d", n, len(row), len(want))
				}
				for j := range row {
					worst = max(worst, math.Abs(float64(row[j])-want[j]))
				}
			}
			t.Logf("%s: output %s, largest difference from the reference %.2e", name, e.Output(), worst)
			if worst > 1e-5 {
				t.Errorf("%s: the Go forward differs from the reference by %.2e (want ≤ 1e-5)", name, worst)
			}
		})
	}
}

// TestEmbedderRefusesBadInput: a quantized graph, ids outside the
// vocabulary, a Causal2Vec row without its placeholder or context, and a
// sequence without tokens are errors naming what is wrong.
func TestEmbedderRefusesBadInput(t *testing.T) {
	cfg, ts, _ := tinyGraph(t, "llama", model.PoolingCausal2Vec, nil)
	qpath := writeGraph(t, cfg, ts, model.TaskEmbed, onnx.BuildOptions{Quantize: model.QuantizeInt8})
	if _, err := ReadGraph(qpath, cfg); err == nil || !strings.Contains(err.Error(), "quantized") {
		t.Errorf("an int8 graph: %v, want a quantized-weights error", err)
	}
	_, _, path := tinyGraph(t, "llama", model.PoolingCausal2Vec, nil)
	gw, err := ReadGraph(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEmbedder(cfg, gw)
	if err != nil {
		t.Fatal(err)
	}
	_, good := tinyBatch(cfg)
	for _, c := range []struct {
		edit func(b *EmbedBatch)
		want string
	}{
		{func(b *EmbedBatch) { b.IDs[2] = int64(cfg.VocabSize) }, "outside the vocabulary"},
		{func(b *EmbedBatch) { b.IDs[b.T+1] = 3 }, "no contextual token's placeholder"},
		{func(b *EmbedBatch) { b.Context = b.Context[:5] }, "context values"},
		{func(b *EmbedBatch) { b.Mask[2*b.T] = 0 }, "has no tokens"},
		{func(b *EmbedBatch) { b.IDs = b.IDs[:4] }, "batch shape"},
	} {
		b := &EmbedBatch{N: good.N, T: good.T, IDs: slices.Clone(good.IDs), Mask: slices.Clone(good.Mask), Context: slices.Clone(good.Context)}
		c.edit(b)
		if _, err := e.Forward(b, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error saying %q", err, c.want)
		}
	}
}
