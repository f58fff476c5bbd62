package train

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/tokenizer"
	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/objective"
	"github.com/anna-search/anna/train/technique/anchor"
	"github.com/anna-search/anna/train/technique/autoregembed"
	"github.com/anna-search/anna/train/technique/causal2vec"
)

// Techniques (Config.Technique): the papers' training methods on decoders,
// each a decoder.Technique run by the same loop (schedule, accumulation,
// clipping, checkpoints, resume) as the plain contrastive step.
const (
	// TechniqueCausal2Vec is paper 004: a frozen small encoder's vector
	// through a trainable MLP into a contextual token after the
	// instruction; the embedding is [h_C; h_EOS] (ContextEncoder).
	TechniqueCausal2Vec = "causal2vec"
	// TechniqueAnchor is paper 000's stage I (EBQ2D + EBD2Q reconstruction
	// from the EOS embedding, AnchorAlpha); stage II is a plain contrastive
	// run from its export.
	TechniqueAnchor = "anchor"
	// TechniqueAutoRegCompress and TechniqueAutoRegAlign are paper 001's
	// two stages: information compression (each query and its instruction
	// into k memory tokens from which a frozen copy of the decoder must
	// generate the positive), then conditional distribution alignment
	// (AutoRegStage1: the first stage's output directory).
	TechniqueAutoRegCompress = "autoregembed-compress"
	TechniqueAutoRegAlign    = "autoregembed-align"
)

// AutoRegEmbed's instructions for retrieval (paper 001, Table 5): I_next
// makes a query's memory tokens predict its document, I_self makes a
// document's predict itself.
const (
	autoRegNext = `Use one word to represent the query in a retrieval task. The word is: "`
	autoRegSelf = `Use one word to represent the passage in a retrieval task. The word is: "`
)

// autoRegDir is where an AutoRegEmbed run leaves its encoder (E, LoRA
// merged: encoder.safetensors) and memory tokens (memory.safetensors),
// under OutDir.
const autoRegDir = "autoregembed"

// techniqueNet trains a decoder.Technique.
type techniqueNet struct {
	t decoder.Technique
	d *decoder.Model
	// parts returns the last step's loss terms, where the technique has
	// an InfoNCE + distillation loss.
	parts func() objective.Parts
	// context is a Causal2Vec run's trained context encoder
	// (Config.ContextTrain), nil when it is frozen.
	context *contextEncoder
}

func (n techniqueNet) params() []*Param { return n.t.Params() }
func (n techniqueNet) zeroGrad()        { n.t.ZeroGrad() }
func (n techniqueNet) positions() int   { return n.d.Cfg.MaxPositionEmbeddings }

func techniqueStep(b *Batch, Q, G int, teacher []float32) *decoder.Step {
	return &decoder.Step{Q: Q, G: G, Texts: b.Texts, Batch: decoderBatch(b), Teacher: teacher}
}

func (n techniqueNet) contrastiveGrad(b *Batch, Q, G int, _ string, teacher []float32, cc ContrastiveConfig, scale float32) (float64, objective.Parts, error) {
	l, err := n.t.Grad(techniqueStep(b, Q, G, teacher), cc, scale)
	var p objective.Parts
	if n.parts != nil {
		p = n.parts()
	}
	return l, p, err
}

func (n techniqueNet) evalContrastive(b *Batch, Q, G int, _ string, teacher []float32, cc ContrastiveConfig) (float64, int, error) {
	return n.t.Eval(techniqueStep(b, Q, G, teacher), cc)
}

