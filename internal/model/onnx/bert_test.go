package onnx

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/model"
)

func tinyConfig(act string) *model.Config {
	return &model.Config{
		ModelType: "bert", VocabSize: 50, HiddenSize: 16, NumHiddenLayers: 2, NumAttentionHeads: 4,
		IntermediateSize: 24, MaxPositionEmbeddings: 32, TypeVocabSize: 2, HiddenAct: act,
		LayerNormEps: 1e-12, PositionEmbeddingType: "absolute", NumLabelsField: 3,
	}
}

// tinyTensors makes random BertForSequenceClassification weights for cfg.
func tinyTensors(cfg *model.Config, prefix string, seed uint64) map[string]*safetensors.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	ts := map[string]*safetensors.Tensor{}
	add := func(name string, scale float64, shape ...int) {
		t := &safetensors.Tensor{Name: name, DType: "F32", Shape: shape}
		t.Data = make([]float32, t.Len())
		for i := range t.Data {
			t.Data[i] = float32(r.NormFloat64() * scale)
		}
		ts[name] = t
	}
	ln := func(name string) {
		add(name+".weight", 0.1, cfg.HiddenSize)
		for i := range ts[name+".weight"].Data {
			ts[name+".weight"].Data[i] += 1
		}
		add(name+".bias", 0.1, cfg.HiddenSize)
	}
	lin := func(name string, in, out int) {
		add(name+".weight", 1/math.Sqrt(float64(in)), out, in)
		add(name+".bias", 0.1, out)
	}
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	add(prefix+"embeddings.word_embeddings.weight", 1, cfg.VocabSize, H)
	add(prefix+"embeddings.position_embeddings.weight", 0.5, cfg.MaxPositionEmbeddings, H)
	add(prefix+"embeddings.token_type_embeddings.weight", 0.5, cfg.TypeVocabSize, H)
	ln(prefix + "embeddings.LayerNorm")
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("%sencoder.layer.%d.", prefix, l)
		for _, n := range []string{"query", "key", "value"} {
			lin(p+"attention.self."+n, H, H)
		}
		lin(p+"attention.output.dense", H, H)
		ln(p + "attention.output.LayerNorm")
		lin(p+"intermediate.dense", H, I)
		lin(p+"output.dense", I, H)
		ln(p + "output.LayerNorm")
	}
	lin(prefix+"pooler.dense", H, H)
	lin("classifier", H, cfg.NumLabels())
	return ts
}

// refForward is a plain float64 BERT forward for one unpadded sequence: the
// last hidden state [seq][H] and the classification logits.
func refForward(cfg *model.Config, ts map[string]*safetensors.Tensor, prefix string, ids, types []int64) ([][]float64, []float64) {
	H, nh := cfg.HiddenSize, cfg.NumAttentionHeads
	hd := H / nh
	get := func(n string) []float32 { return ts[n].Data }
	linear := func(x []float64, name string) []float64 {
		w, b := get(name+".weight"), get(name+".bias")
		out := make([]float64, len(b))
		in := len(x)
		for o := range out {
			s := float64(b[o])
			for i := range in {
				s += float64(w[o*in+i]) * x[i]
			}
			out[o] = s
		}
		return out
	}
	layerNorm := func(x []float64, name string) []float64 {
		g, b := get(name+".weight"), get(name+".bias")
		var mean, vr float64
		for _, v := range x {
			mean += v
		}
		mean /= float64(len(x))
		for _, v := range x {
			vr += (v - mean) * (v - mean)
		}
		vr /= float64(len(x))
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = (v-mean)/math.Sqrt(vr+cfg.LayerNormEps)*float64(g[i]) + float64(b[i])
		}
		return out
	}
	act := func(v float64) float64 {
		switch cfg.HiddenAct {
		case "relu":
			return math.Max(v, 0)
		case "gelu_new":
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}
		return 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
	}
	S := len(ids)
	x := make([][]float64, S)
	we, pe, te := get(prefix+"embeddings.word_embeddings.weight"), get(prefix+"embeddings.position_embeddings.weight"), get(prefix+"embeddings.token_type_embeddings.weight")
	for i := range S {
		v := make([]float64, H)
		for j := range H {
			v[j] = float64(we[int(ids[i])*H+j]) + float64(pe[i*H+j]) + float64(te[int(types[i])*H+j])
		}
		x[i] = layerNorm(v, prefix+"embeddings.LayerNorm")
	}
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("%sencoder.layer.%d.", prefix, l)
		q, k, v := make([][]float64, S), make([][]float64, S), make([][]float64, S)
		for i := range S {
			q[i], k[i], v[i] = linear(x[i], p+"attention.self.query"), linear(x[i], p+"attention.self.key"), linear(x[i], p+"attention.self.value")
		}
		nx := make([][]float64, S)
		for i := range S {
			ctx := make([]float64, H)
			for h := range nh {
				sc := make([]float64, S)
				mx := math.Inf(-1)
				for j := range S {
					for d := range hd {
						sc[j] += q[i][h*hd+d] * k[j][h*hd+d]
					}
					sc[j] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				var z float64
				for j := range S {
					sc[j] = math.Exp(sc[j] - mx)
					z += sc[j]
				}
				for j := range S {
					for d := range hd {
						ctx[h*hd+d] += sc[j] / z * v[j][h*hd+d]
					}
				}
			}
			a := linear(ctx, p+"attention.output.dense")
			for j := range a {
				a[j] += x[i][j]
			}
			a = layerNorm(a, p+"attention.output.LayerNorm")
			f := linear(a, p+"intermediate.dense")
			for j := range f {
				f[j] = act(f[j])
			}
			f = linear(f, p+"output.dense")
			for j := range f {
				f[j] += a[j]
			}
			nx[i] = layerNorm(f, p+"output.LayerNorm")
		}
		x = nx
	}
	pooled := linear(x[0], prefix+"pooler.dense")
	for i := range pooled {
		pooled[i] = math.Tanh(pooled[i])
	}
	return x, linear(pooled, "classifier")
}

