package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/atomicfile"
)

// ManifestFile is the manifest's name inside a model directory.
const ManifestFile = "anna-model.json"

// Pooling modes: how token vectors become one sentence vector.
const (
	PoolingMean      = "mean"      // mean over tokens whose attention mask is 1
	PoolingCLS       = "cls"       // the first token ([CLS])
	PoolingLastToken = "lasttoken" // the last unmasked token (decoder-style embedders)
	// Trainable pooling heads of decoders (config.json's anna_pooling_head):
	// model.onnx applies the head and outputs sentence_embedding.
	PoolingLatent     = "latent"     // latent cross-attention over the last layer (NV-Embed)
	PoolingMultiLayer = "multilayer" // paper 002's Multi-Layers Trainable Pooling
	// PoolingCausal2Vec is paper 004's [h_C; h_EOS] (config.json's
	// anna_causal2vec): model.onnx outputs sentence_embedding, given the
	// paired encoder's vector (Manifest.Context).
	PoolingCausal2Vec = "causal2vec"
	// PoolingMemory is AutoRegEmbed's (paper 001): the mean of the k
	// memory tokens' last hidden states (config.json's
	// anna_memory_tokens, Manifest.Memory).
	PoolingMemory = "memory"
)

// PoolsInGraph reports whether model.onnx outputs the pooled embedding
// (sentence_embedding) rather than last_hidden_state.
func PoolsInGraph(p string) bool {
	return IsHeadPooling(p) || p == PoolingCausal2Vec || p == PoolingMemory
}

// IsHeadPooling reports whether a pooling mode is a trainable head that the
// graph applies, rather than a reduction of last_hidden_state.
func IsHeadPooling(p string) bool { return p == PoolingLatent || p == PoolingMultiLayer }

// Tasks a converted model serves.
const (
	TaskEmbed  = "embed"  // model.onnx outputs last_hidden_state
	TaskRerank = "rerank" // model.onnx outputs logits (cross-encoder)
)

// The quantizations anna writes (Manifest.Quantization). Norms, biases
// and task heads stay float32 in both.
const (
	// QuantizeInt8: every MatMul weight of the layers is int8, symmetric,
	// with one scale per output column; activations are quantized to
	// uint8 on every call, per row (token) for every product
	// (MatMulIntegerToFloat: Manifest.Activations ActivationsRow), so a
	// text's vector does not depend on the other texts of its batch. BERT
	// graphs converted before issue 64 quantized the Q/K/V product's input
	// per tensor (Activations ""); one scale per tensor gave SmolLM2
	// vectors of cosine 0.64 to float32's, per row 0.987.
	QuantizeInt8 = "int8"
	// QuantizeInt4: decoders only; every projection weight is 4-bit in
	// blocks of 32 input features, each with a scale and a zero point
	// (llama.cpp's Q4_1 grid, run by ONNX Runtime's MatMulNBits),
	// activations float32: 6 bits a weight, a fifth of float32's size;
	// the token embeddings int8 in blocks of 32 (llama.cpp's Q8_0), for
	// decoders too large to hold in float32.
	QuantizeInt4 = "int4"

	// ActivationsRow is Manifest.Activations of an int8 graph whose every
	// product quantizes its input per row (token).
	ActivationsRow = "row"
)

// CheckQuantization accepts the quantizations anna writes: "" (float32
// weights), QuantizeInt8 or QuantizeInt4.
func CheckQuantization(q string) error {
	if q != "" && q != QuantizeInt8 && q != QuantizeInt4 {
		return fmt.Errorf("quantization %q not supported (want %s or %s, or none for float32)", q, QuantizeInt8, QuantizeInt4)
	}
	return nil
}

// DefaultInstructionTemplate formats an instructed query; {task} is the
// instruction and {query} the query (the E5/GTE convention).
const DefaultInstructionTemplate = "Instruct: {task}\nQuery: {query}"

