package onnx

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
)

// File names inside a converted model directory (package model's).
const (
	ModelFile     = model.ONNXFile
	TokenizerFile = model.TokenizerFile
	ConfigFile    = model.ConfigFile
)

// Settings choose how a converted model turns outputs into vectors. Zero
// values mean: take it from the sentence-transformers files, else the
// default noted on each field.
type Settings struct {
	Name      string // default: the destination directory's base name
	Task      string // model.TaskEmbed or model.TaskRerank (default: what config.json's architectures say, Import)
	Pooling   string // default mean
	MaxLength int    // default min(512, max_position_embeddings)
	// Normalize: nil means the sentence-transformers Normalize module
	// decides, and true when the checkpoint has no modules.json (anna's
	// stores assume cosine = dot product).
	Normalize           *bool
	QueryPrefix         string
	DocumentPrefix      string
	InstructionTemplate string // default model.DefaultInstructionTemplate
	Source              string
	// Quantize is "" (float32 weights) or model.QuantizeInt8, and
	// Unfused asks for the standard-operator graph (see BuildOptions);
	// the manifest records the quantization.
	Quantize string
	Unfused  bool
	// PairPrompt is a decoder reranker's prompt (task rerank); default
	// model.DefaultPairPrompt. BERT-family cross-encoders take none.
	PairPrompt *model.PairPrompt
	// Context is a Causal2Vec decoder's paired encoder (config.json's
	// anna_causal2vec); required for one, refused for others.
	Context *model.ContextModel
	// Memory is an AutoRegEmbed decoder's input layout (config.json's
	// anna_memory_tokens); required for one, refused for others.
	Memory *model.MemoryTokens
}

// Import converts a Hugging Face checkpoint directory (config.json, one or
// more *.safetensors, tokenizer.json, optional sentence-transformers files)
// into a model directory dest holding model.onnx, tokenizer.json,
// config.json and anna-model.json. Explicit settings override what the
// sentence-transformers files say. dest appears complete or not at all.
func Import(ctx context.Context, src, dest string, s Settings) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	cfgBytes, err := os.ReadFile(filepath.Join(src, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("import: reading config: %w", err)
	}
	cfg, err := model.ParseConfig(cfgBytes)
	if err != nil {
		return nil, fmt.Errorf("import: %s: %w", filepath.Join(src, ConfigFile), err)
	}
	st, err := model.ReadSentenceTransformers(src)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if s.Task == "" {
		s.Task = taskOf(cfg)
	}
	if s.Pooling == "" && (s.Task == "" || s.Task == model.TaskEmbed) {
		if st.PoolingErr != nil {
			return nil, fmt.Errorf("import: %w", st.PoolingErr)
		}
		s.Pooling = st.Pooling
	}
	if s.MaxLength == 0 {
		s.MaxLength = st.MaxLength
	}
	if s.Normalize == nil && st.HasModules {
		n := st.Normalize
		s.Normalize = &n
	}
	if s.QueryPrefix == "" {
		s.QueryPrefix = st.QueryPrefix
	}
	if s.DocumentPrefix == "" {
		s.DocumentPrefix = st.DocumentPrefix
	}
	if s.Source == "" {
		if abs, err := filepath.Abs(src); err == nil {
			s.Source = abs
		} else {
			s.Source = src
		}
	}
	tok := filepath.Join(src, TokenizerFile)
	if _, err := os.Stat(tok); err != nil {
		return nil, fmt.Errorf("import: %s needs a tokenizer.json (the Hugging Face fast tokenizer file): %w", src, err)
	}
	tensors, err := ReadCheckpoint(src)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return WriteDir(ctx, dest, cfg, cfgBytes, tensors, tok, s)
}

// ReadCheckpoint reads every *.safetensors file in dir (sharded checkpoints
// are merged) into one map.
func ReadCheckpoint(dir string) (map[string]*safetensors.Tensor, error) {
	ts, _, err := ReadCheckpointKeeping(dir, nil)
	return ts, err
}

// ReadCheckpointKeeping is ReadCheckpoint, except that the 2-D float16 and
// bfloat16 tensors keep says yes to come back in kept, as stored
// (safetensors.ReadFileKeeping), and not in tensors. keep nil keeps
// nothing.
func ReadCheckpointKeeping(dir string, keep func(name string) bool) (tensors map[string]*safetensors.Tensor, kept map[string]*safetensors.Half, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no *.safetensors file in %s (PyTorch .bin checkpoints are not read)", dir)
	}
	sort.Strings(files)
	all, allKept := map[string]*safetensors.Tensor{}, map[string]*safetensors.Half{}
	for _, f := range files {
		ts, ks, err := safetensors.ReadFileKeeping(f, keep)
		if err != nil {
			return nil, nil, err
		}
		for n := range ts {
			if err := noDuplicate(n, dir, all, allKept); err != nil {
				return nil, nil, err
			}
		}
		for n := range ks {
			if err := noDuplicate(n, dir, all, allKept); err != nil {
				return nil, nil, err
			}
		}
		maps.Copy(all, ts)
		maps.Copy(allKept, ks)
	}
	return all, allKept, nil
}

