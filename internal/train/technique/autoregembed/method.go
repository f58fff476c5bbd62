package autoregembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/model"
)

// The stages' names (train.Config.Technique, annactl train --technique).
const (
	NameCompress = "autoregembed-compress"
	NameAlign    = "autoregembed-align"
)

// AutoRegEmbed's instructions for retrieval (paper 001, Table 5): I_next
// makes a query's memory tokens predict its document, I_self makes a
// document's predict itself.
const (
	NextInstruction = `Use one word to represent the query in a retrieval task. The word is: "`
	SelfInstruction = `Use one word to represent the passage in a retrieval task. The word is: "`
)

// SaveDir is where a run leaves its encoder (E, LoRA merged:
// encoder.safetensors) and memory tokens (memory.safetensors), under its
// output directory: what the alignment stage starts from.
const SaveDir = "autoregembed"

// Method is one of AutoRegEmbed's stages as a training run's technique:
// the technique builds its encoder E (under the run's LoRA), frozen
// decoder D and, in stage 2, reference encoder from the run's decoder's
// weights; Save writes E and the memory tokens to OUT/autoregembed, and
// the export is E as a memory-token embedder.
type Method struct {
	Stage Stage
	// Stage1 is, for Alignment, the output directory of the Compression
	// run it continues.
	Stage1 string
}

var _ decoder.Method = Method{}

// Name is NameCompress or NameAlign.
func (mt Method) Name() string {
	switch mt.Stage {
	case Compression:
		return NameCompress
	case Alignment:
		return NameAlign
	}
	return "autoregembed-" + mt.Stage.String()
}

// CopiesDecoder is true: the technique's models are its own, built from
// the decoder's weights.
func (Method) CopiesDecoder() bool { return true }

// New builds the stage over base, the run's decoder loaded without LoRA
// (s.LoRA goes to E). The instructions are NextInstruction and
// SelfInstruction; the prefix is what the tokenizer puts before a text
// (the BOS, if any) and EOS what it appends. It refuses bidirectional
// attention and a pooling head (the technique generates through a causal
// decoder and pools its memory tokens).
func (mt Method) New(base *decoder.Model, s decoder.Setup) (decoder.Technique, error) {
	if s.Bidirectional || s.Pooling == decoder.PoolLatent || s.Pooling == decoder.PoolMultiLayer {
		return nil, errors.New("autoregembed: the technique generates through a causal decoder and pools its memory tokens: no bidirectional attention or pooling head")
	}
	tok := s.Tokenizer
	ids := func(text string) []int32 {
		var out []int32
		for _, id := range tok.IDs(text) {
			out = append(out, int32(id))
		}
		return out
	}
	special := tok.Encode("", 0).IDs // [BOS] EOS: what the tokenizer adds
	if len(special) == 0 {
		return nil, errors.New("autoregembed: the tokenizer appends no EOS (the decoder embedder's contract)")
	}
	ac := Config{Stage: Compression, EOS: int32(special[len(special)-1]), Threads: s.Threads, Seed: s.Seed,
		QueryInstruction: ids("\n" + NextInstruction + "\n"), DocInstruction: ids("\n" + SelfInstruction + "\n")}
	for _, id := range special[:len(special)-1] {
		ac.Prefix = append(ac.Prefix, int32(id))
	}
	if s.LoRA != nil {
		lc := *s.LoRA
		ac.LoRA = &lc
	}
	baseTensors := base.Tensors()
	enc := baseTensors
	if mt.Stage == Alignment {
		if mt.Stage1 == "" {
			return nil, errors.New("autoregembed: the alignment stage needs the compression stage's output directory (Method.Stage1)")
		}
		dir := filepath.Join(mt.Stage1, SaveDir)
		var err error
		if enc, err = safetensors.ReadFile(filepath.Join(dir, "encoder.safetensors")); err != nil {
			return nil, fmt.Errorf("autoregembed: the compression stage's encoder: %w", err)
		}
		mem, err := safetensors.ReadFile(filepath.Join(dir, "memory.safetensors"))
		if err != nil {
			return nil, fmt.Errorf("autoregembed: the compression stage's memory tokens: %w", err)
		}
		t, ok := mem[MemoryName]
		if !ok || len(t.Shape) != 2 {
			return nil, fmt.Errorf("autoregembed: %s: no k×C tensor %s", filepath.Join(dir, "memory.safetensors"), MemoryName)
		}
		ac.Stage, ac.Memory, ac.MemoryTokens = Alignment, t.Data, t.Shape[0]
	} else if mt.Stage != Compression {
		ac.Stage = mt.Stage // New refuses it
	}
	t, err := New(&base.Cfg, enc, baseTensors, ac)
	if err != nil {
		return nil, err
	}
	t.Encoder().Recompute = s.Recompute
	return run{t}, nil
}

// run is a Technique in a training run: what it saves and exports.
type run struct{ *Technique }

// Model is E, the encoder it trains.
func (r run) Model() *decoder.Model { return r.enc }

// UseRunners runs E's, D's and (stage 2) the reference encoder's passes
// through up's Runners; the reference attends as E does.
func (r run) UseRunners(up func(*decoder.Model) (decoder.Runner, error)) error {
	var err error
	if r.Run.Enc, err = up(r.enc); err != nil {
		return err
	}
	if r.Run.Dec, err = up(r.dec); err != nil {
		return err
	}
	if r.ref != nil {
		r.ref.Causal = r.enc.Causal
		r.Run.Ref, err = up(r.ref)
	}
	return err
}

// Save writes the trained encoder (LoRA merged) and memory tokens into
// outDir/autoregembed, for the alignment stage (or inference).
func (r run) Save(outDir string) (string, error) {
	dir := filepath.Join(outDir, SaveDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("autoregembed: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "encoder.safetensors"), r.enc.Tensors(), nil); err != nil {
		return "", fmt.Errorf("autoregembed: %w", err)
	}
	m := r.mem
	mem := map[string]*safetensors.Tensor{m.Name: {Name: m.Name, DType: "F32", Shape: slices.Clone(m.Shape), Data: slices.Clone(m.W)}}
	if err := safetensors.WriteFile(filepath.Join(dir, "memory.safetensors"), mem, nil); err != nil {
		return "", fmt.Errorf("autoregembed: %w", err)
	}
	return dir, nil
}

// Export writes E (LoRA merged) and its memory tokens
// ("autoregembed.memory") in one checkpoint, config.json's
// anna_memory_tokens giving their number, and an anna model whose graph
// appends them to each text and instruction and outputs the mean of their
// last hidden states.
func (r run) Export(ctx context.Context, srcDir, outDir string, s export.Settings) (string, string, error) {
	ctx = safe.Ctx(ctx)
	m := r.mem
	s.Pooling = model.PoolingMemory
	s.Memory = &model.MemoryTokens{Count: m.Shape[0], QueryInstruction: "\n" + NextInstruction + "\n", DocumentInstruction: "\n" + SelfInstruction + "\n"}
	fields := map[string]any{"anna_attention": model.AttentionCausal, "anna_memory_tokens": m.Shape[0]}
	extra := map[string]*safetensors.Tensor{onnx.MemoryTensor: {Name: onnx.MemoryTensor, DType: "F32", Shape: slices.Clone(m.Shape), Data: slices.Clone(m.W)}}
	hf, dir, err := r.enc.Export(ctx, srcDir, outDir, s, fields, extra)
	if err != nil {
		return "", "", fmt.Errorf("autoregembed: %w", err)
	}
	return hf, dir, nil
}

// Close releases nothing.
func (run) Close() error { return nil }