func needORT(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	if err := ort.Init(); err != nil {
		t.Fatal(err)
	}
}

// runModel runs an exported model on a padded batch and returns its output.
func runModel(t *testing.T, onnxBytes []byte, output string, ids, types, mask []int64, batch, seq int, outShape ortgo.Shape) []float32 {
	t.Helper()
	sess, err := ort.NewSessionFromBytes(onnxBytes, []string{InputIDs, InputMask, InputTypeIDs}, []string{output}, ort.Options{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	shape := ortgo.NewShape(int64(batch), int64(seq))
	var in []ortgo.Value
	for _, d := range [][]int64{ids, mask, types} {
		v, err := ortgo.NewTensor(shape, d)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Destroy()
		in = append(in, v)
	}
	out, err := ortgo.NewEmptyTensor[float32](outShape)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Destroy()
	if err := sess.Run(in, []ortgo.Value{out}); err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), out.GetData()...)
}

// TestBERTMatchesReference exports random tiny BERTs and checks ONNX
// Runtime's hidden states and logits against a float64 Go forward pass, on
// a padded batch of two sequences of different lengths.
func TestBERTMatchesReference(t *testing.T) {
	needORT(t)
	for _, c := range []struct{ act, prefix string }{{"gelu", ""}, {"relu", "bert."}, {"gelu_new", "bert."}} {
		t.Run(c.act+"/"+c.prefix, func(t *testing.T) {
			cfg := tinyConfig(c.act)
			ts := tinyTensors(cfg, c.prefix, 7)
			seqs := [][]int64{{2, 17, 33, 8, 41, 3}, {2, 9, 3}}
			typs := [][]int64{{0, 0, 0, 1, 1, 1}, {0, 1, 1}}
			B, S, H, L := 2, 6, cfg.HiddenSize, cfg.NumLabels()
			ids, types, mask := make([]int64, B*S), make([]int64, B*S), make([]int64, B*S)
			for b := range B {
				for i := range seqs[b] {
					ids[b*S+i], types[b*S+i], mask[b*S+i] = seqs[b][i], typs[b][i], 1
				}
			}
			embed, err := ExportBERTBytes(cfg, ts, model.TaskEmbed)
			if err != nil {
				t.Fatal(err)
			}
			rerank, err := ExportBERTBytes(cfg, ts, model.TaskRerank)
			if err != nil {
				t.Fatal(err)
			}
			hidden := runModel(t, embed, OutputHidden, ids, types, mask, B, S, ortgo.NewShape(int64(B), int64(S), int64(H)))
			logits := runModel(t, rerank, OutputLogits, ids, types, mask, B, S, ortgo.NewShape(int64(B), int64(L)))
			var worst float64
			for b := range B {
				refH, refL := refForward(cfg, ts, c.prefix, seqs[b], typs[b])
				for i := range seqs[b] {
					for j := range H {
						worst = math.Max(worst, math.Abs(float64(hidden[(b*S+i)*H+j])-refH[i][j]))
					}
				}
				for j := range L {
					worst = math.Max(worst, math.Abs(float64(logits[b*L+j])-refL[j]))
				}
			}
			if worst > 1e-4 {
				t.Errorf("ONNX Runtime vs Go reference: max abs diff %.3g (want ≤ 1e-4)", worst)
			}
		})
	}
}

