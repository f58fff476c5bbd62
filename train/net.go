package train

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/gguf"
	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/objective"
)

// Trainable pooling heads (decoders).
const (
	PoolLatent     = decoder.PoolLatent
	PoolMultiLayer = decoder.PoolMultiLayer
)

// isHead reports whether pooling is a decoder's trainable head.
func isHead(pooling string) bool { return pooling == PoolLatent || pooling == PoolMultiLayer }

// net is what Run trains as a bi-encoder: a BERT Model or a decoder.
type net interface {
	params() []*Param
	zeroGrad()
	contrastiveGrad(b *Batch, Q, G int, pooling string, teacher []float32, cc ContrastiveConfig, scale float32) (float64, objective.Parts, error)
	evalContrastive(b *Batch, Q, G int, pooling string, teacher []float32, cc ContrastiveConfig) (loss float64, correct int, err error)
	positions() int
}

func (m *Model) params() []*Param { return m.Params }
func (m *Model) zeroGrad()        { m.ZeroGrad() }
func (m *Model) positions() int   { return m.Cfg.MaxPositionEmbeddings }

func (m *Model) contrastiveGrad(b *Batch, Q, G int, pooling string, teacher []float32, cc ContrastiveConfig, scale float32) (float64, objective.Parts, error) {
	l, err := m.ContrastiveGrad(b, Q, G, pooling, teacher, cc, scale)
	return l, m.lastParts, err
}

func (m *Model) evalContrastive(b *Batch, Q, G int, pooling string, teacher []float32, cc ContrastiveConfig) (float64, int, error) {
	l, err := m.EvalContrastive(b, Q, G, pooling, teacher, cc)
	return l, m.lastCorrect, err
}

// crossNet is what Run trains as a cross-encoder: a BERT Model with its
// head, or a deviceNet over one.
type crossNet interface {
	crossGrad(b *Batch, obj string, labels, teacher []float32, cc CrossConfig, Q, G int, scale float32) (float64, objective.Parts, error)
	evalCross(b *Batch, obj string, labels, teacher []float32, cc CrossConfig, Q, G int) (loss float64, correct int, err error)
}

func (m *Model) crossGrad(b *Batch, obj string, labels, teacher []float32, cc CrossConfig, Q, G int, scale float32) (float64, objective.Parts, error) {
	l, err := m.CrossEncoderGrad(b, obj, labels, teacher, cc, Q, G, scale)
	return l, m.lastParts, err
}

func (m *Model) evalCross(b *Batch, obj string, labels, teacher []float32, cc CrossConfig, Q, G int) (float64, int, error) {
	l, err := m.EvalCrossEncoder(b, obj, labels, teacher, cc, Q, G)
	return l, m.lastCorrect, err
}

// decoderNet trains a decoder.Model (token types are ignored).
type decoderNet struct{ m *decoder.Model }

func (d decoderNet) params() []*Param { return d.m.Params }
func (d decoderNet) zeroGrad()        { d.m.ZeroGrad() }
func (d decoderNet) positions() int   { return d.m.Cfg.MaxPositionEmbeddings }

func decoderBatch(b *Batch) *decoder.Batch {
	return &decoder.Batch{N: b.N, T: b.T, IDs: b.IDs, Mask: b.Mask}
}

func (d decoderNet) contrastiveGrad(b *Batch, Q, G int, pooling string, teacher []float32, cc ContrastiveConfig, scale float32) (float64, objective.Parts, error) {
	l, err := d.m.ContrastiveGrad(decoderBatch(b), Q, G, pooling, teacher, cc, scale)
	return l, d.m.LossParts(), err
}

func (d decoderNet) evalContrastive(b *Batch, Q, G int, pooling string, teacher []float32, cc ContrastiveConfig) (float64, int, error) {
	return d.m.EvalContrastive(decoderBatch(b), Q, G, pooling, teacher, cc)
}

// source is what Run loaded: the network, the tokenizer file it trains
// with, and the directory whose config and side files the export copies.
type source struct {
	net  net
	bert *Model         // nil for decoders
	dec  *decoder.Model // nil for BERT
	// technique is the decoder.Technique trained instead of the plain
	// contrastive step (Config.Technique), or nil.
	technique decoder.Technique
	tokPath   string
	dir       string
}

