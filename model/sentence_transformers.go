package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/anna-search/anna/hint"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// STSettings are what a sentence-transformers checkpoint says about itself in
// its side files. Zero values mean "not stated".
type STSettings struct {
	Pooling string // from the Pooling module's config
	// PoolingErr is set when the Pooling module asks for a mode anna does
	// not implement (max, weighted mean...); an explicit --pooling wins.
	PoolingErr     error
	Normalize      bool   // a Normalize module is present
	HasModules     bool   // modules.json was found (Normalize is then meaningful)
	MaxLength      int    // sentence_bert_config.json max_seq_length
	QueryPrefix    string // config_sentence_transformers.json prompts["query"]
	DocumentPrefix string // prompts["document"], or ["passage"]
}

// ReadSentenceTransformers reads modules.json, the Pooling module's
// config.json, config_sentence_transformers.json and sentence_bert_config.json
// from dir, each when present.
func ReadSentenceTransformers(dir string) (STSettings, error) {
	var s STSettings
	var modules []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	}
	ok, err := readJSON(filepath.Join(dir, "modules.json"), &modules)
	if err != nil {
		return s, err
	}
	if ok {
		s.HasModules = true
		for _, m := range modules {
			switch {
			case strings.HasSuffix(m.Type, ".Pooling"):
				s.Pooling, s.PoolingErr = readPooling(filepath.Join(dir, m.Path, "config.json"))
			case strings.HasSuffix(m.Type, ".Normalize"):
				s.Normalize = true
			}
		}
	}
	var stc struct {
		Prompts map[string]string `json:"prompts"`
	}
	if _, err := readJSON(filepath.Join(dir, "config_sentence_transformers.json"), &stc); err != nil {
		return s, err
	}
	s.QueryPrefix = stc.Prompts["query"]
	s.DocumentPrefix = stc.Prompts["document"]
	if s.DocumentPrefix == "" {
		s.DocumentPrefix = stc.Prompts["passage"]
	}
	var sbc struct {
		MaxSeqLength int `json:"max_seq_length"`
	}
	if _, err := readJSON(filepath.Join(dir, "sentence_bert_config.json"), &sbc); err != nil {
		return s, err
	}
	s.MaxLength = sbc.MaxSeqLength
	return s, nil
}

func readPooling(path string) (string, error) {
	var p struct {
		CLS       bool `json:"pooling_mode_cls_token"`
		Mean      bool `json:"pooling_mode_mean_tokens"`
		Max       bool `json:"pooling_mode_max_tokens"`
		MeanSqrt  bool `json:"pooling_mode_mean_sqrt_len_tokens"`
		Weighted  bool `json:"pooling_mode_weightedmean_tokens"`
		LastToken bool `json:"pooling_mode_lasttoken"`
	}
	ok, err := readJSON(path, &p)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("model: modules.json names a Pooling module but %s is missing", path)
	}
	var modes []string
	if p.CLS {
		modes = append(modes, PoolingCLS)
	}
	if p.Mean {
		modes = append(modes, PoolingMean)
	}
	if p.LastToken {
		modes = append(modes, PoolingLastToken)
	}
	if p.Max || p.MeanSqrt || p.Weighted || len(modes) != 1 {
		return "", hint.Errorf(hint.Action{Kind: hint.ImportModel, Option: "pooling", Value: "MODE"},
			"model: %s: only one of cls, mean or lasttoken pooling is supported (name the pooling to use instead)", path)
	}
	return modes[0], nil
}

// readJSON decodes path into v; ok is false when the file does not exist.
func readJSON(path string, v any) (ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("model: reading %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("model: %s: parsing JSON: %w", path, err)
	}
	return true, nil
}

// WriteSentenceTransformers writes the side files ReadSentenceTransformers
// reads back as s (modules.json with a Transformer, a Pooling module in
// 1_Pooling and, when s.Normalize, a Normalize module; the pooling config
// for dim; config_sentence_transformers.json with the prompts;
// sentence_bert_config.json with the length), so that a checkpoint built
// here from another format loads in sentence-transformers as anna serves
// it. s.Pooling must be cls, mean or lasttoken.
func WriteSentenceTransformers(dir string, s STSettings, dim int) error {
	modes := map[string]string{PoolingCLS: "pooling_mode_cls_token", PoolingMean: "pooling_mode_mean_tokens", PoolingLastToken: "pooling_mode_lasttoken"}
	mode, ok := modes[s.Pooling]
	if !ok {
		return fmt.Errorf("model: sentence-transformers pooling %q: want cls, mean or lasttoken", s.Pooling)
	}
	type module struct {
		Idx  int    `json:"idx"`
		Name string `json:"name"`
		Path string `json:"path"`
		Type string `json:"type"`
	}
	modules := []module{
		{0, "0", "", "sentence_transformers.models.Transformer"},
		{1, "1", "1_Pooling", "sentence_transformers.models.Pooling"},
	}
	if s.Normalize {
		modules = append(modules, module{2, "2", "2_Normalize", "sentence_transformers.models.Normalize"})
	}
	pooling := map[string]any{"word_embedding_dimension": dim}
	for _, m := range modes {
		pooling[m] = m == mode
	}
	prompts := map[string]string{}
	if s.QueryPrefix != "" {
		prompts["query"] = s.QueryPrefix
	}
	if s.DocumentPrefix != "" {
		prompts["document"] = s.DocumentPrefix
	}
	files := []struct {
		path string
		v    any
	}{
		{"modules.json", modules},
		{filepath.Join("1_Pooling", "config.json"), pooling},
		{"config_sentence_transformers.json", map[string]any{"prompts": prompts}},
		{"sentence_bert_config.json", map[string]any{"max_seq_length": s.MaxLength}},
	}
	for _, f := range files {
		b, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return fmt.Errorf("model: %s: %w", f.path, err)
		}
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	return nil
}
