package train

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/anna-search/anna/hint"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/internal/model/gguf"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

// passer runs a batch through a model, pooled by pooling: the objective's
// Pass over a BERT or decoder on the CPU, or over a device's copy.
type passer interface {
	pass(b *bert.Batch, pooling string) objective.Pass
}

type bertNet struct{ m *bert.Model }

func (n bertNet) pass(b *bert.Batch, pooling string) objective.Pass { return n.m.Pass(b, pooling) }

// decoderNet runs a decoder.Model (token types are ignored).
type decoderNet struct{ m *decoder.Model }

func (n decoderNet) pass(b *bert.Batch, pooling string) objective.Pass {
	return n.m.Pass(decoderBatch(b), pooling)
}

// source is what Run loaded: a BERT or a decoder, the tokenizer file it
// trains with, and the directory whose config and side files the export
// copies.
type source struct {
	bert    *bert.Model    // nil for decoders
	dec     *decoder.Model // nil for BERT
	tokPath string
	dir     string
}

func (s *source) net() passer {
	if s.bert != nil {
		return bertNet{s.bert}
	}
	return decoderNet{s.dec}
}

// host is the store of the loaded model's own Params.
func (s *source) host() hostStore {
	if s.bert != nil {
		return hostStore{s.bert.Params, s.bert.ZeroGrad}
	}
	return hostStore{s.dec.Params, s.dec.ZeroGrad}
}

func (s *source) config() *model.Config {
	if s.bert != nil {
		return &s.bert.Cfg
	}
	return &s.dec.Cfg
}

func (s *source) positions() int { return s.config().MaxPositionEmbeddings }

// export writes the trained model (LoRA merged) as outDir/hf and outDir/model.
func (s *source) export(ctx context.Context, outDir string, es export.Settings) (string, string, error) {
	if s.bert != nil {
		return s.bert.Export(ctx, s.dir, outDir, es)
	}
	return s.dec.Export(ctx, s.dir, outDir, es, nil, nil)
}