func TestExportErrors(t *testing.T) {
	cfg := tinyConfig("gelu")
	// Hidden size disagreeing with config.json names the tensor and sizes.
	small := *cfg
	small.HiddenSize, small.NumAttentionHeads = 8, 2
	ts := tinyTensors(&small, "", 1)
	_, err := ExportBERTBytes(cfg, ts, model.TaskEmbed)
	if err == nil || !strings.Contains(err.Error(), "embeddings.word_embeddings.weight") || !strings.Contains(err.Error(), "[50 8]") || !strings.Contains(err.Error(), "dimension 1 is 8 in the checkpoint, config.json hidden_size is 16") {
		t.Errorf("hidden size mismatch: %v", err)
	}
	t.Logf("hidden size mismatch: %v", err)
	// Missing tensors are all named.
	ts = tinyTensors(cfg, "", 1)
	delete(ts, "encoder.layer.1.output.dense.weight")
	delete(ts, "embeddings.LayerNorm.bias")
	_, err = ExportBERTBytes(cfg, ts, model.TaskEmbed)
	if err == nil || !strings.Contains(err.Error(), "encoder.layer.1.output.dense.weight") || !strings.Contains(err.Error(), "embeddings.LayerNorm.bias") {
		t.Errorf("missing tensors: %v", err)
	}
	// The embedding export needs no head; the rerank export does.
	ts = tinyTensors(cfg, "", 1)
	delete(ts, "classifier.weight")
	if _, err := ExportBERTBytes(cfg, ts, model.TaskEmbed); err != nil {
		t.Errorf("embed export without classifier: %v", err)
	}
	if _, err = ExportBERTBytes(cfg, ts, model.TaskRerank); err == nil || !strings.Contains(err.Error(), "classifier.weight") {
		t.Errorf("rerank export without classifier: %v", err)
	}
	bad := *cfg
	bad.ModelType = "distilbert"
	if _, err := ExportBERTBytes(&bad, tinyTensors(cfg, "", 1), model.TaskEmbed); err == nil || !strings.Contains(err.Error(), `"distilbert" is not supported`) {
		t.Errorf("distilbert: %v", err)
	}
}

func TestExportDeterministic(t *testing.T) {
	cfg := tinyConfig("gelu")
	ts := tinyTensors(cfg, "", 3)
	a, err := ExportBERTBytes(cfg, ts, model.TaskEmbed)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ExportBERTBytes(cfg, ts, model.TaskEmbed)
	if !bytes.Equal(a, b) {
		t.Error("two exports of the same weights differ")
	}
}