// noDuplicate refuses a tensor name an earlier file of dir already had,
// converted or kept (a file's own names are unique: its header is a map).
func noDuplicate(name, dir string, all map[string]*safetensors.Tensor, kept map[string]*safetensors.Half) error {
	_, a := all[name]
	_, k := kept[name]
	if a || k {
		return fmt.Errorf("tensor %q appears in more than one file of %s", name, dir)
	}
	return nil
}

// WriteDir exports tensors as dest/model.onnx and writes the rest of a model
// directory: config.json (cfgJSON as given, or cfg marshalled when nil), a
// copy of tokenizerPath, and the manifest. It writes into dest+".partial"
// and renames, replacing an existing dest, so readers never see half a
// model. The trainer calls this with fine-tuned weights held in memory.
func WriteDir(ctx context.Context, dest string, cfg *model.Config, cfgJSON []byte, tensors map[string]*safetensors.Tensor, tokenizerPath string, s Settings) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	return writeDir(ctx, dest, cfg, cfgJSON, tensors, nil, tokenizerPath, s)
}

// writeDir is WriteDir with a quantized source graph's int8 weights
// (BuildOptions.Int8), stored as they are in an int8 model.
func writeDir(ctx context.Context, dest string, cfg *model.Config, cfgJSON []byte, tensors map[string]*safetensors.Tensor, int8s map[string]*Int8Columns, tokenizerPath string, s Settings) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	m, err := manifestFor(dest, cfg, s)
	if err != nil {
		return nil, err
	}
	o := BuildOptions{Quantize: s.Quantize, Unfused: s.Unfused, Int8: int8s}
	if m.PairPrompt != nil {
		if o.LabelTokens, err = labelTokens(tokenizerPath, m.PairPrompt.Labels); err != nil {
			return nil, err
		}
	}
	g, err := BuildWith(cfg, tensors, m.Task, o)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tmp := dest + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("import: clearing %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()

	fp := model.NewFingerprinter()
	onnxSum, err := atomicfile.CreateSum(filepath.Join(tmp, ModelFile), func(w io.Writer) error {
		_, err := g.WriteTo(io.MultiWriter(w, fp))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if c := m.Context; c != nil { // a Causal2Vec model's vectors depend on its pair's
		fmt.Fprintf(fp, "\x00context=%s", c.Fingerprint)
	}
	m.Fingerprint = fp.Sum(m.Pooling, m.Normalize, m.MaxLength)
	m.Files = map[string]string{ModelFile: onnxSum}

	if cfgJSON == nil {
		if cfgJSON, err = json.MarshalIndent(cfg, "", "  "); err != nil {
			return nil, fmt.Errorf("import: encoding config: %w", err)
		}
	}
	if m.Files[ConfigFile], err = atomicfile.CreateSum(filepath.Join(tmp, ConfigFile), func(w io.Writer) error {
		_, err := w.Write(cfgJSON)
		return err
	}); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if m.Files[TokenizerFile], err = atomicfile.CopySum(tokenizerPath, filepath.Join(tmp, TokenizerFile)); err != nil {
		return nil, fmt.Errorf("import: tokenizer: %w", err)
	}
	if err := model.WriteManifest(tmp, m); err != nil {
		return nil, err
	}
	if err := atomicfile.ReplaceDir(tmp, dest); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	ok = true
	return m, nil
}

// taskOf is the task config.json's architectures name for an encoder: a
// BertForSequenceClassification (or RoBERTa's) checkpoint is a
// cross-encoder, model.TaskRerank; anything else embeds. A decoder's
// classification head is not anna's decoder reranker (the yes/no logits of
// its language-model head), so decoders embed unless told.
func taskOf(cfg *model.Config) string {
	if cfg.IsDecoder() {
		return model.TaskEmbed
	}
	for _, a := range cfg.Architectures {
		if strings.HasSuffix(a, "ForSequenceClassification") {
			return model.TaskRerank
		}
	}
	return model.TaskEmbed
}

func manifestFor(dest string, cfg *model.Config, s Settings) (*model.Manifest, error) {
	m := &model.Manifest{
		Name:                s.Name,
		Architecture:        cfg.ModelType,
		Task:                s.Task,
		Dim:                 cfg.HiddenSize,
		MaxLength:           s.MaxLength,
		Pooling:             s.Pooling,
		Normalize:           true,
		QueryPrefix:         s.QueryPrefix,
		DocumentPrefix:      s.DocumentPrefix,
		InstructionTemplate: s.InstructionTemplate,
		Source:              s.Source,
		Quantization:        s.Quantize,
	}
	if s.Quantize == model.QuantizeInt8 {
		m.Activations = model.ActivationsRow // every product's input per row (fuse.go, llama.go)
	}
	if m.Name == "" {
		m.Name = filepath.Base(filepath.Clean(dest))
	}
	if m.Task == "" {
		m.Task = model.TaskEmbed
	}
	if s.Normalize != nil {
		m.Normalize = *s.Normalize
	}
	if m.MaxLength == 0 {
		m.MaxLength = min(512, cfg.MaxPositionEmbeddings)
	}
	if m.MaxLength > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("import: max length %d exceeds the model's max_position_embeddings %d", m.MaxLength, cfg.MaxPositionEmbeddings)
	}
	switch m.Task {
	case model.TaskEmbed:
		if cv := cfg.Causal2Vec; cv != nil {
			if m.Pooling != "" && m.Pooling != model.PoolingCausal2Vec {
				return nil, fmt.Errorf("import: pooling %q: config.json's anna_causal2vec embeds as [h_C; h_EOS] (pooling causal2vec)", m.Pooling)
			}
			if s.Context == nil || s.Context.Dim != cv.ContextDim {
				return nil, fmt.Errorf("import: a Causal2Vec model needs its paired encoder of dimension %d (config.json anna_causal2vec.context_dim) named in the settings", cv.ContextDim)
			}
			m.Pooling, m.Context, m.Dim = model.PoolingCausal2Vec, s.Context, 2*cfg.HiddenSize
		} else if s.Context != nil {
			return nil, fmt.Errorf("import: a paired context encoder is for Causal2Vec models; config.json has no anna_causal2vec")
		}
		if k := cfg.MemoryTokens; k > 0 {
			if m.Pooling != "" && m.Pooling != model.PoolingMemory {
				return nil, fmt.Errorf("import: pooling %q: config.json's anna_memory_tokens embeds as the mean of its memory tokens (pooling memory)", m.Pooling)
			}
			if s.Memory == nil || s.Memory.Count != k {
				return nil, fmt.Errorf("import: an AutoRegEmbed model needs its input layout (%d memory tokens, config.json anna_memory_tokens, and the instructions) in the settings", k)
			}
			m.Pooling, m.Memory = model.PoolingMemory, s.Memory
		} else if s.Memory != nil {
			return nil, fmt.Errorf("import: a memory-token layout is for AutoRegEmbed models; config.json has no anna_memory_tokens")
		}
		if h := cfg.PoolingHead; h != nil {
			// The graph applies the head: its mode is the only pooling.
			if m.Pooling != "" && m.Pooling != h.Mode {
				return nil, fmt.Errorf("import: pooling %q: config.json's anna_pooling_head is a trained %s head, which the graph applies (want pooling %s or none)", m.Pooling, h.Mode, h.Mode)
			}
			m.Pooling = h.Mode
		} else if model.IsHeadPooling(m.Pooling) {
			return nil, fmt.Errorf("import: pooling %q needs a trained head: config.json has no anna_pooling_head", m.Pooling)
		}
		if m.Pooling == "" {
			m.Pooling = model.PoolingMean
		}
		if m.InstructionTemplate == "" {
			m.InstructionTemplate = model.DefaultInstructionTemplate
		}
	case model.TaskRerank:
		// A cross-encoder's logits are scores: no pooling, no normalising.
		m.Pooling, m.Normalize, m.InstructionTemplate = "", false, ""
		m.NumLabels = cfg.NumLabels()
		if cfg.IsDecoder() { // the yes/no logit form, through a prompt
			m.PairPrompt = s.PairPrompt
			if m.PairPrompt == nil {
				m.PairPrompt = model.DefaultPairPrompt(cfg.ModelType)
			}
			m.NumLabels = len(m.PairPrompt.Labels)
		} else if s.PairPrompt != nil {
			return nil, fmt.Errorf("import: a pair prompt is for decoder rerankers; %s cross-encoders read [CLS] query [SEP] document [SEP]", cfg.ModelType)
		}
	default:
		return nil, fmt.Errorf("import: task %q not supported (want embed or rerank)", m.Task)
	}
	// The fingerprint is filled after model.onnx is written; validate the
	// rest now with a placeholder so bad settings fail before the export.
	probe := *m
	probe.Fingerprint = hex.EncodeToString(make([]byte, 32))
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	return m, nil
}

// labelTokens looks a decoder reranker's labels up in its tokenizer: each
// must be exactly one token.
func labelTokens(tokenizerPath string, labels []string) ([]int64, error) {
	tok, err := tokenizer.Load(tokenizerPath)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer tok.Close()
	ids := make([]int64, len(labels))
	for i, l := range labels {
		t := tok.IDs(l)
		if len(t) != 1 {
			return nil, fmt.Errorf("import: pair_prompt.labels[%d] %q is %d tokens in %s, want exactly one", i, l, len(t), tokenizerPath)
		}
		ids[i] = t[0]
	}
	return ids, nil
}

// CopyFile copies the file src to dst, synced, and returns the hex sha256
// of what it wrote (internal/atomicfile.CopySum, for the trainer's export).
func CopyFile(src, dst string) (string, error) {
	sum, err := atomicfile.CopySum(src, dst)
	if err != nil {
		return "", fmt.Errorf("import: %w", err)
	}
	return sum, nil
}
