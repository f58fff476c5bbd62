package onnx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/anna-search/anna/internal/model/arch"
	"github.com/anna-search/anna/internal/model/gguf"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// ggufNames maps llama.cpp's tensor names (blk.N. prefix removed) to
// Hugging Face's LlamaModel names (layers.N. prefix removed).
var ggufNames = func() map[string]string {
	m := map[string]string{}
	for r := arch.AttnNorm; r <= arch.MLPNorm; r++ {
		if g := r.GGUFModule(); g != "" {
			m[g+".weight"] = r.Module() + ".weight"
		}
	}
	return m
}()

var ggufBlock = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)

// LlamaFromGGUF reads a Llama-architecture GGUF file into Hugging Face
// LlamaModel weights (dequantized) and config. llama.cpp's converter
// permutes the rows of the query and key projections (for its rotary
// layout); they are permuted back, as transformers does when it loads a
// GGUF file. The output projection (output.weight), when the file has one,
// is left out: an embedder does not use it.
func LlamaFromGGUF(f *gguf.File) (map[string]*safetensors.Tensor, *model.Config, error) {
	ts, _, cfg, err := LlamaFromGGUFKeeping(f, nil)
	return ts, cfg, err
}

// LlamaFromGGUFKeeping is LlamaFromGGUF, except that the 2-D tensors keep
// says yes to (by their Hugging Face names, as in the map) are not
// dequantized: they come back in kept, in the file's stored type with their
// rows in transformers' order, and are not in tensors. keep nil keeps
// nothing; a tensor stored as float32 is never kept (nothing to save).
func LlamaFromGGUFKeeping(f *gguf.File, keep func(name string) bool) (map[string]*safetensors.Tensor, map[string]*gguf.Matrix, *model.Config, error) {
	arch, _ := f.KV["general.architecture"].(string)
	if arch != "llama" {
		return nil, nil, nil, fmt.Errorf("general.architecture %q is not supported (anna imports llama GGUF files)", arch)
	}
	flt := func(key string, def float64) float64 {
		if v, ok := f.KV[key].(float64); ok {
			return v
		}
		return def
	}
	cfg := &model.Config{ModelType: "llama", Architectures: []string{"LlamaModel"}, HiddenAct: "silu", TieWordEmbeddings: true}
	var err error
	for _, p := range []struct {
		key string
		dst *int
	}{
		{"llama.block_count", &cfg.NumHiddenLayers},
		{"llama.embedding_length", &cfg.HiddenSize},
		{"llama.feed_forward_length", &cfg.IntermediateSize},
		{"llama.attention.head_count", &cfg.NumAttentionHeads},
		{"llama.context_length", &cfg.MaxPositionEmbeddings},
	} {
		if *p.dst, err = f.Int(p.key); err != nil {
			return nil, nil, nil, err
		}
	}
	if cfg.NumKeyValueHeads, err = f.Int("llama.attention.head_count_kv"); err != nil {
		cfg.NumKeyValueHeads = cfg.NumAttentionHeads
	}
	cfg.RMSNormEps = flt("llama.attention.layer_norm_rms_epsilon", 1e-5)
	cfg.RopeTheta = flt("llama.rope.freq_base", 10000)
	if n, err := f.Int("tokenizer.ggml.bos_token_id"); err == nil {
		cfg.BOSTokenID = n
	}
	if n, err := f.Int("tokenizer.ggml.eos_token_id"); err == nil {
		cfg.EOSTokenID = n
	}
	if n, err := f.Int("llama.rope.dimension_count"); err == nil && cfg.NumAttentionHeads > 0 && n != cfg.HiddenSize/cfg.NumAttentionHeads {
		return nil, nil, nil, fmt.Errorf("llama.rope.dimension_count %d: partial rotary embeddings are not supported (head size %d)", n, cfg.HiddenSize/cfg.NumAttentionHeads)
	}
	if _, ok := f.KV["llama.rope.scaling.type"]; ok {
		return nil, nil, nil, fmt.Errorf("llama.rope.scaling.type: scaled rotary embeddings are not supported")
	}

	out, kept := map[string]*safetensors.Tensor{}, map[string]*gguf.Matrix{}
	for _, t := range f.Tensors {
		var name string
		heads := 0 // the query and key projections are un-permuted per head
		switch {
		case t.Name == "token_embd.weight":
			name = "embed_tokens.weight"
		case t.Name == "output_norm.weight":
			name = "norm.weight"
		case t.Name == "output.weight", t.Name == "rope_freqs.weight":
			continue
		default:
			m := ggufBlock.FindStringSubmatch(t.Name)
			if m == nil || ggufNames[m[2]] == "" {
				return nil, nil, nil, fmt.Errorf("tensor %q is not part of a llama model", t.Name)
			}
			name = "layers." + m[1] + "." + ggufNames[m[2]]
			switch m[2] {
			case "attn_q.weight":
				heads = cfg.NumAttentionHeads
			case "attn_k.weight":
				heads = cfg.KVHeads()
			}
		}
		// GGUF dims run fastest first: PyTorch's shape is their reverse.
		shape := make([]int, len(t.Dims))
		for i, d := range t.Dims {
			shape[len(t.Dims)-1-i] = int(d)
		}
		if keep != nil && len(shape) == 2 && t.Type != gguf.F32 && keep(name) {
			m, err := f.Matrix(t)
			if err != nil {
				return nil, nil, nil, err
			}
			if heads > 0 {
				m = m.PermuteRows(unpermutation(shape[0], heads))
			}
			kept[name] = m
			continue
		}
		data, err := f.Float32(t)
		if err != nil {
			return nil, nil, nil, err
		}
		if heads > 0 {
			data = unpermute(data, shape, heads)
		}
		out[name] = &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: data}
	}
	if e, ok := out["embed_tokens.weight"]; ok && len(e.Shape) == 2 {
		cfg.VocabSize = e.Shape[0]
	} else if e, ok := kept["embed_tokens.weight"]; ok {
		cfg.VocabSize = e.Rows
	}
	if n, err := f.Int("llama.vocab_size"); err == nil && cfg.VocabSize != 0 && n != cfg.VocabSize {
		return nil, nil, nil, fmt.Errorf("llama.vocab_size %d disagrees with token_embd.weight (%d rows)", n, cfg.VocabSize)
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, err
	}
	return out, kept, cfg, nil
}