// Manifest describes a converted model: what the encoder needs to turn
// model.onnx outputs into vectors, and a fingerprint that names the exact
// vectors the model produces (stored vectors and caches are keyed by it).
type Manifest struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"` // "bert"
	Task         string `json:"task"`         // embed | rerank
	// Dim is the embedding width (the hidden size).
	Dim int `json:"dim"`
	// NumLabels is the width of a rerank model's logits.
	NumLabels int    `json:"num_labels,omitempty"`
	MaxLength int    `json:"max_length"`
	Pooling   string `json:"pooling,omitempty"` // embed only
	Normalize bool   `json:"normalize"`
	// QueryPrefix and DocumentPrefix are prepended to every query/document
	// (sentence-transformers "prompts"); empty for MiniLM.
	QueryPrefix    string `json:"query_prefix,omitempty"`
	DocumentPrefix string `json:"document_prefix,omitempty"`
	// InstructionTemplate formats queries given an instruction.
	InstructionTemplate string `json:"instruction_template,omitempty"`
	// Quantization is "" for float32 weights, QuantizeInt8 or QuantizeInt4. It is
	// written into model.onnx (so a quantized model's fingerprint always
	// differs from the float32 one's: their vectors and caches never mix).
	// The encoder runs whichever graph model.onnx holds; this field says
	// which it is, for people and for `annactl models list`.
	Quantization string `json:"quantization,omitempty"`
	// Activations says how an int8 model's graph quantizes its
	// activations: ActivationsRow for the graphs converted since issue 64,
	// "" for a float32 model and for int8 encoders converted before it,
	// whose Q/K/V input took one scale per batch (a text's vector moved
	// with its batch). Such a model still runs as it was converted (the
	// indexes built with it keep their vectors); catalog.WithPrecision
	// converts the entry again rather than build new indexes with it.
	Activations string `json:"activations,omitempty"`
	// Context is the encoder a Causal2Vec model is paired with (pooling
	// causal2vec): its vector of each text is the graph's context input.
	Context *ContextModel `json:"context,omitempty"`
	// Memory is an AutoRegEmbed model's input layout (pooling memory).
	Memory *MemoryTokens `json:"memory,omitempty"`
	// PairPrompt is how a decoder reranker reads a (query, document) pair;
	// nil for BERT-family cross-encoders, which read [CLS] q [SEP] d [SEP].
	PairPrompt *PairPrompt `json:"pair_prompt,omitempty"`
	// Fingerprint is hex sha256 over model.onnx's bytes and the settings
	// that change vectors (pooling, normalize, max_length).
	Fingerprint string `json:"fingerprint"`
	// Source says where the weights came from (a directory or a note).
	Source string `json:"source,omitempty"`
	// Files maps each file in the directory to its hex sha256.
	Files map[string]string `json:"files"`
	// Measured are a reranker's evaluations (RecordMeasurements): whether
	// it helps decides if anna uses it without being told (Helps).
	Measured []Measurement `json:"measured,omitempty"`
	// Languages are the languages (ISO 639-1) an embedding model was
	// trained on, ["*"] for a multilingual one; none recorded: see
	// ModelLanguages.
	Languages []string `json:"languages,omitempty"`
	// Ensemble lists the embedding models an ensemble (architecture
	// ArchEnsemble) joins; nil for every other model.
	Ensemble *Ensemble `json:"ensemble,omitempty"`
}

// ArchEnsemble is the architecture of an ensemble: a directory holding only
// its manifest, whose vector of a text is its parts' unit vectors of it,
// each scaled by the square root of its weight, joined and normalised, so
// that the cosine of two of its vectors is the weighted mean of the parts'
// cosines, Σ wᵢ·cosᵢ / Σ wᵢ. `annactl adapt --serve ensemble` writes one
// with the weights its calibrated teacher gives each model.
const ArchEnsemble = "ensemble"

// Ensemble is an ensemble's parts, in the order their values are joined.
type Ensemble struct {
	Parts []EnsemblePart `json:"parts"`
}

// EnsemblePart is one model of an ensemble: an anna model directory (Path,
// else the installed model Name) whose fingerprint must be Fingerprint and
// whose vectors have Dim values, weighted by Weight (> 0).
type EnsemblePart struct {
	Name        string  `json:"name"`
	Path        string  `json:"path,omitempty"`
	Fingerprint string  `json:"fingerprint"`
	Dim         int     `json:"dim"`
	Weight      float64 `json:"weight"`
}

