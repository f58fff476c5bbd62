package causal2vec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/model"
)

// Name is the technique's name (train.Config.Technique, annactl train
// --technique).
const Name = "causal2vec"

// Method is Causal2Vec as a training run's technique: the run's decoder
// (under LoRA when the run asks) with the MLP, fed the context encoder's
// vectors — a frozen encoder's (Encode) or one trained with the decoder
// (Train). Save writes the MLP and the pairing to OUT/causal2vec; the
// export is an anna model whose graph takes the paired encoder's vector
// and outputs [h_C; h_EOS].
type Method struct {
	// Encode embeds texts with the frozen small encoder (e.g. anna's ORT
	// encoder of all-MiniLM-L6-v2), Dim floats per text.
	Encode func(texts []string) ([][]float32, error)
	Dim    int
	// EncoderName names the encoder (recorded in causal2vec.json and the
	// export). EncoderPath and EncoderFingerprint locate and pin it (an
	// anna model directory) for the export's pairing: the encoder serving
	// the exported model loads it and checks it.
	EncoderName, EncoderPath, EncoderFingerprint string
	// Train, when set, trains the context encoder with the decoder (it
	// replaces Encode; EncoderName still names it).
	Train *ContextTrain
}

var _ decoder.Method = Method{}

// Name is "causal2vec".
func (Method) Name() string { return Name }

// CopiesDecoder is false: Causal2Vec trains the run's decoder itself.
func (Method) CopiesDecoder() bool { return false }

// New wraps the run's decoder. C goes after the tokens a text shares with
// its instruction alone (the BOS, if any, and for a query its
// instruction), and the encoder sees a query without the decoder's
// instruction. It refuses a pooling head (the embedding is [h_C; h_EOS])
// and, unless the run does not export or trains the encoder, a frozen
// encoder the export could not pair (no name or fingerprint).
func (mt Method) New(m *decoder.Model, s decoder.Setup) (decoder.Technique, error) {
	switch {
	case s.Pooling == decoder.PoolLatent || s.Pooling == decoder.PoolMultiLayer:
		return nil, errors.New("causal2vec: the technique embeds as [h_C; h_EOS]: no pooling head")
	case !s.NoExport && mt.Train == nil && (mt.EncoderName == "" || mt.EncoderFingerprint == ""):
		return nil, errors.New("causal2vec: the export pairs the decoder with its context encoder, so it needs the encoder's name and fingerprint (or train with NoExport: OUT/causal2vec holds the MLP and the pairing)")
	case mt.Train == nil && (mt.Encode == nil || mt.Dim <= 0):
		return nil, errors.New("causal2vec: the technique needs a context encoder (the small bidirectional model, e.g. all-MiniLM-L6-v2) and its dimension")
	}
	tok := s.Tokenizer
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
	for _, p := range s.Prompts {
		if _, ok := prefixes[p]; !ok {
			prefixes[p] = prefixIDs(p)
		}
	}
	insert := func(text string, ids []int32, query bool) (int, error) {
		pre := prefixes[""]
		if p := s.Prompts[text]; query && p != "" {
			pre = prefixes[p]
		}
		n := 0
		for n < len(pre) && n < len(ids)-1 && pre[n] == ids[n] {
			n++
		}
		return n, nil
	}
	encText := func(text string, query bool) string {
		if p := s.Prompts[text]; query && p != "" {
			return text[len(p):] // the encoder sees the query without the decoder's instruction
		}
		return text
	}
	r := &run{method: mt}
	var enc Encoder
	if mt.Train != nil {
		ce, err := NewContextEncoder(*mt.Train, s.Threads, s.Seed)
		if err != nil {
			return nil, err
		}
		enc, r.context, r.method.Dim = ce, ce, ce.Dim()
	} else {
		embed, dim := mt.Encode, mt.Dim
		enc = Frozen(func(texts []string) ([]float32, int, error) {
			vecs, err := embed(texts)
			if err != nil {
				return nil, 0, err
			}
			if len(vecs) != len(texts) {
				return nil, 0, fmt.Errorf("causal2vec: context encoder gave %d vectors for %d texts", len(vecs), len(texts))
			}
			return slices.Concat(vecs...), dim, nil
		})
	}
	t, err := New(m, enc, Config{EncoderModel: mt.EncoderName, EncoderDim: r.method.Dim,
		DecoderModel: filepath.Base(s.ModelDir), Seed: s.Seed, Insert: insert, EncoderText: encText})
	if err != nil {
		r.Close()
		return nil, err
	}
	r.Technique = t
	return r, nil
}

// run is a Technique in a training run: what it saves and exports, and
// the trained context encoder it closes.
type run struct {
	*Technique
	method  Method
	context *ContextEncoder // the trained context encoder (Method.Train), or nil
}

// SaveDir is where a run saves the MLP and the pairing, under its output
// directory.
const SaveDir = "causal2vec"

func (r *run) Model() *decoder.Model { return r.Technique.Model }

func (r *run) UseRunners(up func(*decoder.Model) (decoder.Runner, error)) error {
	runner, err := up(r.Technique.Model)
	if err != nil {
		return err
	}
	r.Runner = runner
	return nil
}

// Save writes the MLP and the pairing (Technique.Save) to outDir/causal2vec.
func (r *run) Save(outDir string) (string, error) {
	dir := filepath.Join(outDir, SaveDir)
	return dir, r.Technique.Save(dir)
}

// Export writes the trained context encoder first, when there is one (the
// decoder is paired with it, by its path and new fingerprint), then the
// decoder (LoRA merged) and the MLP ("causal2vec.mlp.…") in one
// checkpoint, config.json's anna_causal2vec describing the MLP, and an
// anna model whose graph takes the paired encoder's vector (s.Context)
// and outputs [h_C; h_EOS]; the encoder serving it loads the pair.
func (r *run) Export(ctx context.Context, srcDir, outDir string, s export.Settings) (string, string, error) {
	ctx = safe.Ctx(ctx)
	mt := r.method
	s.Context = &model.ContextModel{Name: mt.EncoderName, Path: mt.EncoderPath, Fingerprint: mt.EncoderFingerprint, Dim: mt.Dim}
	if r.context != nil {
		pair, err := r.context.export(ctx, outDir, mt.EncoderName)
		if err != nil {
			return "", "", err
		}
		s.Context = pair
	}
	s.Pooling = model.PoolingCausal2Vec
	extra := map[string]*safetensors.Tensor{}
	for _, p := range r.MLPParams() {
		extra[p.Name] = &safetensors.Tensor{Name: p.Name, DType: "F32", Shape: slices.Clone(p.Shape), Data: slices.Clone(p.W)}
	}
	fields := map[string]any{"anna_causal2vec": model.Causal2Vec{ContextDim: r.Cfg.EncoderDim, Bias: r.Cfg.Bias}}
	hf, dir, err := r.Technique.Model.Export(ctx, srcDir, outDir, s, fields, extra)
	if err != nil {
		return "", "", fmt.Errorf("causal2vec: %w", err)
	}
	return hf, dir, nil
}

// Close closes the trained context encoder's tokenizer.
func (r *run) Close() error {
	if r.context != nil {
		r.context.Close()
	}
	return nil
}
