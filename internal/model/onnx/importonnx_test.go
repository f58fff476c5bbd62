package onnx

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/anna-search/anna/model"
)

// exported lays tiny BERT weights out as torch.onnx does: module-named
// initializers for embeddings, biases and LayerNorms; each linear weight
// transposed under an anonymous name, read by a MatMul node named after the
// module, with the attention's reshape constants.
func exported(cfg *model.Config) (*ReadModel, map[string][]float32) {
	ts := tinyTensors(cfg, "", 3)
	m := &ReadModel{Initializers: map[string]*Tensor{}}
	want := map[string][]float32{}
	n := 0
	for name, t := range ts {
		if strings.HasPrefix(name, "classifier") || strings.HasPrefix(name, "pooler") {
			continue
		}
		want[name] = t.Data
		mod, isLinear := strings.CutSuffix(name, ".weight")
		if isLinear && len(t.Shape) == 2 && !strings.HasPrefix(name, "embeddings.") {
			r, c := t.Shape[0], t.Shape[1]
			tr := make([]float32, len(t.Data)) // by hand, not by the code under test
			for i := 0; i < r; i++ {
				for j := 0; j < c; j++ {
					tr[j*r+i] = t.Data[i*c+j]
				}
			}
			anon := fmt.Sprintf("onnx::MatMul_%d", 1000+n)
			n++
			m.Initializers[anon] = &Tensor{Name: anon, Shape: []int{c, r}, DataType: Float, Float: tr}
			m.Nodes = append(m.Nodes, Node{Name: "/" + strings.ReplaceAll(mod, ".", "/") + "/MatMul", OpType: "MatMul",
				Inputs: []string{"x", anon}, Outputs: []string{mod + "_out"}})
			continue
		}
		m.Initializers[name] = &Tensor{Name: name, Shape: t.Shape, DataType: Float, Float: t.Data}
	}
	hd := cfg.HiddenSize / cfg.NumAttentionHeads
	m.Nodes = append(m.Nodes,
		Node{Name: "/encoder/layer.0/attention/self/Constant_2", OpType: "Constant", Outputs: []string{"h"}, Attrs: map[string]Attribute{"value": {T: &Tensor{DataType: Int64, Shape: []int{1}, Int64: []int64{int64(cfg.NumAttentionHeads)}}}}},
		Node{Name: "/encoder/layer.0/attention/self/Constant_3", OpType: "Constant", Outputs: []string{"d"}, Attrs: map[string]Attribute{"value": {T: &Tensor{DataType: Int64, Shape: []int{1}, Int64: []int64{int64(hd)}}}}},
		Node{Name: "/encoder/layer.0/attention/self/Concat", OpType: "Concat", Inputs: []string{"b", "s", "h", "d"}, Outputs: []string{"shape"}})
	return m, want
}

// TestBERTFromONNX: the weights and the config come back exactly.
func TestBERTFromONNX(t *testing.T) {
	cfg := tinyConfig("gelu")
	m, want := exported(cfg)
	got, gcfg, err := BERTFromONNX(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d tensors, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if !slices.Equal(g.Data, w) {
			t.Errorf("%s differs", name)
		}
	}
	c := *cfg
	c.NumLabelsField, c.PositionEmbeddingType = 0, "absolute"
	if fmt.Sprintf("%+v", *gcfg) != fmt.Sprintf("%+v", c) {
		t.Errorf("config %+v, want %+v", *gcfg, c)
	}
	if err := agree(cfg, gcfg); err != nil {
		t.Error(err)
	}
}

// TestImportONNXRefuses: not an ONNX file, a graph that is not BERT, a
// config that disagrees with the weights — each named.
func TestImportONNXRefuses(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.onnx")
	os.WriteFile(junk, []byte("this is not protobuf \xff\xff\xff"), 0o644)
	if _, err := ImportONNX(context.Background(), junk, filepath.Join(dir, "tok.json"), nil, filepath.Join(dir, "out"), Settings{}); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk file: %v, want an error naming it", err)
	}

	cfg := tinyConfig("gelu")
	m, _ := exported(cfg)
	delete(m.Initializers, "embeddings.word_embeddings.weight")
	if _, _, err := BERTFromONNX(m); err == nil || !strings.Contains(err.Error(), "embeddings.word_embeddings.weight") {
		t.Errorf("no word embeddings: %v", err)
	}
	m, _ = exported(cfg)
	m.Initializers["onnx::MatMul_1000"].DataType = 10 // float16
	if _, _, err := BERTFromONNX(m); err == nil || !strings.Contains(err.Error(), "onnx::MatMul_1000") {
		t.Errorf("fp16 weight: %v", err)
	}
	m, _ = exported(cfg)
	m.Nodes = append(m.Nodes, Node{Name: "mystery", OpType: "MatMul", Inputs: []string{"x", "onnx::MatMul_1001"}})
	if _, _, err := BERTFromONNX(m); err == nil || !strings.Contains(err.Error(), "mystery") {
		t.Errorf("unnamed MatMul: %v", err)
	}

	m, _ = exported(cfg)
	_, got, err := BERTFromONNX(m)
	if err != nil {
		t.Fatal(err)
	}
	bad := *cfg
	bad.IntermediateSize, bad.NumAttentionHeads = 32, 2
	err = agree(&bad, got)
	if err == nil || !strings.Contains(err.Error(), "intermediate_size is 32, the weights say 24") || !strings.Contains(err.Error(), "num_attention_heads is 2, the weights say 4") {
		t.Errorf("disagreeing config: %v", err)
	}
}