// unpermute undoes llama.cpp's permutation of a query or key projection
// [heads*hd, in]: within each head, the rows of the two rotary halves were
// interleaved; this restores transformers' order, as its GGUF loader
// (reverse_permute_weights) does.
func unpermute(w []float32, shape []int, heads int) []float32 {
	cols := shape[1]
	out := make([]float32, len(w))
	for dst, src := range unpermutation(shape[0], heads) {
		copy(out[dst*cols:(dst+1)*cols], w[int(src)*cols:(int(src)+1)*cols])
	}
	return out
}

// unpermutation is unpermute as row indices: row i of the result is row
// perm[i] of the file's matrix (rows = heads × head size).
func unpermutation(rows, heads int) []int32 {
	hd := rows / heads
	perm := make([]int32, rows)
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				// llama.cpp's convert_hf_to_gguf.py permute() put
				// transformers' row j*hd/2+i of a head at row i*2+j.
				perm[h*hd+j*(hd/2)+i] = int32(h*hd + i*2 + j)
			}
		}
	}
	return perm
}

// ImportGGUF converts a llama GGUF file into a model directory dest for
// embedding: the weights dequantized and written by anna's decoder graph,
// a tokenizer.json built from the file's vocabulary with EOS appended to
// every sequence (decoder embedders pool the last token), last-token
// pooling unless s says otherwise.
func ImportGGUF(ctx context.Context, path, dest string, s Settings) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	tensors, cfg, err := LlamaFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("import: %s: %w", path, err)
	}
	tok, err := f.TokenizerJSON(gguf.TokenizerOptions{AppendEOS: true})
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dest)), 0o755); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dest)), ".gguf-tokenizer-")
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer os.RemoveAll(tmp)
	tokPath := filepath.Join(tmp, TokenizerFile)
	if err := os.WriteFile(tokPath, tok, 0o644); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if s.Pooling == "" {
		s.Pooling = model.PoolingLastToken
	}
	if s.Source == "" {
		if abs, err := filepath.Abs(path); err == nil {
			s.Source = abs
		}
	}
	cfgJSON, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return WriteDir(ctx, dest, cfg, cfgJSON, tensors, tokPath, s)
}
