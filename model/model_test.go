package model

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	ok := `{"model_type":"bert","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":16,"max_position_embeddings":16}`
	c, err := ParseConfig([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if c.HiddenAct != "gelu" || c.LayerNormEps != 1e-12 || c.TypeVocabSize != 2 || c.NumLabels() != 1 || c.HeadDim() != 4 {
		t.Errorf("defaults not filled: %+v", c)
	}
	c2, err := ParseConfig([]byte(strings.Replace(ok, `}`, `,"id2label":{"0":"no","1":"yes"}}`, 1)))
	if err != nil || c2.NumLabels() != 2 {
		t.Errorf("id2label: %v %v", c2, err)
	}
	bad := map[string]string{
		`"gpt2" is not supported`:       strings.Replace(ok, `"bert"`, `"gpt2"`, 1),
		`"distilbert" is not supported`: strings.Replace(ok, `"bert"`, `"distilbert"`, 1),
		"model_type is missing":         strings.Replace(ok, `"model_type":"bert",`, ``, 1),
		"not divisible":                 strings.Replace(ok, `"num_attention_heads":2`, `"num_attention_heads":3`, 1),
		"hidden_act":                    strings.Replace(ok, `}`, `,"hidden_act":"swish"}`, 1),
		"position_embedding_type":       strings.Replace(ok, `}`, `,"position_embedding_type":"relative_key"}`, 1),
		"vocab_size must be positive":   strings.Replace(ok, `"vocab_size":10`, `"vocab_size":0`, 1),
		"parsing JSON":                  `{"model_type":`,
	}
	for want, in := range bad {
		if _, err := ParseConfig([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error containing %q, got %v", want, err)
		}
	}
}

// A decoder config: anna_attention chooses the mask; what anna does not
// implement (rope scaling, o_proj/MLP biases) is refused, not ignored.
func TestParseDecoderConfig(t *testing.T) {
	ok := `{"model_type":"llama","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":16,"max_position_embeddings":16,"hidden_act":"silu","rms_norm_eps":1e-5,"rope_theta":10000,"rope_scaling":null,"attention_bias":false,"mlp_bias":false}`
	c, err := ParseConfig([]byte(ok))
	if err != nil || !c.IsDecoder() || c.Bidirectional() {
		t.Fatalf("%+v, %v", c, err)
	}
	c, err = ParseConfig([]byte(strings.Replace(ok, `}`, `,"anna_attention":"bidirectional"}`, 1)))
	if err != nil || !c.Bidirectional() {
		t.Fatalf("anna_attention bidirectional: %+v, %v", c, err)
	}
	bad := map[string]string{
		`field anna_attention: "sideways"`: strings.Replace(ok, `}`, `,"anna_attention":"sideways"}`, 1),
		"field rope_scaling":               strings.Replace(ok, `"rope_scaling":null`, `"rope_scaling":{"rope_type":"llama3","factor":8}`, 1),
		"attention_bias/mlp_bias":          strings.Replace(ok, `"mlp_bias":false`, `"mlp_bias":true`, 1),
	}
	for want, in := range bad {
		if _, err := ParseConfig([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error containing %q, got %v", want, err)
		}
	}
}

func TestForwardFLOPs(t *testing.T) {
	c := &Config{HiddenSize: 384, IntermediateSize: 1536, NumHiddenLayers: 6}
	// per token per layer: 2·(4·384² + 2·384·1536) = 3,538,944, plus
	// 2·2·seq·384 for attention at seq 1.
	if got, want := c.ForwardFLOPs(1, 1), 6*(2*(4*384*384+2*384*1536)+4*384.0); got != want {
		t.Errorf("FLOPs %v, want %v", got, want)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	fp := NewFingerprinter()
	fp.Write([]byte("onnx bytes"))
	m := &Manifest{Name: "x", Architecture: "bert", Task: TaskEmbed, Dim: 8, MaxLength: 16, Pooling: PoolingMean,
		Normalize: true, Fingerprint: fp.Sum(PoolingMean, true, 16)}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	back, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint != m.Fingerprint || len(back.ShortFingerprint()) != 12 {
		t.Errorf("round trip: %+v", back)
	}
	fp2 := NewFingerprinter()
	fp2.Write([]byte("onnx bytes"))
	if fp2.Sum(PoolingCLS, true, 16) == m.Fingerprint {
		t.Error("fingerprint ignores pooling")
	}
	os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"architecture":"bert","task":"embed","dim":8,"max_length":16,"pooling":"max","fingerprint":"`+m.Fingerprint+`"}`), 0o644)
	if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), "field pooling") {
		t.Errorf("bad pooling: %v", err)
	}
	if _, err := LoadManifest(t.TempDir()); err == nil || !strings.Contains(err.Error(), "anna-model.json") {
		t.Errorf("missing manifest: %v", err)
	}
}

func TestReadSentenceTransformers(t *testing.T) {
	dir := t.TempDir()
	s, err := ReadSentenceTransformers(dir)
	if err != nil || s.HasModules || s.Pooling != "" {
		t.Fatalf("empty dir: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(dir, "modules.json"), []byte(`[{"path":"1_Pooling","type":"sentence_transformers.models.Pooling"},{"path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]`), 0o644)
	os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755)
	os.WriteFile(filepath.Join(dir, "1_Pooling", "config.json"), []byte(`{"pooling_mode_max_tokens":true}`), 0o644)
	s, err = ReadSentenceTransformers(dir)
	if err != nil || !s.Normalize || s.PoolingErr == nil {
		t.Errorf("max pooling should be flagged, not fatal: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(dir, "1_Pooling", "config.json"), []byte(`{"pooling_mode_lasttoken":true}`), 0o644)
	os.WriteFile(filepath.Join(dir, "sentence_bert_config.json"), []byte(`{"max_seq_length": 128}`), 0o644)
	s, err = ReadSentenceTransformers(dir)
	if err != nil || s.Pooling != PoolingLastToken || s.MaxLength != 128 {
		t.Errorf("lasttoken: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(dir, "config_sentence_transformers.json"), []byte(`{"prompts": `), 0o644)
	if _, err := ReadSentenceTransformers(dir); err == nil || !strings.Contains(err.Error(), "config_sentence_transformers.json") {
		t.Errorf("corrupt prompts file: %v", err)
	}
}

// TestWriteSentenceTransformers: what is written reads back the same, for
// every pooling, with and without the Normalize module and prompts.
func TestWriteSentenceTransformers(t *testing.T) {
	for _, want := range []STSettings{
		{Pooling: PoolingCLS, Normalize: true, HasModules: true, MaxLength: 512, QueryPrefix: "Represent this sentence for searching relevant passages: "},
		{Pooling: PoolingMean, HasModules: true, MaxLength: 256},
		{Pooling: PoolingLastToken, Normalize: true, HasModules: true, MaxLength: 128, QueryPrefix: "query: ", DocumentPrefix: "passage: "},
	} {
		dir := t.TempDir()
		if err := WriteSentenceTransformers(dir, want, 384); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSentenceTransformers(dir)
		if err != nil || got != want {
			t.Errorf("read back %+v, %v; want %+v", got, err, want)
		}
	}
	if err := WriteSentenceTransformers(t.TempDir(), STSettings{Pooling: "max"}, 384); err == nil || !strings.Contains(err.Error(), `"max"`) {
		t.Errorf("max pooling: %v", err)
	}
}

// TestEnsembleManifest: an ensemble's manifest holds when its width is its
// parts' and its fingerprint theirs and their weights; each broken field
// is named.
func TestEnsembleManifest(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	good := func() *Manifest {
		parts := []EnsemblePart{{Name: "a", Fingerprint: fp, Dim: 4, Weight: 1}, {Name: "b", Fingerprint: strings.Repeat("cd", 32), Dim: 2, Weight: 2.5}}
		return &Manifest{Name: "e", Architecture: ArchEnsemble, Task: TaskEmbed, Dim: 6, MaxLength: 256, Normalize: true,
			Ensemble: &Ensemble{Parts: parts}, Fingerprint: EnsembleFingerprint(parts)}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field  string
		change func(*Manifest)
	}{
		{"dim", func(m *Manifest) { m.Dim = 5 }},
		{"fingerprint", func(m *Manifest) { m.Ensemble.Parts[1].Weight = 3 }},
		{"weight", func(m *Manifest) { m.Ensemble.Parts[0].Weight = 0 }},
		{"weight", func(m *Manifest) { m.Ensemble.Parts[0].Weight = math.NaN() }},
		{"parts[1]", func(m *Manifest) { m.Ensemble.Parts[1].Fingerprint = "" }},
		{"ensemble", func(m *Manifest) { m.Ensemble = nil }},
		{"task", func(m *Manifest) { m.Task = TaskRerank }},
		{"ensemble", func(m *Manifest) { m.Architecture = "bert"; m.Pooling = PoolingMean }},
	} {
		m := good()
		c.change(m)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s broken: %v", c.field, err)
		}
	}
}
