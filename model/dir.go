package model

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/hint"
)

// ONNXFile is the graph's name inside a converted model directory.
const ONNXFile = "model.onnx"

// Dir is a converted model directory whose manifest, config.json and ONNX
// graph have been read and checked against each other.
type Dir struct {
	Path     string
	Manifest *Manifest
	Config   *Config
	ONNXPath string
}

// OpenDir reads the manifest and config.json of a converted model directory
// (see `annactl models import`), checks that they agree on the hidden size,
// and that the ONNX graph is there. Callers check the task they serve.
func OpenDir(dir string) (*Dir, error) {
	man, err := LoadManifest(dir)
	if err != nil {
		return nil, err
	}
	if man.Ensemble != nil {
		return nil, fmt.Errorf("%s is an ensemble of models, not a model directory of its own: encoder.Open opens it", dir)
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	want := cfg.HiddenSize     // the mean of the memory tokens, too
	if cfg.Causal2Vec != nil { // [h_C; h_EOS]
		want = 2 * cfg.HiddenSize
	}
	if want != man.Dim {
		return nil, fmt.Errorf("%s: config.json hidden_size %d disagrees with %s dim %d", dir, cfg.HiddenSize, ManifestFile, man.Dim)
	}
	p := filepath.Join(dir, ONNXFile)
	if _, err := os.Stat(p); err != nil {
		return nil, hint.Errorf(hint.Action{Kind: hint.ImportModel}, "%s has no usable %s (a checkpoint converted into a model directory has one): %w", dir, ONNXFile, err)
	}
	return &Dir{Path: dir, Manifest: man, Config: cfg, ONNXPath: p}, nil
}
