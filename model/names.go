package model

// The names the converter (internal/model/onnx, which re-exports them under the same
// names) and the runtime share; see the package doc.

// File names inside a converted model directory, beside ONNXFile and
// ManifestFile.
const (
	TokenizerFile = "tokenizer.json" // the Hugging Face tokenizer
	ConfigFile    = "config.json"    // the Hugging Face config (Config)
)

// Graph input and output names of the converted model.onnx.
const (
	InputIDs     = "input_ids"      // int64 [batch, seq]
	InputMask    = "attention_mask" // int64 [batch, seq]: 1 for a token, 0 for padding
	InputTypeIDs = "token_type_ids" // int64 [batch, seq]; BERT-family graphs only
	// InputContext is a Causal2Vec graph's extra input (PoolingCausal2Vec):
	// the paired encoder's vector of each text, float [batch, context_dim].
	InputContext = "context"

	OutputHidden = "last_hidden_state" // task embed: [batch, seq, hidden]
	OutputLogits = "logits"            // task rerank: [batch, num_labels]
	// OutputEmbedding is the output of a decoder graph that pools itself (a
	// trainable pooling head, config.json's anna_pooling_head, or
	// Causal2Vec): the pooled, not yet normalised embedding [batch, dim].
	OutputEmbedding = "sentence_embedding"
)

// ContextPlaceholder is the input id that marks the position of a
// Causal2Vec graph's contextual token, one per row: the graph puts the
// token computed from InputContext there.
const ContextPlaceholder = -1