// loadSource loads cfg.ModelDir: a BERT or decoder Hugging Face checkpoint
// directory, or a llama GGUF file (its tokenizer, with EOS appended as the
// GGUF import builds it, and its config are written to OutDir/source for
// the export). It settles the LoRA alpha by architecture (defaults settled
// the pooling) and refuses what the architecture cannot do.
func loadSource(cfg *Config, cross bool) (*source, error) {
	if cfg.ContextTrain != nil && cfg.Technique != TechniqueCausal2Vec {
		return nil, fmt.Errorf("train: a trained context encoder (ContextTrain) is technique %s's; this run's technique is %q", TechniqueCausal2Vec, cfg.Technique)
	}
	isGGUF := strings.HasSuffix(strings.ToLower(cfg.ModelDir), ".gguf")
	var mc *model.Config
	if !isGGUF {
		c, err := model.LoadConfig(cfg.ModelDir)
		if err != nil {
			return nil, fmt.Errorf("train: %s is not a usable checkpoint: %w", cfg.ModelDir, err)
		}
		mc = c
	}
	if !isGGUF && !mc.IsDecoder() {
		if cfg.Bidirectional || cfg.Recompute || isHead(cfg.Pooling) || cfg.Technique != "" {
			return nil, fmt.Errorf("train: bidirectional attention, recomputation, trainable pooling heads and techniques are decoder options; %s is a %s encoder", cfg.ModelDir, mc.ModelType)
		}
		if cfg.LoRA != nil {
			cfg.LoRA.bertDefaults()
		}
		m, err := LoadModel(cfg.ModelDir, cross, cfg.Seed)
		if err != nil {
			return nil, err
		}
		m.Threads = cfg.Threads
		if cfg.LoRA != nil {
			if err := m.EnableLoRA(*cfg.LoRA, cfg.Seed); err != nil {
				return nil, err
			}
		}
		return &source{net: m, bert: m, tokPath: filepath.Join(cfg.ModelDir, "tokenizer.json"), dir: cfg.ModelDir}, nil
	}

	if cross {
		return nil, fmt.Errorf("train: objective %q: decoders train as bi-encoders only (contrastive)", cfg.Objective)
	}
	switch cfg.Technique {
	case "":
	case TechniqueCausal2Vec:
		if !cfg.NoExport && cfg.ContextTrain == nil && (cfg.ContextEncoderName == "" || cfg.ContextEncoderFingerprint == "") {
			return nil, fmt.Errorf("train: technique %s: the export pairs the decoder with its context encoder, so it needs the encoder's name and fingerprint (or train with NoExport: OUT/causal2vec holds the MLP and the pairing)", cfg.Technique)
		}
		if isHead(cfg.Pooling) {
			return nil, fmt.Errorf("train: technique %s embeds as [h_C; h_EOS]: no pooling head", cfg.Technique)
		}
	case TechniqueAutoRegCompress, TechniqueAutoRegAlign:
		if cfg.Bidirectional || isHead(cfg.Pooling) {
			return nil, fmt.Errorf("train: technique %s generates through a causal decoder and pools its memory tokens: no bidirectional attention or pooling head", cfg.Technique)
		}
	case TechniqueAnchor:
	default:
		return nil, fmt.Errorf("train: technique %q (want %s)", cfg.Technique, strings.Join(Techniques(), ", "))
	}
	headPool := isHead(cfg.Pooling)
	if cfg.Pooling != PoolLast && cfg.Pooling != PoolMean && !headPool {
		return nil, fmt.Errorf("train: pooling %q: decoders pool the last token (EOS), the mean, or with a trainable head (latent, multilayer)", cfg.Pooling)
	}
	if _, err := os.Stat(cfg.ModelDir); isGGUF && err != nil {
		// An anna model's manifest may name a catalogue download, not a file.
		return nil, fmt.Errorf("train: the GGUF file %q is not on this machine (pass --model FILE.gguf, e.g. the file the catalogue's download holds): %w", cfg.ModelDir, err)
	}
	// Under LoRA the base does not train: its projections stay in the
	// file's stored type (bit for bit the same products; a fifth of the
	// memory for Q4 GGUF files, half for float16 or bfloat16 checkpoints).
	// AutoRegEmbed copies the base into its own models.
	d, err := decoder.Load(cfg.ModelDir, decoder.LoadOptions{KeepBase: cfg.LoRA != nil && !isAutoReg(cfg.Technique)})
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
	if cfg.LoRA != nil && isAutoReg(cfg.Technique) {
		if cfg.LoRA.Alpha <= 0 { // the technique enables LoRA on its own encoder
			cfg.LoRA.Alpha = float64(cfg.LoRA.Rank) / 2
		}
	} else if cfg.LoRA != nil {
		lc := decoder.LoRAConfig{Rank: cfg.LoRA.Rank, Alpha: cfg.LoRA.Alpha, Targets: cfg.LoRA.Targets}
		if lc.Alpha <= 0 {
			lc.Alpha = float64(lc.Rank) / 2 // paper 003: rank 64, alpha 32
			cfg.LoRA.Alpha = lc.Alpha
		}
		if err := d.EnableLoRA(lc, cfg.Seed); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	s := &source{net: decoderNet{d}, dec: d, tokPath: filepath.Join(cfg.ModelDir, "tokenizer.json"), dir: cfg.ModelDir}
	if isGGUF {
		s.dir = filepath.Join(cfg.OutDir, "source")
		s.tokPath = filepath.Join(s.dir, "tokenizer.json")
		if err := writeGGUFSource(cfg.ModelDir, s.dir, &d.Cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
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