// TestImportDir converts a tiny checkpoint directory with sentence-
// transformers files and checks the manifest, the atomic replace and that
// flags override the side files.
func TestImportDir(t *testing.T) {
	src := t.TempDir()
	cfg := tinyConfig("gelu")
	cfg.NumLabelsField = 0
	cfgJSON := `{"model_type":"bert","vocab_size":50,"hidden_size":16,"num_hidden_layers":2,"num_attention_heads":4,
		"intermediate_size":24,"max_position_embeddings":32,"type_vocab_size":2,"hidden_act":"gelu"}`
	files := map[string]string{
		"config.json":                       cfgJSON,
		"tokenizer.json":                    `{"model":{"type":"WordPiece"}}`,
		"modules.json":                      `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]`,
		"1_Pooling/config.json":             `{"word_embedding_dimension":16,"pooling_mode_cls_token":true}`,
		"config_sentence_transformers.json": `{"prompts":{"query":"query: ","passage":"passage: "}}`,
		"sentence_bert_config.json":         `{"max_seq_length":24}`,
	}
	for n, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(src, n)), 0o755)
		if err := os.WriteFile(filepath.Join(src, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := safetensors.WriteFile(filepath.Join(src, "model.safetensors"), tinyTensors(cfg, "", 5), nil); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "tiny")
	m, err := Import(context.Background(), src, dest, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Pooling != "cls" || m.Normalize || m.MaxLength != 24 || m.QueryPrefix != "query: " || m.DocumentPrefix != "passage: " || m.Dim != 16 || m.Name != "tiny" {
		t.Errorf("manifest from sentence-transformers files: %+v", m)
	}
	back, err := model.LoadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint != m.Fingerprint || len(back.Files) != 3 {
		t.Errorf("manifest on disk: %+v", back)
	}
	// Re-import over it with overrides: the directory is replaced whole.
	yes := true
	m2, err := Import(context.Background(), src, dest, Settings{Pooling: "mean", Normalize: &yes, MaxLength: 16})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Pooling != "mean" || !m2.Normalize || m2.MaxLength != 16 || m2.Fingerprint == m.Fingerprint {
		t.Errorf("overrides: %+v (fingerprint must change with pooling)", m2)
	}
	if _, err := os.Stat(dest + ".partial"); err == nil {
		t.Error("a .partial directory was left behind")
	}
	if _, err := Import(context.Background(), src, dest, Settings{MaxLength: 64}); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("max length beyond positions: %v", err)
	}
	os.Remove(filepath.Join(src, "tokenizer.json"))
	if _, err := Import(context.Background(), src, dest, Settings{}); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("missing tokenizer: %v", err)
	}
}

func TestMatMulGraph(t *testing.T) {
	needORT(t)
	var buf bytes.Buffer
	if _, err := MatMulGraph().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sess, err := ort.NewSessionFromBytes(buf.Bytes(), []string{"a", "b"}, []string{"c"}, ort.Options{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	a, _ := ortgo.NewTensor(ortgo.NewShape(2, 3), []float32{1, 2, 3, 4, 5, 6})
	b, _ := ortgo.NewTensor(ortgo.NewShape(3, 1), []float32{1, 0, -1})
	c, _ := ortgo.NewEmptyTensor[float32](ortgo.NewShape(2, 1))
	defer a.Destroy()
	defer b.Destroy()
	defer c.Destroy()
	if err := sess.Run([]ortgo.Value{a, b}, []ortgo.Value{c}); err != nil {
		t.Fatal(err)
	}
	if got := c.GetData(); got[0] != -2 || got[1] != -2 {
		t.Errorf("MatMul: %v, want [-2 -2]", got)
	}
}

// TestImportDetectsCrossEncoder: a checkpoint whose config.json names
// BertForSequenceClassification is imported as a reranker without --task
// (it had become an embedder of its hidden states); a BertModel embeds; an
// explicit Task wins.
func TestImportDetectsCrossEncoder(t *testing.T) {
	cfg := tinyConfig("gelu")
	for _, c := range []struct {
		arch, task, want string
	}{
		{"BertForSequenceClassification", "", model.TaskRerank},
		{"BertModel", "", model.TaskEmbed},
		{"", "", model.TaskEmbed},
		{"BertForSequenceClassification", model.TaskEmbed, model.TaskEmbed},
	} {
		src := t.TempDir()
		arch := ""
		if c.arch != "" {
			arch = `"architectures":["` + c.arch + `"],`
		}
		cfgJSON := `{` + arch + `"model_type":"bert","vocab_size":50,"hidden_size":16,"num_hidden_layers":2,"num_attention_heads":4,
			"intermediate_size":24,"max_position_embeddings":32,"type_vocab_size":2,"hidden_act":"gelu","num_labels":3}`
		os.WriteFile(filepath.Join(src, "config.json"), []byte(cfgJSON), 0o644)
		os.WriteFile(filepath.Join(src, "tokenizer.json"), []byte(`{"model":{"type":"WordPiece"}}`), 0o644)
		if err := safetensors.WriteFile(filepath.Join(src, "model.safetensors"), tinyTensors(cfg, "bert.", 5), nil); err != nil {
			t.Fatal(err)
		}
		m, err := Import(context.Background(), src, filepath.Join(t.TempDir(), "m"), Settings{Task: c.task})
		if err != nil {
			t.Fatalf("%s, task %q: %v", c.arch, c.task, err)
		}
		if m.Task != c.want {
			t.Errorf("%s, task %q: imported as %s, want %s", c.arch, c.task, m.Task, c.want)
		}
	}
}
