package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// FuzzParseConfig: a Hugging Face config.json, as ParseConfig reads it:
// any input fails or gives a config that validates, and that, written
// back as JSON, parses to the same config (the defaults it filled in are
// stable).
func FuzzParseConfig(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(home.DefaultModel(), ConfigFile)); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}`))
	f.Add([]byte(`{"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 16}`))
	f.Add([]byte(`{"model_type": "qwen3", "head_dim": 4, "rope_scaling": {"type": "linear", "factor": 2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("a parsed config does not marshal: %v", err)
		}
		c2, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("config %s, written back, does not parse: %v", out, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("config %+v written back parses as %+v", c, c2)
		}
	})
}

// FuzzLoadManifest: anna-model.json, as LoadManifest reads it: any input
// fails or gives a manifest that validates and that WriteManifest writes
// back to one LoadManifest reads as the same.
func FuzzLoadManifest(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(home.DefaultModel(), ManifestFile)); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"name": "x", "architecture": "bert", "task": "embed", "dim": 8, "max_length": 16, "pooling": "mean", "normalize": true, "fingerprint": "00ff"}`))
	f.Add([]byte(`{"name": "r", "architecture": "bert", "task": "rerank", "dim": 8, "num_labels": 1, "max_length": 16, "fingerprint": "abcd", "measured": [{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := LoadManifest(dir)
		if err != nil {
			return
		}
		out := t.TempDir()
		if err := WriteManifest(out, m); err != nil {
			t.Fatalf("a loaded manifest is not written back: %v", err)
		}
		m2, err := LoadManifest(out)
		if err != nil {
			t.Fatalf("a manifest written back does not load: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("manifest %+v written back loads as %+v", m, m2)
		}
	})
}