// loadSource loads cfg.ModelDir: a BERT or decoder Hugging Face checkpoint
// directory, or a llama GGUF file (its tokenizer, with EOS appended as the
// GGUF import builds it, and its config are written to OutDir/source for
// the export). It settles the LoRA alpha by architecture (defaults settled
// the pooling), applies LoRA (but for a technique that trains copies of
// its own) and refuses what the architecture cannot do.
func loadSource(cfg *Config) (*source, error) {
	cross := cfg.Objective != ObjectiveContrastive
	var mc *model.Config
	if !isGGUF(cfg.ModelDir) {
		c, err := model.LoadConfig(cfg.ModelDir)
		if err != nil {
			return nil, fmt.Errorf("train: %s is not a usable checkpoint: %w", cfg.ModelDir, err)
		}
		mc = c
	}
	if mc != nil && !mc.IsDecoder() {
		return loadBERT(cfg, mc, cross)
	}
	if cross {
		return nil, fmt.Errorf("train: objective %q: decoders train as bi-encoders only (contrastive)", cfg.Objective)
	}
	headPool := isHead(cfg.Pooling)
	if cfg.Pooling != PoolLast && cfg.Pooling != PoolMean && !headPool {
		return nil, fmt.Errorf("train: pooling %q: decoders pool the last token (EOS), the mean, or with a trainable head (latent, multilayer)", cfg.Pooling)
	}
	if _, err := os.Stat(cfg.ModelDir); mc == nil && err != nil {
		// An anna model's manifest may name a catalogue download, not a file.
		return nil, hint.Errorf(hint.Action{Kind: hint.SetOption, Option: "train.Config.ModelDir", Value: "FILE.gguf"},
			"train: the GGUF file %q is not on this machine (give the .gguf file itself, e.g. the one the catalogue's download holds): %w", cfg.ModelDir, err)
	}
	copies := cfg.Technique != nil && cfg.Technique.CopiesDecoder()
	// Under LoRA the base does not train: its projections stay in the
	// file's stored type (bit for bit the same products; a fifth of the
	// memory for Q4 GGUF files, half for float16 or bfloat16 checkpoints).
	// A technique that copies the base into models of its own reads it in
	// float32.
	d, err := decoder.Load(cfg.ModelDir, decoder.LoadOptions{KeepBase: cfg.LoRA != nil && !copies})
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	// A model trained bidirectionally (its config says so) stays so.
	d.Causal, d.Threads, d.Recompute = !cfg.Bidirectional && !d.Cfg.Bidirectional(), cfg.Threads, cfg.Recompute
	if hc := d.HeadConfig(); hc != nil {
		// A checkpoint with a trained head (an earlier export) goes on
		// training it; another pooling would export a head it never used.
		if cfg.Pooling != hc.Mode {
			return nil, fmt.Errorf("train: pooling %q: %s has a trained %s pooling head (config.json anna_pooling_head); train it with pooling %s", cfg.Pooling, cfg.ModelDir, hc.Mode, hc.Mode)
		}
	} else if headPool { // before LoRA, which leaves it trainable
		if err := d.EnableHead(decoder.HeadConfig{Mode: cfg.Pooling, Latents: cfg.HeadLatents, Heads: cfg.HeadHeads}, cfg.Seed); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	if cfg.LoRA != nil && cfg.LoRA.Alpha <= 0 {
		cfg.LoRA.Alpha = float64(cfg.LoRA.Rank) / 2 // paper 003: rank 64, alpha 32
	}
	if cfg.LoRA != nil && !copies {
		if err := d.EnableLoRA(decoderLoRA(cfg.LoRA), cfg.Seed); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	s := &source{dec: d, tokPath: filepath.Join(cfg.ModelDir, "tokenizer.json"), dir: cfg.ModelDir}
	if mc == nil {
		s.dir = filepath.Join(cfg.OutDir, "source")
		s.tokPath = filepath.Join(s.dir, "tokenizer.json")
		if err := writeGGUFSource(cfg.ModelDir, s.dir, &d.Cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func decoderLoRA(c *LoRAConfig) decoder.LoRAConfig {
	return decoder.LoRAConfig{Rank: c.Rank, Alpha: c.Alpha, Targets: c.Targets}
}

// loadBERT is loadSource for a BERT-family checkpoint: a bi-encoder, or a
// cross-encoder with its head (a missing head initialised from the seed).
func loadBERT(cfg *Config, mc *model.Config, cross bool) (*source, error) {
	if mc.ModelType != "bert" {
		return nil, fmt.Errorf("train: %s: model_type %q: the trainer trains BERT encoders and llama, mistral, qwen2 and qwen3 decoders (internal/train/decoder)", cfg.ModelDir, mc.ModelType)
	}
	if cfg.Bidirectional || cfg.Recompute || isHead(cfg.Pooling) || cfg.Technique != nil {
		return nil, fmt.Errorf("train: bidirectional attention, recomputation, trainable pooling heads and techniques are decoder options; %s is a %s encoder", cfg.ModelDir, mc.ModelType)
	}
	m, err := bert.LoadModel(cfg.ModelDir, cross, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	m.Threads = cfg.Threads
	if cfg.LoRA != nil {
		if cfg.LoRA.Alpha <= 0 {
			cfg.LoRA.Alpha = float64(2 * cfg.LoRA.Rank)
		}
		if err := m.EnableLoRA(bert.LoRAConfig{Rank: cfg.LoRA.Rank, Alpha: cfg.LoRA.Alpha, Targets: cfg.LoRA.Targets}, cfg.Seed); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	return &source{bert: m, tokPath: filepath.Join(cfg.ModelDir, "tokenizer.json"), dir: cfg.ModelDir}, nil
}

// writeGGUFSource writes a GGUF file's tokenizer (EOS appended) and config
// into dir.
func writeGGUFSource(path, dir string, cfg *model.Config) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	tok, err := f.TokenizerJSON(gguf.TokenizerOptions{AppendEOS: true})
	if err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	}
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}
