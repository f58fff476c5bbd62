// Package model reads Hugging Face BERT-family checkpoints (config.json and
// the sentence-transformers side files) and reads and writes anna's model
// manifest, anna-model.json, which travels beside every converted model.onnx.
// It also names what a converted directory's writer (the converter,
// internal/model/onnx) and its readers (the runtime: internal/inference, encoder, rerank)
// share — its files and the graph's inputs and outputs (names.go) — so that
// the runtime imports this leaf package and never the converter.
package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Config is the part of a Hugging Face config.json that anna's graphs
// need: BERT encoders (model_type "bert") and Llama-family decoders
// ("llama", "mistral", "qwen2" with its query/key/value biases, and "qwen3"
// with its head_dim and per-head RMSNorm of queries and keys: RMSNorm,
// rotary positions, grouped-query attention, SwiGLU, causal attention),
// under Hugging Face's field names.
type Config struct {
	ModelType             string            `json:"model_type"`
	Architectures         []string          `json:"architectures,omitempty"`
	VocabSize             int               `json:"vocab_size"`
	HiddenSize            int               `json:"hidden_size"`
	NumHiddenLayers       int               `json:"num_hidden_layers"`
	NumAttentionHeads     int               `json:"num_attention_heads"`
	IntermediateSize      int               `json:"intermediate_size"`
	MaxPositionEmbeddings int               `json:"max_position_embeddings"`
	TypeVocabSize         int               `json:"type_vocab_size"`
	HiddenAct             string            `json:"hidden_act"`
	LayerNormEps          float64           `json:"layer_norm_eps"`
	PositionEmbeddingType string            `json:"position_embedding_type,omitempty"`
	PadTokenID            int               `json:"pad_token_id"`
	ID2Label              map[string]string `json:"id2label,omitempty"`
	// NumLabelsField is config.json's explicit num_labels, when present;
	// use NumLabels(), which falls back to id2label.
	NumLabelsField int `json:"num_labels,omitempty"`

	// Decoders.
	NumKeyValueHeads  int     `json:"num_key_value_heads,omitempty"`
	RMSNormEps        float64 `json:"rms_norm_eps,omitempty"`
	RopeTheta         float64 `json:"rope_theta,omitempty"`
	TieWordEmbeddings bool    `json:"tie_word_embeddings,omitempty"`
	BOSTokenID        int     `json:"bos_token_id,omitempty"`
	EOSTokenID        int     `json:"eos_token_id,omitempty"`
	// HeadDimField is config.json's head_dim (Qwen3, where it need not be
	// hidden_size / num_attention_heads); use HeadDim().
	HeadDimField int `json:"head_dim,omitempty"`
	// Attention is anna's own key for decoders: "bidirectional" when the
	// model was trained to attend to every token (paper 002's bidirectional
	// variant, LLM2Vec-style), "" or "causal" for the pretrained causal
	// mask. The trainer writes it into the config.json it exports; the ONNX
	// graph and the trainer read it.
	Attention string `json:"anna_attention,omitempty"`
	// PoolingHead is anna's own key for a decoder trained with a trainable
	// pooling head (paper 002's latent or multi-layer pooling): its shape.
	// Its weights are the checkpoint's "pooling.…" tensors; the ONNX graph
	// applies it and outputs the pooled embedding.
	PoolingHead *PoolingHead `json:"anna_pooling_head,omitempty"`
	// Causal2Vec is anna's own key for a decoder trained with paper 004's
	// technique: the shape of the MLP ("causal2vec.mlp.…" tensors) that
	// maps a small encoder's vector to the contextual token. The graph
	// takes that vector as its context input and outputs [h_C; h_EOS].
	Causal2Vec *Causal2Vec `json:"anna_causal2vec,omitempty"`
	// MemoryTokens is anna's own key for an AutoRegEmbed (paper 001)
	// decoder: k trained memory-token embeddings (the checkpoint's
	// "autoregembed.memory", k×hidden) that follow each text; the graph
	// gives them ids vocab_size … vocab_size+k−1 and outputs the mean of
	// their last hidden states.
	MemoryTokens int `json:"anna_memory_tokens,omitempty"`
	// Read only to refuse what anna does not implement (Llama 3's rope
	// scaling, o_proj and MLP biases), rather than ignore it silently.
	RopeScaling   json.RawMessage `json:"rope_scaling,omitempty"`
	AttentionBias bool            `json:"attention_bias,omitempty"`
	MLPBias       bool            `json:"mlp_bias,omitempty"`
}

