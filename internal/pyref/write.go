package pyref

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/model/safetensors"
)

// WriteParams writes the parameters' current values to path as
// safetensors, for a reference script to load, and returns the names of the
// unfrozen ones in order: the gradients the script must return.
func WriteParams(tb testing.TB, path string, ps ...*ops.Param) (trainable []string) {
	tb.Helper()
	raw := map[string]*safetensors.Tensor{}
	for _, q := range ps {
		raw[q.Name] = &safetensors.Tensor{Name: q.Name, DType: "F32", Shape: q.Shape, Data: q.W}
		if !q.Frozen {
			trainable = append(trainable, q.Name)
		}
	}
	if err := safetensors.WriteFile(path, raw, nil); err != nil {
		tb.Fatal(err)
	}
	return trainable
}

// WriteJSON writes each value as the JSON file of its name in dir (a
// reference job's config.json, batch.json, ...).
func WriteJSON(tb testing.TB, dir string, files map[string]any) {
	tb.Helper()
	for name, v := range files {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
