package llama

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/onnxfile"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/model"
)

// tinyQuantGraph is tinyGraph (technique plain, task embed) with the
// graph's weights quantized (model.QuantizeInt8 or model.QuantizeInt4).
func tinyQuantGraph(t *testing.T, arch, quant string) (*model.Config, map[string]*safetensors.Tensor, string) {
	t.Helper()
	cfg := testmodels.Decoder(arch)
	ts := RandomTensors(cfg, 0.15, 11)
	return cfg, ts, writeGraph(t, cfg, ts, model.TaskEmbed, onnx.BuildOptions{Quantize: quant})
}

// refQuant is a naive float64 forward of one unpadded sequence through a
// quantized graph's weights, read straight from its initializers: for
// int8 each product's input row quantized on its own (s = max|x|/127, q =
// round(x/s) half to even) and multiplied by the int8 weight and its
// column scales; for int4 the products' weights and the token table
// unpacked and dequantized, (q − zp)·scale and q·scale, and refModel's
// float forward run on them.
type refQuant struct {
	cfg  *model.Config
	ts   map[string]*safetensors.Tensor // the float32 checkpoint: norms, biases, the token table (int8)
	init map[string]*onnxfile.Tensor
}

func (m refQuant) qlinear(x []float64, name string, bias []float32, out int) []float64 {
	w, sc := m.init[strings.ReplaceAll(name, ".", "_")+"_int8"], m.init[strings.ReplaceAll(name, ".", "_")+"_scale"]
	amax := 1e-12
	for _, v := range x {
		amax = max(amax, math.Abs(v))
	}
	s := amax / 127
	q := make([]float64, len(x))
	for i, v := range x {
		q[i] = max(-128, min(127, math.RoundToEven(v/s)))
	}
	y := make([]float64, out)
	for j := range y {
		var acc float64 // an integer: exact in float64 at these sizes
		for k, qv := range q {
			acc += qv * float64(int8(w.Int64[k*out+j]))
		}
		y[j] = acc * float64(sc.Float[j]) * s
		if bias != nil {
			y[j] += float64(bias[j])
		}
	}
	return y
}

// int8Hidden is the int8 graph's last hidden states of ids.
func (m refQuant) int8Hidden(ids []int64) [][]float64 {
	cfg := m.cfg
	H, D, I := cfg.HiddenSize, cfg.HeadDim(), cfg.IntermediateSize
	nh, nkv := cfg.NumAttentionHeads, cfg.KVHeads()
	w := func(n string) []float32 { return m.ts[n].Data }
	eps := cfg.RMSNormEps
	x := make([][]float64, len(ids))
	for t, id := range ids {
		x[t] = make([]float64, H)
		for c := range x[t] {
			x[t][c] = float64(w("embed_tokens.weight")[int(id)*H+c])
		}
	}
	rope := func(v []float64, p int) { refRope(v, p, cfg.RopeTheta) }
	S := len(ids)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "layers." + string(rune('0'+l)) + "."
		bias := func(n string) []float32 {
			if cfg.QKVBias() {
				return w(p + "self_attn." + n + ".bias")
			}
			return nil
		}
		q, k, v := make([][]float64, S), make([][]float64, S), make([][]float64, S)
		for t := range x {
			h := rms(x[t], w(p+"input_layernorm.weight"), eps)
			q[t] = m.qlinear(h, p+"self_attn.q_proj.weight", bias("q_proj"), nh*D)
			k[t] = m.qlinear(h, p+"self_attn.k_proj.weight", bias("k_proj"), nkv*D)
			v[t] = m.qlinear(h, p+"self_attn.v_proj.weight", bias("v_proj"), nkv*D)
			for hh := 0; hh < nh; hh++ {
				if cfg.QKNorm() {
					copy(q[t][hh*D:], rms(q[t][hh*D:(hh+1)*D], w(p+"self_attn.q_norm.weight"), eps))
				}
				rope(q[t][hh*D:(hh+1)*D], t)
			}
			for hh := 0; hh < nkv; hh++ {
				if cfg.QKNorm() {
					copy(k[t][hh*D:], rms(k[t][hh*D:(hh+1)*D], w(p+"self_attn.k_norm.weight"), eps))
				}
				rope(k[t][hh*D:(hh+1)*D], t)
			}
		}
		for i := range x {
			ctx := make([]float64, nh*D)
			for hh := 0; hh < nh; hh++ {
				g := hh / (nh / nkv)
				s := make([]float64, i+1)
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
			att := m.qlinear(ctx, p+"self_attn.o_proj.weight", nil, H)
			for c := range x[i] {
				x[i][c] += att[c]
			}
		}
		for i := range x {
			h := rms(x[i], w(p+"post_attention_layernorm.weight"), eps)
			g := m.qlinear(h, p+"mlp.gate_proj.weight", nil, I)
			u := m.qlinear(h, p+"mlp.up_proj.weight", nil, I)
			for j := range g {
				g[j] = g[j] / (1 + math.Exp(-g[j])) * u[j]
			}
			d := m.qlinear(g, p+"mlp.down_proj.weight", nil, H)
			for c := range x[i] {
				x[i][c] += d[c]
			}
		}
	}
	var hidden [][]float64
	for i := range x {
		hidden = append(hidden, rms(x[i], w("norm.weight"), eps))
	}
	return hidden
}