// PoolingHead shapes a trainable pooling head: Latents trainable queries
// cross-attend, in Heads heads that split the hidden size, to keys and
// values projected from the last layer's real tokens (Mode PoolingLatent)
// or from every layer's last-token state plus a trainable layer weight
// (PoolingMultiLayer); an MLP with a residual follows and the latents'
// outputs are averaged.
type PoolingHead struct {
	Mode    string `json:"mode"`
	Latents int    `json:"latents"`
	Heads   int    `json:"heads"`
}

// Causal2Vec shapes a Causal2Vec decoder's MLP: C = GELU(v·W1ᵀ [+ b1])·W2ᵀ
// [+ b2], v the ContextDim-dimensional vector of the paired encoder.
type Causal2Vec struct {
	ContextDim int  `json:"context_dim"`
	Bias       bool `json:"bias"`
}

// Attention masks a decoder can be built with.
const (
	AttentionCausal        = "causal"
	AttentionBidirectional = "bidirectional"
)

// Bidirectional reports whether a decoder attends to every (non-padding)
// token instead of the earlier ones only.
func (c *Config) Bidirectional() bool { return c.Attention == AttentionBidirectional }

// IsDecoder reports whether the architecture is a causal decoder (Llama
// family) rather than a BERT encoder.
func (c *Config) IsDecoder() bool { return IsDecoderType(c.ModelType) }

// IsDecoderType reports whether a model_type (or a manifest's
// architecture) is one of the Llama-family decoders anna converts.
func IsDecoderType(t string) bool {
	switch t {
	case "llama", "mistral", "qwen2", "qwen3":
		return true
	}
	return false
}

// QKVBias reports whether the decoder's query, key and value projections
// carry biases (Qwen2).
func (c *Config) QKVBias() bool { return c.ModelType == "qwen2" }

// QKNorm reports whether the decoder applies an RMSNorm over each head of
// the queries and keys before the rotary positions (Qwen3's q_norm and
// k_norm).
func (c *Config) QKNorm() bool { return c.ModelType == "qwen3" }

// IsRoBERTa reports whether the architecture is RoBERTa or XLM-RoBERTa: a
// BERT encoder whose positions start after the pad id.
func (c *Config) IsRoBERTa() bool { return c.ModelType == "roberta" || c.ModelType == "xlm-roberta" }

// KVHeads is the number of key/value heads (grouped-query attention):
// num_key_value_heads, else num_attention_heads.
func (c *Config) KVHeads() int {
	if c.NumKeyValueHeads > 0 {
		return c.NumKeyValueHeads
	}
	return c.NumAttentionHeads
}

// NumLabels is the classifier width of a sequence-classification head:
// num_labels, else the size of id2label, else 1 (a regression head, the
// usual cross-encoder).
func (c *Config) NumLabels() int {
	if c.NumLabelsField > 0 {
		return c.NumLabelsField
	}
	if len(c.ID2Label) > 0 {
		return len(c.ID2Label)
	}
	return 1
}

