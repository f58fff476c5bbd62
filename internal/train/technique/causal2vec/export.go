package causal2vec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/anna-search/anna/internal/model/safetensors"
)

// The export's files, next to the decoder's own: the MLP's weights and the
// record of the pairing.
const (
	WeightsFile  = "causal2vec.safetensors"
	ManifestFile = "causal2vec.json"
	// Format is the manifest's format tag.
	Format = "causal2vec"
)

// Manifest records what an exported MLP pairs: the encoder whose vectors
// it takes, the decoder whose input it writes, where the contextual token
// goes, and how the embedding is formed. A server needs all of it to
// reproduce the training-time embedding.
type Manifest struct {
	Format  string `json:"format"` // "causal2vec"
	Version int    `json:"version"`
	Encoder struct {
		Model string `json:"model"`
		Dim   int    `json:"dim"`     // k, the MLP's input
		Input string `json:"input"`   // "text" (the full text) or "custom" (Config.EncoderText)
		Pool  string `json:"pooling"` // the paper's: "mean"
	} `json:"encoder"`
	Decoder struct {
		Model      string `json:"model"`
		ModelType  string `json:"model_type"`
		HiddenSize int    `json:"hidden_size"` // d, the MLP's output
		Causal     bool   `json:"causal"`
	} `json:"decoder"`
	MLP struct {
		Bias       bool   `json:"bias"`
		Activation string `json:"activation"` // "gelu" (erf)
	} `json:"mlp"`
	// Placement: C follows QueryPrefix tokens of a query (BOS,
	// instruction) and DocPrefix tokens of a document; "custom" when
	// Config.Insert chose per sequence.
	Placement struct {
		Mode        string `json:"mode"` // "prefix" or "custom"
		QueryPrefix int    `json:"query_prefix"`
		DocPrefix   int    `json:"document_prefix"`
	} `json:"placement"`
	// Embedding is [h_C; h_EOS], EmbeddingDim = 2·hidden_size values.
	Embedding    string `json:"embedding"` // "concat(contextual,eos)"
	EmbeddingDim int    `json:"embedding_dim"`
}

// Manifest describes the technique as Save records it.
func (t *Technique) Manifest() *Manifest {
	var m Manifest
	m.Format, m.Version = Format, 1
	m.Encoder.Model, m.Encoder.Dim, m.Encoder.Input, m.Encoder.Pool = t.Cfg.EncoderModel, t.Cfg.EncoderDim, "text", "mean"
	if t.Cfg.EncoderText != nil {
		m.Encoder.Input = "custom"
	}
	mc := &t.Model.Cfg
	m.Decoder.Model, m.Decoder.ModelType, m.Decoder.HiddenSize, m.Decoder.Causal = t.Cfg.DecoderModel, mc.ModelType, mc.HiddenSize, t.Model.Causal
	m.MLP.Bias, m.MLP.Activation = t.Cfg.Bias, "gelu"
	m.Placement.Mode, m.Placement.QueryPrefix, m.Placement.DocPrefix = "prefix", t.Cfg.QueryPrefix, t.Cfg.DocPrefix
	if t.Cfg.Insert != nil {
		m.Placement.Mode = "custom"
	}
	m.Embedding, m.EmbeddingDim = "concat(contextual,eos)", t.Dim()
	return &m
}

// Save writes the MLP's weights (dir/causal2vec.safetensors, the pairing
// in its metadata too) and the manifest (dir/causal2vec.json). The
// decoder's weights are the trainer's usual export.
func (t *Technique) Save(dir string) error {
	man := t.Manifest()
	js, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return fmt.Errorf("causal2vec: manifest: %w", err)
	}
	ts := map[string]*safetensors.Tensor{}
	for _, p := range t.mlp.params {
		ts[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: slices.Clone(p.Shape), Data: slices.Clone(p.W)}
	}
	meta := map[string]string{"format": Format, "encoder": man.Encoder.Model, "decoder": man.Decoder.Model,
		"encoder_dim": fmt.Sprint(man.Encoder.Dim), "hidden_size": fmt.Sprint(man.Decoder.HiddenSize)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("causal2vec: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, meta); err != nil {
		return fmt.Errorf("causal2vec: write weights: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("causal2vec: write manifest: %w", err)
	}
	return nil
}

// ReadManifest reads and checks dir/causal2vec.json.
func ReadManifest(dir string) (*Manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("causal2vec: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("causal2vec: %s: %w", ManifestFile, err)
	}
	switch {
	case m.Format != Format:
		return nil, fmt.Errorf("causal2vec: %s: format %q, want %q", ManifestFile, m.Format, Format)
	case m.Version != 1:
		return nil, fmt.Errorf("causal2vec: %s: version %d unsupported (want 1)", ManifestFile, m.Version)
	case m.Encoder.Dim <= 0 || m.Decoder.HiddenSize <= 0:
		return nil, fmt.Errorf("causal2vec: %s: encoder dim %d and hidden size %d must be positive", ManifestFile, m.Encoder.Dim, m.Decoder.HiddenSize)
	case m.MLP.Activation != "gelu":
		return nil, fmt.Errorf("causal2vec: %s: activation %q unsupported (want gelu)", ManifestFile, m.MLP.Activation)
	}
	return &m, nil
}

// Load reads an MLP that Save wrote into t, after checking that it pairs
// the same encoder dimension, decoder width and bias choice.
func (t *Technique) Load(dir string) error {
	man, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	switch {
	case man.Encoder.Dim != t.Cfg.EncoderDim:
		return fmt.Errorf("causal2vec: %s pairs a %d-dimensional encoder (%s), this technique's is %d-dimensional", dir, man.Encoder.Dim, man.Encoder.Model, t.Cfg.EncoderDim)
	case man.Decoder.HiddenSize != t.Model.Cfg.HiddenSize:
		return fmt.Errorf("causal2vec: %s pairs a decoder of width %d (%s), this one's is %d", dir, man.Decoder.HiddenSize, man.Decoder.Model, t.Model.Cfg.HiddenSize)
	case man.MLP.Bias != t.Cfg.Bias:
		return fmt.Errorf("causal2vec: %s has bias=%v, this technique bias=%v", dir, man.MLP.Bias, t.Cfg.Bias)
	}
	ts, err := safetensors.ReadFile(filepath.Join(dir, WeightsFile))
	if err != nil {
		return fmt.Errorf("causal2vec: %w", err)
	}
	var bad []error
	for _, p := range t.mlp.params {
		w, ok := ts[p.Name]
		switch {
		case !ok:
			bad = append(bad, fmt.Errorf("%s missing", p.Name))
		case !slices.Equal(w.Shape, p.Shape):
			bad = append(bad, fmt.Errorf("%s has shape %v, want %v", p.Name, w.Shape, p.Shape))
		}
	}
	if len(ts) != len(t.mlp.params) {
		bad = append(bad, fmt.Errorf("%d tensors, want %d", len(ts), len(t.mlp.params)))
	}
	if err := errors.Join(bad...); err != nil {
		return fmt.Errorf("causal2vec: %s: %w", WeightsFile, err)
	}
	for _, p := range t.mlp.params {
		copy(p.W, ts[p.Name].Data)
	}
	return nil
}