// int4Tensors is the checkpoint with the int4 graph's weights in place of
// the float32 ones: each product's 4-bit blocks and the int8 token table,
// unpacked and dequantized.
func (m refQuant) int4Tensors(t *testing.T) map[string]*safetensors.Tensor {
	out := map[string]*safetensors.Tensor{}
	for name, tt := range m.ts {
		out[name] = tt
	}
	for name, tt := range m.ts {
		base := strings.ReplaceAll(name, ".", "_")
		if p := m.init[base+"_int4"]; p != nil {
			O, In := tt.Shape[0], tt.Shape[1]
			nb := (In + 31) / 32
			sc, zp := m.init[base+"_scale"].Float, m.init[base+"_zero_point"].Float
			d := make([]float32, O*In)
			for o := 0; o < O; o++ {
				for k := 0; k < In; k++ {
					blk := o*nb + k/32
					byt := uint8(p.Int64[blk*16+(k%32)/2])
					q := byt & 15
					if k%2 == 1 {
						q = byt >> 4
					}
					d[o*In+k] = (float32(q) - zp[blk]) * sc[blk]
				}
			}
			out[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: tt.Shape, Data: d}
		}
		if q := m.init[base+"_int8"]; q != nil && name == "embed_tokens.weight" {
			sc := m.init[base+"_scale"].Float
			d := make([]float32, len(q.Int64))
			for i, v := range q.Int64 {
				d[i] = float32(int8(v)) * sc[i/32]
			}
			out[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: tt.Shape, Data: d}
		}
	}
	if len(out) != len(m.ts) {
		t.Fatal("reference: tensors lost")
	}
	return out
}

// TestQuantizedEmbedderMatchesReference: an int8 and an int4 graph of
// Llama (grouped heads), Qwen2 (q/k/v biases) and Qwen3 (q/k norms, a head
// width that is not hidden/heads) are read (ReadQuantizedGraph) and run
// by the Embedder over a right-padded batch, 1 and 3 threads alike, and
// agree per sequence with a naive float64 forward of the quantized
// weights read from the graph's initializers (refQuant): int4 within 1e-5
// (float32 products of the dequantized weights), int8 within 1e-4 (a
// float32 activation near a quantization step's boundary may round the
// other way than the float64 reference's). Their int8 products really run:
// the hidden states differ from the float32 graph's.
func TestQuantizedEmbedderMatchesReference(t *testing.T) {
	for _, quant := range []string{model.QuantizeInt8, model.QuantizeInt4} {
		for _, arch := range []string{"llama", "qwen2", "qwen3"} {
			t.Run(quant+"/"+arch, func(t *testing.T) {
				cfg, ts, path := tinyQuantGraph(t, arch, quant)
				g, got, err := ReadQuantizedGraph(path, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if got != quant {
					t.Fatalf("ReadQuantizedGraph found quantization %q, want %q", got, quant)
				}
				if (g.Int8 != nil) != (quant == model.QuantizeInt8) {
					t.Fatalf("int8 products read: %d", len(g.Int8))
				}
				_, seqs, b, out := forwardTiny(t, cfg, g)
				rm, err := onnxfile.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				ref := refQuant{cfg, ts, rm.Initializers}
				var fref refModel
				if quant == model.QuantizeInt4 {
					fref = refModel{cfg, ref.int4Tensors(t)}
				}
				floatRef := refModel{cfg, ts}
				H := cfg.HiddenSize
				worst, fromFloat := 0.0, 0.0
				for n, s := range seqs {
					var want [][]float64
					if quant == model.QuantizeInt8 {
						want = ref.int8Hidden(s)
					} else {
						want, _ = fref.forward(s, nil)
					}
					fw, _ := floatRef.forward(s, nil)
					for i := range s {
						row := out[(n*b.T+i)*H : (n*b.T+i+1)*H]
						for c, v := range row {
							worst = max(worst, math.Abs(float64(v)-want[i][c]))
							fromFloat = max(fromFloat, math.Abs(float64(v)-fw[i][c]))
						}
					}
				}
				limit := 1e-5
				if quant == model.QuantizeInt8 {
					limit = 1e-4
				}
				t.Logf("%s %s: largest difference from the quantized reference %.2e, from the float32 model %.2e", quant, arch, worst, fromFloat)
				if worst > limit {
					t.Errorf("the Go forward differs from the quantized reference by %.2e (want ≤ %.0e)", worst, limit)
				}
				if fromFloat < 1e-3 {
					t.Errorf("the quantized forward is within %.2e of the float32 model's: are its quantized weights used?", fromFloat)
				}
			})
		}
	}
}

// TestReadQuantizedGraphRefuses: a float32 graph is read as ReadGraph
// reads it; a graph for another config is an error naming what is wrong.
func TestReadQuantizedGraphRefuses(t *testing.T) {
	cfg, ts, path := tinyGraph(t, "llama", "plain", nil)
	g, q, err := ReadQuantizedGraph(path, cfg)
	if err != nil || q != "" || g.Int8 != nil || !slices.Equal(g.Tensors["layers.0.mlp.up_proj.weight"].Data, ts["layers.0.mlp.up_proj.weight"].Data) {
		t.Errorf("a float32 graph: quantization %q, %v, want it read as ReadGraph reads it", q, err)
	}
	_, _, qpath := tinyQuantGraph(t, "llama", model.QuantizeInt8)
	other := *cfg
	other.NumHiddenLayers = 3
	if _, _, err := ReadQuantizedGraph(qpath, &other); err == nil || !strings.Contains(err.Error(), "3 layers") {
		t.Errorf("an int8 graph of 2 layers read for 3: %v, want an error naming the layers", err)
	}
	other = *cfg
	other.IntermediateSize = 40
	if _, _, err := ReadQuantizedGraph(qpath, &other); err == nil || !strings.Contains(err.Error(), "mlp_gate_proj_weight_int8") {
		t.Errorf("an int8 graph read for another MLP width: %v, want an error naming the weight", err)
	}
}