// ggufBytes writes a GGUF file with string metadata and one F32 tensor.
func ggufBytes(kv map[string]string, tensor string, dims []uint64, typ uint32) []byte {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { w(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	w(uint32(3))
	w(uint64(1))
	w(uint64(len(kv)))
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		str(k)
		w(uint32(8)) // string
		str(kv[k])
	}
	str(tensor)
	w(uint32(len(dims)))
	n := uint64(1)
	for _, d := range dims {
		w(d)
		n *= d
	}
	w(typ)
	w(uint64(0))
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, 4*n)) // F32 size; enough for the smaller types too
	return b.Bytes()
}

// TestImportGGUFRefuses: another architecture, an unsupported quantization,
// a file that is not GGUF — each named.
func TestImportGGUFRefuses(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"bert.gguf", ggufBytes(map[string]string{"general.architecture": "bert"}, "token_embd.weight", []uint64{4, 4}, 0), `general.architecture "bert" is not supported`},
		{"nolayers.gguf", ggufBytes(map[string]string{"general.architecture": "llama"}, "token_embd.weight", []uint64{4, 4}, 0), "llama.block_count is missing"},
		{"text.gguf", []byte("not a model"), "not a GGUF file"},
	} {
		p := filepath.Join(dir, c.name)
		os.WriteFile(p, c.b, 0o644)
		_, err := ImportGGUF(ctx, p, filepath.Join(dir, "out"), Settings{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", c.name, err, c.want)
		}
	}
}