// HeadDim is the width of one attention head: head_dim when the config
// gives it, else hidden_size / num_attention_heads.
func (c *Config) HeadDim() int {
	if c.HeadDimField > 0 {
		return c.HeadDimField
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// LoadConfig reads and validates dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: reading config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses config.json bytes, fills Hugging Face's defaults for
// absent optional fields and validates the result.
func ParseConfig(b []byte) (*Config, error) {
	c := &Config{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("parsing JSON: %w", err)
	}
	// An empty list or map is none (as written back: omitempty), so a
	// config reads the same after a round trip.
	if len(c.Architectures) == 0 {
		c.Architectures = nil
	}
	if len(c.ID2Label) == 0 {
		c.ID2Label = nil
	}
	if c.IsDecoder() {
		if c.HiddenAct == "" {
			c.HiddenAct = "silu"
		}
		if c.RMSNormEps == 0 {
			c.RMSNormEps = 1e-6
		}
		if c.RopeTheta == 0 {
			c.RopeTheta = 10000
		}
		return c, c.Validate()
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "gelu"
	}
	if c.LayerNormEps == 0 {
		c.LayerNormEps = 1e-12
	}
	if c.TypeVocabSize == 0 {
		c.TypeVocabSize = 2
	}
	if c.PositionEmbeddingType == "" {
		c.PositionEmbeddingType = "absolute"
	}
	return c, c.Validate()
}

// Validate refuses configurations the ONNX exporter and the Go trainer do
// not implement, naming the field.
func (c *Config) Validate() error {
	switch {
	case c.ModelType == "bert" || c.IsRoBERTa():
		if c.PoolingHead != nil || c.Causal2Vec != nil || c.MemoryTokens != 0 {
			return fmt.Errorf("fields anna_pooling_head, anna_causal2vec, anna_memory_tokens: decoder options, not for %s", c.ModelType)
		}
	case c.IsDecoder():
		return c.validateDecoder()
	case c.ModelType == "":
		return fmt.Errorf("model_type is missing (anna converts model_type \"bert\", \"roberta\", \"xlm-roberta\", \"llama\", \"mistral\", \"qwen2\" and \"qwen3\")")
	default:
		// DistilBERT has no token types and other tensor names: its graph
		// differs, so converting it as BERT would silently give wrong vectors.
		return fmt.Errorf("model_type %q is not supported (anna converts model_type \"bert\", \"roberta\", \"xlm-roberta\", \"llama\", \"mistral\", \"qwen2\" and \"qwen3\")", c.ModelType)
	}
	if err := c.validateSizes(); err != nil {
		return err
	}
	if c.HeadDimField != 0 {
		return fmt.Errorf("field head_dim is for decoders (qwen3), not %s", c.ModelType)
	}
	if c.TypeVocabSize <= 0 {
		return fmt.Errorf("field type_vocab_size must be positive, got %d", c.TypeVocabSize)
	}
	switch c.HiddenAct {
	case "gelu", "gelu_new", "gelu_pytorch_tanh", "relu":
	default:
		return fmt.Errorf("hidden_act %q not supported (want gelu, gelu_new, gelu_pytorch_tanh or relu)", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "absolute" {
		return fmt.Errorf("position_embedding_type %q not supported (want absolute)", c.PositionEmbeddingType)
	}
	if c.NumLabelsField < 0 {
		return fmt.Errorf("num_labels must not be negative, got %d", c.NumLabelsField)
	}
	for k := range c.ID2Label {
		if _, err := strconv.Atoi(k); err != nil {
			return fmt.Errorf("id2label key %q is not an integer", k)
		}
	}
	return nil
}

// validateSizes checks the sizes every architecture has.
func (c *Config) validateSizes() error {
	for _, p := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize},
		{"hidden_size", c.HiddenSize},
		{"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads},
		{"intermediate_size", c.IntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if p.v <= 0 {
			return fmt.Errorf("field %s must be positive, got %d", p.name, p.v)
		}
	}
	if c.HeadDimField == 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size %d is not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	return nil
}

func (c *Config) validateDecoder() error {
	if err := c.validateSizes(); err != nil {
		return err
	}
	if c.HeadDimField < 0 {
		return fmt.Errorf("field head_dim must not be negative, got %d", c.HeadDimField)
	}
	if c.HeadDimField != 0 && c.ModelType != "qwen3" && c.HeadDimField != c.HiddenSize/c.NumAttentionHeads {
		// Only Qwen3 is implemented (and checked) with a head width of its own.
		return fmt.Errorf("field head_dim %d differs from hidden_size / num_attention_heads = %d: supported for qwen3 only, not %s", c.HeadDimField, c.HiddenSize/c.NumAttentionHeads, c.ModelType)
	}
	if c.NumKeyValueHeads < 0 {
		return fmt.Errorf("field num_key_value_heads must not be negative, got %d", c.NumKeyValueHeads)
	}
	if c.NumAttentionHeads%c.KVHeads() != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.KVHeads())
	}
	if c.HeadDim()%2 != 0 {
		return fmt.Errorf("head size %d (head_dim, else hidden_size / num_attention_heads) must be even for rotary positions", c.HeadDim())
	}
	if c.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q not supported for %s (want silu)", c.HiddenAct, c.ModelType)
	}
	switch c.Attention {
	case "", AttentionCausal, AttentionBidirectional:
	default:
		return fmt.Errorf("field anna_attention: %q (want %s or %s)", c.Attention, AttentionCausal, AttentionBidirectional)
	}
	if c.MemoryTokens < 0 || c.MemoryTokens > 0 && (c.Causal2Vec != nil || c.PoolingHead != nil) {
		return fmt.Errorf("field anna_memory_tokens: %d (want positive, and not with anna_causal2vec or anna_pooling_head)", c.MemoryTokens)
	}
	if cv := c.Causal2Vec; cv != nil {
		if cv.ContextDim <= 0 {
			return fmt.Errorf("field anna_causal2vec.context_dim: %d (want the paired encoder's dimension, > 0)", cv.ContextDim)
		}
		if c.PoolingHead != nil {
			return fmt.Errorf("fields anna_causal2vec and anna_pooling_head: a Causal2Vec embedding is [h_C; h_EOS], not a pooling head's")
		}
	}
	if h := c.PoolingHead; h != nil {
		if h.Mode != PoolingLatent && h.Mode != PoolingMultiLayer {
			return fmt.Errorf("field anna_pooling_head.mode: %q (want %s or %s)", h.Mode, PoolingLatent, PoolingMultiLayer)
		}
		if h.Latents <= 0 || h.Heads <= 0 || c.HiddenSize%h.Heads != 0 {
			return fmt.Errorf("field anna_pooling_head: %d latents and %d heads over hidden_size %d (want both positive, heads dividing the hidden size)", h.Latents, h.Heads, c.HiddenSize)
		}
	}
	if rs := strings.TrimSpace(string(c.RopeScaling)); rs != "" && rs != "null" {
		return fmt.Errorf("field rope_scaling: %s is not implemented (anna's rotary positions are unscaled)", rs)
	}
	if c.AttentionBias && !c.QKVBias() || c.MLPBias {
		return fmt.Errorf("fields attention_bias/mlp_bias: biases on %s's o_proj or MLP are not implemented", c.ModelType)
	}
	if !(c.RMSNormEps > 0) || !(c.RopeTheta > 0) {
		return fmt.Errorf("rms_norm_eps (%g) and rope_theta (%g) must be positive", c.RMSNormEps, c.RopeTheta)
	}
	return nil
}

// ForwardFLOPs counts the floating-point operations (2 per multiply-add) of
// one encoder forward pass over a [batch, seq] input: the matrix products
// only (projections, attention scores and mixing, feed-forward), which are
// all but a few percent of the work.
func (c *Config) ForwardFLOPs(batch, seq int) float64 {
	b, s, h, i := float64(batch), float64(seq), float64(c.HiddenSize), float64(c.IntermediateSize)
	perLayer := 2 * b * s * (4*h*h + 2*s*h + 2*h*i)
	return float64(c.NumHiddenLayers) * perLayer
}