// EnsembleFingerprint is the fingerprint of an ensemble of parts: their
// fingerprints and weights, in order (names and paths do not change a
// vector).
func EnsembleFingerprint(parts []EnsemblePart) string {
	h := sha256.New()
	fmt.Fprintf(h, "anna-ensemble")
	for _, p := range parts {
		fmt.Fprintf(h, "\x00%s\x00%d\x00%s", p.Fingerprint, p.Dim, strconv.FormatFloat(p.Weight, 'g', -1, 64))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validateEnsemble checks what only an ensemble's manifest holds: its task,
// its parts, its width (theirs summed) and its fingerprint (theirs and the
// weights); Validate's common checks follow.
func (m *Manifest) validateEnsemble() error {
	if m.Task != TaskEmbed {
		return fmt.Errorf("field task: an ensemble embeds (task embed), got %q", m.Task)
	}
	if m.Ensemble == nil || len(m.Ensemble.Parts) == 0 {
		return fmt.Errorf("field ensemble: an ensemble lists its parts")
	}
	dim := 0
	for i, p := range m.Ensemble.Parts {
		if p.Name == "" || p.Dim <= 0 || len(p.Fingerprint) != 64 {
			return fmt.Errorf("field ensemble.parts[%d]: name %q, dim %d, fingerprint %q (want all set)", i, p.Name, p.Dim, p.Fingerprint)
		}
		if !(p.Weight > 0) || math.IsInf(p.Weight, 0) {
			return fmt.Errorf("field ensemble.parts[%d].weight: %v (want a positive number)", i, p.Weight)
		}
		dim += p.Dim
	}
	if m.Dim != dim {
		return fmt.Errorf("field dim: %d, but the parts' dims add up to %d", m.Dim, dim)
	}
	if fp := EnsembleFingerprint(m.Ensemble.Parts); m.Fingerprint != fp {
		return fmt.Errorf("field fingerprint: %.12s, but the parts and weights give %.12s", m.Fingerprint, fp)
	}
	return nil
}

// MemoryTokens lay out an AutoRegEmbed model's input as its trainer does:
// the text's tokens (BOS kept, EOS dropped), then QueryInstruction or
// DocumentInstruction tokenised alone, then Count memory tokens, whose
// last hidden states the graph averages.
type MemoryTokens struct {
	Count               int    `json:"count"`
	QueryInstruction    string `json:"query_instruction"`
	DocumentInstruction string `json:"document_instruction"`
}

// ContextModel names a Causal2Vec model's paired encoder: an anna model
// directory (Path, else the installed model Name) whose fingerprint must be
// Fingerprint, and whose vectors have Dim values.
type ContextModel struct {
	Name        string `json:"name"`
	Path        string `json:"path,omitempty"`
	Fingerprint string `json:"fingerprint"`
	Dim         int    `json:"dim"`
}

// PairPrompt lays a (query, document) pair out for a decoder reranker, the
// "yes/no logit" form of Qwen3-Reranker: Prefix, then Body with {query} and
// {document} filled in, tokenised as one text and cut from the right (the
// document's tail goes first) so the whole fits max_length, then Suffix.
// Prefix and Suffix are tokenised on their own (chat-template special
// tokens); no other special token is added. model.onnx outputs the
// language-model logits of the Labels tokens (one token each) at the last
// position; the score is the last label's logit minus the first's — with
// Labels ["no", "yes"], the log-odds of "yes".
type PairPrompt struct {
	Prefix string   `json:"prefix"`
	Body   string   `json:"body"`
	Suffix string   `json:"suffix"`
	Labels []string `json:"labels"`
}

// Qwen3-Reranker's prompt (its model card), with its default instruction.
const (
	qwen3RerankPrefix = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
	qwen3RerankBody   = "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}"
)

// DefaultPairPrompt is Qwen3-Reranker's prompt for a decoder of
// architecture arch: the assistant turn opens with an empty <think> block
// for qwen3 (as Qwen3-Reranker's), plainly for other ChatML decoders
// (SmolLM2-Instruct, Qwen2-Instruct).
func DefaultPairPrompt(arch string) *PairPrompt {
	p := &PairPrompt{Prefix: qwen3RerankPrefix, Body: qwen3RerankBody, Suffix: "<|im_end|>\n<|im_start|>assistant\n", Labels: []string{"no", "yes"}}
	if arch == "qwen3" {
		p.Suffix += "<think>\n\n</think>\n\n"
	}
	return p
}

// Validate checks that Body holds {query} and then {document}, once each,
// and that there are labels.
func (p *PairPrompt) Validate() error {
	q, d := strings.Index(p.Body, "{query}"), strings.Index(p.Body, "{document}")
	if q < 0 || d < 0 || d < q || strings.Count(p.Body, "{query}") != 1 || strings.Count(p.Body, "{document}") != 1 {
		return fmt.Errorf("field pair_prompt.body: %q must hold {query} and then {document}, once each", p.Body)
	}
	if len(p.Labels) == 0 {
		return fmt.Errorf("field pair_prompt.labels: empty (want the tokens whose logits score a pair, e.g. [\"no\", \"yes\"])")
	}
	return nil
}

// Fill is Body with query and document in place (in one pass: braces in
// either text are left alone).
func (p *PairPrompt) Fill(query, document string) string {
	return strings.NewReplacer("{query}", query, "{document}", document).Replace(p.Body)
}

// ShortFingerprint is the first 12 hex digits, for display and file names.
func (m *Manifest) ShortFingerprint() string {
	if len(m.Fingerprint) > 12 {
		return m.Fingerprint[:12]
	}
	return m.Fingerprint
}

// Fingerprinter computes a manifest fingerprint: write the ONNX file's bytes
// into it, then call Sum with the settings.
type Fingerprinter struct{ h hash.Hash }

// NewFingerprinter starts a fingerprint.
func NewFingerprinter() *Fingerprinter { return &Fingerprinter{h: sha256.New()} }

// Write hashes ONNX bytes.
func (f *Fingerprinter) Write(p []byte) (int, error) { return f.h.Write(p) }

// Sum finishes the fingerprint with the vector-changing settings.
func (f *Fingerprinter) Sum(pooling string, normalize bool, maxLength int) string {
	fmt.Fprintf(f.h, "\x00anna-model\x00pooling=%s\x00normalize=%t\x00max_length=%d", pooling, normalize, maxLength)
	return hex.EncodeToString(f.h.Sum(nil))
}

// Validate checks the fields the encoder and reranker rely on.
func (m *Manifest) Validate() error {
	switch {
	case m.Architecture == ArchEnsemble:
		if err := m.validateEnsemble(); err != nil {
			return err
		}
	case m.Ensemble != nil:
		return fmt.Errorf("field ensemble: only an ensemble (architecture %s) lists parts, not architecture %s", ArchEnsemble, m.Architecture)
	case m.Architecture == "bert" || m.Architecture == "roberta" || m.Architecture == "xlm-roberta":
		if m.PairPrompt != nil {
			return fmt.Errorf("field pair_prompt: a decoder reranker's prompt, not used by architecture %s", m.Architecture)
		}
	case IsDecoderType(m.Architecture):
		if m.Task == TaskRerank {
			if m.PairPrompt == nil {
				return fmt.Errorf("field pair_prompt: missing (a %s reranker scores a pair through its prompt)", m.Architecture)
			}
			if err := m.PairPrompt.Validate(); err != nil {
				return err
			}
			if len(m.PairPrompt.Labels) != m.NumLabels {
				return fmt.Errorf("field num_labels: %d, but pair_prompt.labels has %d", m.NumLabels, len(m.PairPrompt.Labels))
			}
		}
	default:
		return fmt.Errorf("field architecture: %q not supported (want bert, roberta, xlm-roberta, llama, mistral, qwen2, qwen3 or ensemble)", m.Architecture)
	}
	switch {
	case m.Architecture == ArchEnsemble: // its task and parts are checked above
	case m.Task == TaskEmbed:
		switch m.Pooling {
		case PoolingMean, PoolingCLS, PoolingLastToken:
		case PoolingLatent, PoolingMultiLayer, PoolingCausal2Vec, PoolingMemory:
			if !IsDecoderType(m.Architecture) {
				return fmt.Errorf("field pooling: %q is a decoder's trainable head, not supported for architecture %s", m.Pooling, m.Architecture)
			}
		default:
			return fmt.Errorf("field pooling: %q not supported (want mean, cls, lasttoken, latent, multilayer, causal2vec or memory)", m.Pooling)
		}
		if (m.Pooling == PoolingMemory) != (m.Memory != nil && m.Memory.Count > 0) {
			return fmt.Errorf("field memory: an AutoRegEmbed model (pooling memory) gives its memory tokens' layout, and only it")
		}
		if (m.Pooling == PoolingCausal2Vec) != (m.Context != nil) {
			return fmt.Errorf("field context: a Causal2Vec model (pooling causal2vec) names its paired encoder, and only it")
		}
		if c := m.Context; c != nil && (c.Name == "" || c.Dim <= 0 || c.Fingerprint == "") {
			return fmt.Errorf("field context: name %q, dim %d, fingerprint %q (want all set)", c.Name, c.Dim, c.Fingerprint)
		}
	case m.Task == TaskRerank:
		if m.NumLabels <= 0 {
			return fmt.Errorf("field num_labels must be positive for task rerank, got %d", m.NumLabels)
		}
	default:
		return fmt.Errorf("field task: %q not supported (want embed or rerank)", m.Task)
	}
	if m.Dim <= 0 {
		return fmt.Errorf("field dim must be positive, got %d", m.Dim)
	}
	if m.MaxLength <= 0 {
		return fmt.Errorf("field max_length must be positive, got %d", m.MaxLength)
	}
	if err := CheckQuantization(m.Quantization); err != nil {
		return fmt.Errorf("field %w", err)
	}
	if len(m.Fingerprint) != 64 {
		return fmt.Errorf("field fingerprint: want 64 hex digits, got %q", m.Fingerprint)
	}
	if _, err := hex.DecodeString(m.Fingerprint); err != nil {
		return fmt.Errorf("field fingerprint: %w", err)
	}
	if len(m.Measured) > 0 && m.Task != TaskRerank {
		return fmt.Errorf("field measured: evaluations of a reranker, but task is %q", m.Task)
	}
	for i, x := range m.Measured {
		if err := x.validate(); err != nil {
			return fmt.Errorf("field measured[%d]: %w", i, err)
		}
	}
	if m.InstructionTemplate != "" && !strings.Contains(m.InstructionTemplate, "{query}") {
		return fmt.Errorf("field instruction_template: %q lacks {query}", m.InstructionTemplate)
	}
	return nil
}

// LoadManifest reads and validates dir/anna-model.json.
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, hint.Errorf(hint.Action{Kind: hint.ImportModel}, "model: reading manifest (is %s a converted model?): %w", dir, err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("model: %s: parsing JSON: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	return m, nil
}

// WriteManifest writes m as dir/anna-model.json, atomically: a crash leaves
// the old manifest or the new one, never a torn file.
func WriteManifest(dir string, m *Manifest) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("model: refusing to write manifest: %w", err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("model: encoding manifest: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ManifestFile), append(b, '\n')); err != nil {
		return fmt.Errorf("model: writing manifest: %w", err)
	}
	return nil
}

// knownLanguages are the languages of the catalogue's models by name, for
// manifests written before Manifest.Languages was.
var knownLanguages = map[string][]string{
	"all-MiniLM-L6-v2":      {"en"},
	"bge-small-en-v1.5":     {"en"},
	"e5-small-v2":           {"en"},
	"smollm2-135m-instruct": {"en"},
	"multilingual-e5-small": {"*"},
}

// ModelLanguages returns the languages the model was trained on: its
// manifest's Languages, else those of the catalogue model it is or was
// made from by name (NAME, NAME-int8, NAME-FINGERPRINT12), else nil:
// unknown, which callers take as any language. "*" is every language.
func (m *Manifest) ModelLanguages() []string {
	if len(m.Languages) > 0 {
		return m.Languages
	}
	name := m.Name
	for {
		if l, ok := knownLanguages[name]; ok {
			return l
		}
		i := strings.LastIndexByte(name, '-')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// KnowsLanguage reports whether the model was trained on language code;
// true where its languages are unknown ("" too: a text whose language
// could not be told).
func (m *Manifest) KnowsLanguage(code string) bool {
	ls := m.ModelLanguages()
	if ls == nil || code == "" {
		return true
	}
	for _, l := range ls {
		if l == "*" || l == code {
			return true
		}
	}
	return false
}