// quantizeExported rewrites exported's float32 graph m as ONNX Runtime's
// quantizers write theirs — every linear weight int8 with a scale and a
// zero point per output column, read by a MatMulInteger whose product a
// Mul scales (dynamic) or through a DequantizeLinear (qdq); the word
// embeddings uint8 with one scale and zero point 128 (NAME_quantized) —
// and returns the weights the importer must read back: each value
// float32(q − zp)·scale, by Hugging Face name, and the int8 columns of
// the linear modules whose q − zp fit ±64 (the last layer's output.dense
// is quantized to ±84, so it must be left out).
func quantizeExported(t *testing.T, m *ReadModel, form string) (map[string][]float32, map[string]*Int8Columns) {
	t.Helper()
	want, cols := map[string][]float32{}, map[string]*Int8Columns{}
	var nodes []Node
	for _, nd := range m.Nodes {
		if nd.OpType != "MatMul" {
			nodes = append(nodes, nd)
			continue
		}
		w := m.Initializers[nd.Inputs[1]]
		in, out := w.Shape[0], w.Shape[1]
		mod := strings.TrimSuffix(strings.ReplaceAll(strings.TrimPrefix(nd.Name, "/"), "/", "."), ".MatMul")
		qmax := float32(64)
		if mod == "encoder.layer.1.output.dense" {
			qmax = 84 // q − zp up to ±84: not anna's 7 bits
		}
		q := &Tensor{Name: nd.Inputs[1] + "_quantized", Shape: []int{in, out}, DataType: Int8, Int64: make([]int64, in*out)}
		sc := &Tensor{Name: nd.Inputs[1] + "_scale", Shape: []int{out}, DataType: Float, Float: make([]float32, out)}
		zp := &Tensor{Name: nd.Inputs[1] + "_zero_point", Shape: []int{out}, DataType: Int8, Int64: make([]int64, out)}
		deq := make([]float32, in*out) // [out, in], Hugging Face's layout
		c := &Int8Columns{In: in, Out: out, W: make([]int8, in*out), Scale: sc.Float}
		for j := 0; j < out; j++ {
			var peak float32
			for k := 0; k < in; k++ {
				peak = max(peak, float32(math.Abs(float64(w.Float[k*out+j]))))
			}
			sc.Float[j] = peak / qmax
			zp.Int64[j] = int64(j%3) - 1 // zero points -1, 0 and 1
			for k := 0; k < in; k++ {
				v := int64(math.Round(float64(w.Float[k*out+j] / sc.Float[j])))
				q.Int64[k*out+j] = v + zp.Int64[j]
				deq[j*in+k] = float32(v) * sc.Float[j]
				c.W[k*out+j] = int8(v)
			}
		}
		want[mod+".weight"] = deq
		if qmax == 64 {
			cols[mod] = c
		}
		m.Initializers[q.Name], m.Initializers[sc.Name], m.Initializers[zp.Name] = q, sc, zp
		delete(m.Initializers, nd.Inputs[1])
		switch form {
		case "dynamic":
			nodes = append(nodes,
				Node{Name: nd.Name + "_quant", OpType: "MatMulInteger", Inputs: []string{"xq", q.Name, "xzp", zp.Name}, Outputs: []string{mod + "_int"}},
				Node{Name: nd.Name + "_scales_mul", OpType: "Mul", Inputs: []string{"xs", sc.Name}, Outputs: []string{mod + "_s"}},
				Node{Name: nd.Name + "_cast", OpType: "Cast", Inputs: []string{mod + "_int"}, Outputs: []string{mod + "_f"}},
				Node{Name: nd.Name + "_out", OpType: "Mul", Inputs: []string{mod + "_f", mod + "_s"}, Outputs: nd.Outputs})
		case "qdq":
			nodes = append(nodes,
				Node{Name: nd.Name + "_dq", OpType: "DequantizeLinear", Inputs: []string{q.Name, sc.Name, zp.Name}, Outputs: []string{mod + "_w"}, Attrs: map[string]Attribute{"axis": {I: 1}}},
				Node{Name: nd.Name, OpType: "MatMul", Inputs: []string{nd.Inputs[0], mod + "_w"}, Outputs: nd.Outputs})
		}
	}
	m.Nodes = nodes
	word := m.Initializers["embeddings.word_embeddings.weight"]
	q := &Tensor{Name: "embeddings.word_embeddings.weight_quantized", Shape: word.Shape, DataType: Uint8, Int64: make([]int64, len(word.Float))}
	var peak float32
	for _, v := range word.Float {
		peak = max(peak, float32(math.Abs(float64(v))))
	}
	scale := peak / 127
	deq := make([]float32, len(word.Float))
	for i, v := range word.Float {
		q.Int64[i] = int64(math.Round(float64(v/scale))) + 128
		deq[i] = float32(q.Int64[i]-128) * scale
	}
	want["embeddings.word_embeddings.weight"] = deq
	delete(m.Initializers, word.Name)
	m.Initializers[q.Name] = q
	m.Initializers["embeddings.word_embeddings.weight_scale"] = &Tensor{Name: "embeddings.word_embeddings.weight_scale", DataType: Float, Float: []float32{scale}}
	m.Initializers["embeddings.word_embeddings.weight_zero_point"] = &Tensor{Name: "embeddings.word_embeddings.weight_zero_point", DataType: Uint8, Int64: []int64{128}}
	return want, cols
}

// TestBERTFromQuantizedONNX: a tiny BERT quantized as ONNX Runtime's
// dynamic quantizer and its QDQ form write it reads back as the weights
// those graphs compute with — each value float32(q − zero point)·scale,
// per column, bit for bit — with the same config; Int8FromONNX gives the
// products' integers less their zero points and their scales, leaving out
// the product whose integers do not fit anna's 7 bits.
func TestBERTFromQuantizedONNX(t *testing.T) {
	for _, form := range []string{"dynamic", "qdq"} {
		t.Run(form, func(t *testing.T) {
			cfg := tinyConfig("gelu")
			m, floats := exported(cfg)
			deq, cols := quantizeExported(t, m, form)
			got, gcfg, err := BERTFromONNX(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(floats) {
				t.Errorf("%d tensors, want %d", len(got), len(floats))
			}
			for name, w := range floats {
				if d, ok := deq[name]; ok {
					w = d
				}
				if g, ok := got[name]; !ok || !slices.Equal(g.Data, w) {
					t.Errorf("%s: not read back as the dequantized weight (found: %v)", name, ok)
				}
			}
			if gcfg.NumHiddenLayers != cfg.NumHiddenLayers || gcfg.NumAttentionHeads != cfg.NumAttentionHeads || gcfg.VocabSize != cfg.VocabSize {
				t.Errorf("config %+v", gcfg)
			}
			q, err := Int8FromONNX(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(q) != len(cols) || len(cols) != 6*cfg.NumHiddenLayers-1 {
				t.Errorf("%d int8 products, want %d", len(q), len(cols))
			}
			for name, c := range cols {
				g := q[name]
				if g == nil || g.In != c.In || g.Out != c.Out || !slices.Equal(g.W, c.W) || !slices.Equal(g.Scale, c.Scale) {
					t.Errorf("%s: int8 columns differ", name)
				}
			}
		})
	}
}