// newTechnique wraps the loaded decoder in cfg.Technique. prompts maps each
// training query text (instruction + query) to its instruction.
func newTechnique(cfg *Config, d *decoder.Model, tok *tokenizer.Tokenizer, prompts map[string]string) (techniqueNet, error) {
	if isAutoReg(cfg.Technique) {
		return newAutoReg(cfg, d, tok)
	}
	switch cfg.Technique {
	case TechniqueAnchor:
		if cfg.DistillWeight > 0 {
			return techniqueNet{}, fmt.Errorf("train: technique %s: stage I reconstructs texts and has no distillation term (drop the distillation weight)", cfg.Technique)
		}
		alpha := cfg.AnchorAlpha
		switch {
		case alpha == 0:
			alpha = anchor.DefaultAlpha
		case alpha < 0:
			alpha = 0 // the paper's OnlyD2Q
		}
		t, err := anchor.New(d, alpha)
		if err != nil {
			return techniqueNet{}, fmt.Errorf("train: %w", err)
		}
		return techniqueNet{t: t, d: d}, nil
	case TechniqueCausal2Vec:
		if cfg.ContextTrain == nil && (cfg.ContextEncoder == nil || cfg.ContextEncoderDim <= 0) {
			return techniqueNet{}, fmt.Errorf("train: technique %s needs a context encoder (the small bidirectional model, e.g. all-MiniLM-L6-v2) and its dimension", cfg.Technique)
		}
		// C goes after the tokens a text shares with its instruction alone
		// (the BOS, if any, and the instruction: tokenised alone and in
		// context they can differ at the seam, so the common prefix).
		prefixIDs := func(prompt string) []int32 {
			e := tok.Encode(prompt, 0)
			ids := make([]int32, 0, len(e.IDs))
			for _, id := range e.IDs {
				ids = append(ids, int32(id))
			}
			if len(ids) > 0 { // the EOS the tokenizer appends
				ids = ids[:len(ids)-1]
			}
			return ids
		}
		// Each distinct instruction tokenised once, not at every step.
		prefixes := map[string][]int32{"": prefixIDs("")}
		for _, p := range prompts {
			if _, ok := prefixes[p]; !ok {
				prefixes[p] = prefixIDs(p)
			}
		}
		insert := func(text string, ids []int32, query bool) (int, error) {
			pre := prefixes[""]
			if p := prompts[text]; query && p != "" {
				pre = prefixes[p]
			}
			n := 0
			for n < len(pre) && n < len(ids)-1 && pre[n] == ids[n] {
				n++
			}
			return n, nil
		}
		encText := func(text string, query bool) string {
			if p := prompts[text]; query && p != "" {
				return text[len(p):] // the encoder sees the query without the decoder's instruction
			}
			return text
		}
		var enc causal2vec.Encoder
		var trained *contextEncoder
		if cfg.ContextTrain != nil {
			ce, err := newContextEncoder(*cfg.ContextTrain, cfg.Threads, cfg.Seed)
			if err != nil {
				return techniqueNet{}, err
			}
			enc, trained, cfg.ContextEncoderDim = ce, ce, ce.Dim()
		} else {
			embed := cfg.ContextEncoder
			enc = causal2vec.Frozen(func(texts []string) ([]float32, int, error) {
				vecs, err := embed(texts)
				if err != nil {
					return nil, 0, err
				}
				if len(vecs) != len(texts) {
					return nil, 0, fmt.Errorf("train: context encoder gave %d vectors for %d texts", len(vecs), len(texts))
				}
				return slices.Concat(vecs...), cfg.ContextEncoderDim, nil
			})
		}
		t, err := causal2vec.New(d, enc, causal2vec.Config{EncoderModel: cfg.ContextEncoderName, EncoderDim: cfg.ContextEncoderDim,
			DecoderModel: filepath.Base(cfg.ModelDir), Seed: cfg.Seed, Insert: insert, EncoderText: encText})
		if err != nil {
			if trained != nil {
				trained.Close()
			}
			return techniqueNet{}, fmt.Errorf("train: %w", err)
		}
		return techniqueNet{t: t, d: d, parts: t.LossParts, context: trained}, nil
	}
	return techniqueNet{}, fmt.Errorf("train: technique %q (want %s)", cfg.Technique, strings.Join(Techniques(), ", "))
}

// Techniques are the Config.Technique values.
func Techniques() []string {
	return []string{TechniqueCausal2Vec, TechniqueAnchor, TechniqueAutoRegCompress, TechniqueAutoRegAlign}
}

func isAutoReg(t string) bool { return t == TechniqueAutoRegCompress || t == TechniqueAutoRegAlign }

// newAutoReg builds AutoRegEmbed's stage over base, the decoder cfg.ModelDir
// loaded without LoRA (the technique adds its own to E).
func newAutoReg(cfg *Config, base *decoder.Model, tok *tokenizer.Tokenizer) (techniqueNet, error) {
	ids := func(s string) []int32 {
		var out []int32
		for _, id := range tok.IDs(s) {
			out = append(out, int32(id))
		}
		return out
	}
	special := tok.Encode("", 0).IDs // [BOS] EOS: what the tokenizer adds
	if len(special) == 0 {
		return techniqueNet{}, fmt.Errorf("train: technique %s: the tokenizer appends no EOS (the decoder embedder's contract)", cfg.Technique)
	}
	ac := autoregembed.Config{Stage: autoregembed.Compression, EOS: int32(special[len(special)-1]), Threads: cfg.Threads, Seed: cfg.Seed,
		QueryInstruction: ids("\n" + autoRegNext + "\n"), DocInstruction: ids("\n" + autoRegSelf + "\n")}
	for _, id := range special[:len(special)-1] {
		ac.Prefix = append(ac.Prefix, int32(id))
	}
	if cfg.LoRA != nil {
		ac.LoRA = &decoder.LoRAConfig{Rank: cfg.LoRA.Rank, Alpha: cfg.LoRA.Alpha, Targets: cfg.LoRA.Targets}
	}
	baseTensors := base.Tensors()
	enc := baseTensors
	if cfg.Technique == TechniqueAutoRegAlign {
		if cfg.AutoRegStage1 == "" {
			return techniqueNet{}, fmt.Errorf("train: technique %s needs the compression stage's output directory (AutoRegStage1)", cfg.Technique)
		}
		dir := filepath.Join(cfg.AutoRegStage1, autoRegDir)
		var err error
		if enc, err = safetensors.ReadFile(filepath.Join(dir, "encoder.safetensors")); err != nil {
			return techniqueNet{}, fmt.Errorf("train: the compression stage's encoder: %w", err)
		}
		mem, err := safetensors.ReadFile(filepath.Join(dir, "memory.safetensors"))
		if err != nil {
			return techniqueNet{}, fmt.Errorf("train: the compression stage's memory tokens: %w", err)
		}
		t, ok := mem[autoregembed.MemoryName]
		if !ok || len(t.Shape) != 2 {
			return techniqueNet{}, fmt.Errorf("train: %s: no k×C tensor %s", filepath.Join(dir, "memory.safetensors"), autoregembed.MemoryName)
		}
		ac.Stage, ac.Memory, ac.MemoryTokens = autoregembed.Alignment, t.Data, t.Shape[0]
	}
	t, err := autoregembed.New(&base.Cfg, enc, baseTensors, ac)
	if err != nil {
		return techniqueNet{}, fmt.Errorf("train: %w", err)
	}
	t.Encoder().Recompute = cfg.Recompute
	return techniqueNet{t: t, d: t.Encoder()}, nil
}

// saveAutoReg writes the trained encoder (LoRA merged) and memory tokens
// into outDir/autoregembed, for the alignment stage (or inference).
func saveAutoReg(t *autoregembed.Technique, outDir string) (string, error) {
	dir := filepath.Join(outDir, autoRegDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "encoder.safetensors"), t.Encoder().Tensors(), nil); err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	m := t.Memory()
	mem := map[string]*safetensors.Tensor{m.Name: {Name: m.Name, DType: "F32", Shape: slices.Clone(m.Shape), Data: slices.Clone(m.W)}}
	if err := safetensors.WriteFile(filepath.Join(dir, "memory.safetensors"), mem, nil); err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	return dir, nil
}
