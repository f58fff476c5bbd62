package encoder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/inference"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Options tune a Model. Zero values pick the defaults. The fields
// are those of internal/inference's Options, which the reranker shares, with the
// encoder's defaults.
type Options struct {
	// IntraOpThreads is ONNX Runtime's thread count inside one operator
	// (default 1). One call's batches run in parallel instead (Workers):
	// on SciFact that is as fast as splitting each operator
	// (BenchmarkEncoderSciFact: 0.88x of a same-run MatMul, 0.86x before),
	// and a single query keeps to one core, so
	// the BM25 search a hybrid query runs beside it has the other instead
	// of stalling the encoder's synchronised operator threads
	// (BenchmarkHybridLatency100k).
	IntraOpThreads int
	InterOpThreads int // default 1
	// Workers is how many batches of one call run at once (default: the
	// cores divided by IntraOpThreads).
	Workers   int
	BatchSize int // texts per ONNX Runtime call, at most (default 32)
	// BatchTokens caps a batch's padded tokens (default 1024): texts of
	// 512 tokens go two at a time, of 32 tokens BatchSize at a time. See
	// internal/inference's Options for what it bought.
	BatchTokens int
	// MaxLength overrides the manifest's max length (at most the model's
	// max_position_embeddings). Vectors of longer texts change, so the
	// fingerprint changes with it.
	MaxLength int
	// Backend runs the model: "onnxruntime" (ONNX Runtime, in builds with
	// cgo and without the annapure tag) or "go" (pure Go, every build;
	// float32 and int8 BERT, float32 decoder embedding models). "" is
	// DefaultBackend(), but "go" for an int8 model on a CPU with AMX-INT8
	// or AVX-512 VNNI.
	// Both give the same vectors up to float32 rounding (float32 models:
	// TestGoBackendMatchesORT; int8 within cosine 0.995), so the
	// fingerprint does not depend on it.
	Backend string
}

// Backend names, Options.Backend's values.
const (
	BackendORT = inference.BackendORT
	BackendGo  = inference.BackendGo
)

// ORTEncoder is Model's old name.
//
// Deprecated: use Model; it also runs the pure-Go backend.
type ORTEncoder = Model

// DefaultBackend is the backend of Options without one: "onnxruntime"
// where this build has ONNX Runtime, else "go" — except for an int8
// model on a CPU with AMX-INT8 or AVX-512 VNNI, which runs on "go".
func DefaultBackend() string { return inference.DefaultBackend() }

// Model embeds with a converted model directory, run in this process by
// ONNX Runtime or by anna's pure-Go forward (Options.Backend; a model
// another server runs is a RemoteEncoder). Its session is created on the
// first call that has a text to embed (see internal/inference), so opening a
// model to read its fingerprint and dim, or serving every text from a
// Cache, costs no session. It is safe for concurrent use; Close it when
// done.
type Model struct {
	m           *inference.Model
	fingerprint string
	// context is a Causal2Vec model's paired encoder (Manifest.Context),
	// whose vector of each text the graph takes; nil otherwise.
	context *Model
}

var _ Encoder = (*Model)(nil)

// spec is what the encoder serves from a model directory, with the
// defaults documented on Options.
var spec = inference.Spec{
	Task: model.TaskEmbed, Name: "encoder", Want: "an embedding model",
	Window:   sortWindow,
	Defaults: inference.Options{IntraOpThreads: 1, InterOpThreads: 1, BatchSize: 32},
}

// sortWindow is how many texts are tokenised and length-sorted together:
// enough that batches pad little, few enough that token ids for a huge
// call are not all held at once.
const sortWindow = 4096

// DefaultDir is the directory of the default model in the form that embeds
// when no model is named (all-MiniLM-L6-v2-int8 under $ANNA_HOME/models,
// installed by `make setup` or `anna-env setup`; home.DefaultEmbedModel):
// the engine's zero Options, annactl embed and annactl index use it alike.
func DefaultDir() string { return home.DefaultEmbedModel() }

// Default loads the default model (DefaultDir).
func Default(ctx context.Context) (*Model, error) {
	ctx = safe.Ctx(ctx)
	dir, err := home.RequireDefaultEmbedModel()
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return Load(ctx, dir, Options{})
}

// Load opens the converted embedding model in modelDir: it checks the
// directory and loads the tokenizer. The ONNX Runtime session is created
// by the first embed call that needs it, which also returns its error (a
// damaged model.onnx, say).
func Load(ctx context.Context, modelDir string, opts Options) (*Model, error) {
	ctx = safe.Ctx(ctx)
	m, err := inference.Open(ctx, modelDir, spec, inference.Options(opts))
	if err != nil {
		return nil, err
	}
	man := m.Manifest()
	e := &Model{m: m, fingerprint: man.Fingerprint}
	if c := man.Context; c != nil {
		if e.context, err = loadContext(ctx, modelDir, c); err != nil {
			m.Close()
			return nil, err
		}
	}
	if m.MaxLength() != man.MaxLength {
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00max_length=%d", man.Fingerprint, m.MaxLength()))
		e.fingerprint = hex.EncodeToString(h[:])
	}
	return e, nil
}

// loadContext opens a Causal2Vec model's paired encoder: c.Path, else the
// installed model c.Name, whose fingerprint and dimension must be c's.
func loadContext(ctx context.Context, modelDir string, c *model.ContextModel) (*Model, error) {
	ce, err := loadNamed(ctx, c.Path, c.Name, c.Fingerprint, c.Dim, Options{})
	if err != nil {
		return nil, fmt.Errorf("encoder: %s is a Causal2Vec model paired with %s (install it, or keep it at %s): %w", modelDir, c.Name, c.Path, err)
	}
	return ce, nil
}

// loadNamed loads a model another names as one it runs with (a Causal2Vec
// model's paired encoder, an ensemble's parts): the model directory path
// when it holds a manifest, else the installed model name; it must have
// fingerprint fp and dim values.
func loadNamed(ctx context.Context, path, name, fp string, dim int, opts Options) (*Model, error) {
	dir := path
	if _, err := os.Stat(filepath.Join(dir, model.ManifestFile)); dir == "" || err != nil {
		dir = filepath.Join(home.ModelsDir(), name)
	}
	m, err := Load(ctx, dir, opts)
	if err != nil {
		return nil, err
	}
	if m.Fingerprint() != fp || m.Dim() != dim {
		m.Close()
		return nil, fmt.Errorf("%s has fingerprint %.12s (dim %d), not %.12s (dim %d)", dir, m.Fingerprint(), m.Dim(), fp, dim)
	}
	return m, nil
}

// Close frees the ONNX Runtime session (if one was created) and the
// tokenizer (and a Causal2Vec model's paired encoder). It waits for
// running calls; later calls fail.
func (e *Model) Close() error {
	if e.context != nil {
		return errors.Join(e.m.Close(), e.context.Close())
	}
	return e.m.Close()
}

// Dim is the embedding width.
func (e *Model) Dim() int { return e.m.Manifest().Dim }

// Fingerprint is the manifest's fingerprint (adjusted for a MaxLength
// override).
func (e *Model) Fingerprint() string { return e.fingerprint }

// Manifest returns the model's manifest (do not modify it).
func (e *Model) Manifest() *model.Manifest { return e.m.Manifest() }

// MaxLength is the token limit inputs are truncated to.
func (e *Model) MaxLength() int { return e.m.MaxLength() }

// FormatDocument is the exact text embedded for document d.
func (e *Model) FormatDocument(d string) string { return e.Manifest().DocumentPrefix + d }

// FormatQuery is the exact text embedded for query q under prompt p.
func (e *Model) FormatQuery(q string, p Prompt) string {
	man := e.Manifest()
	t := man.InstructionTemplate
	if t == "" {
		t = model.DefaultInstructionTemplate
	}
	return FormatQuery(t, man.QueryPrefix, p, q)
}

// EmbedDocuments embeds texts as documents, in input order.
func (e *Model) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	in := texts
	if e.Manifest().DocumentPrefix != "" {
		in = make([]string, len(texts))
		for i, t := range texts {
			in[i] = e.FormatDocument(t)
		}
	}
	switch {
	case e.context != nil:
		return e.embedCausal2Vec(ctx, in, texts, func(int) string { return "" })
	case e.Manifest().Memory != nil:
		return e.embedMemory(ctx, in, false)
	}
	return e.embed(ctx, in)
}

// EmbedQueries embeds queries formatted with p (see Prompt), in input order.
func (e *Model) EmbedQueries(ctx context.Context, queries []string, p Prompt) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	in := make([]string, len(queries))
	for i, q := range queries {
		in[i] = e.FormatQuery(q, p)
	}
	switch {
	case e.context != nil:
		prefix := e.FormatQuery("", p) // the instruction (and examples) alone
		return e.embedCausal2Vec(ctx, in, queries, func(int) string { return prefix })
	case e.Manifest().Memory != nil:
		return e.embedMemory(ctx, in, true)
	}
	return e.embed(ctx, in)
}

// embedCausal2Vec embeds texts with a Causal2Vec model as the trainer does
// (internal/train/technique/causal2vec): the paired encoder embeds raw[i] (a query
// without its instruction, a document), and the contextual token goes after
// the tokens texts[i] shares with prefix(i) tokenised alone (the BOS, if
// any, and the instruction), before EOS.
func (e *Model) embedCausal2Vec(ctx context.Context, texts, raw []string, prefix func(int) string) ([][]float32, error) {
	vecs, err := e.context.EmbedDocuments(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("encoder: the paired encoder: %w", err)
	}
	tok := e.m.Tokenizer()
	prefixes := map[string][]int64{}
	return e.run(ctx, inference.Inputs{Texts: texts, Context: vecs, Reserve: 1, Prepare: func(i int, ids []int64) []int64 {
		p := prefix(i)
		pre, ok := prefixes[p] // prefixes are few; Prepare runs on one goroutine per window
		if !ok {
			pre = tok.Encode(p, 0).IDs
			pre = pre[:max(len(pre)-1, 0)] // the EOS the tokenizer appends
			prefixes[p] = pre
		}
		n := 0
		for n < len(pre) && n < len(ids)-1 && pre[n] == ids[n] {
			n++
		}
		return slices.Concat(ids[:n], []int64{model.ContextPlaceholder}, ids[n:])
	}})
}

// embedMemory embeds texts with an AutoRegEmbed model as the trainer does
// (internal/train/technique/autoregembed): the text's tokens with the tokenizer's
// BOS kept and its EOS dropped, the role's instruction tokenised alone,
// then the k memory tokens (ids vocab … vocab+k−1).
func (e *Model) embedMemory(ctx context.Context, texts []string, query bool) ([][]float32, error) {
	mt, tok := e.Manifest().Memory, e.m.Tokenizer()
	instr := tok.IDs(mt.DocumentInstruction)
	if query {
		instr = tok.IDs(mt.QueryInstruction)
	}
	mem := make([]int64, mt.Count)
	for j := range mem {
		mem[j] = int64(e.m.Config().VocabSize + j)
	}
	return e.run(ctx, inference.Inputs{Texts: texts, Reserve: len(instr) + mt.Count - 1, Prepare: func(_ int, ids []int64) []int64 {
		return slices.Concat(ids[:max(len(ids)-1, 0)], instr, mem)
	}})
}

// Stats are cumulative counters of an encoder's work, for benchmarks.
type Stats struct {
	Texts, Batches int64
	Tokens         int64 // real tokens (mask 1), special tokens included
	PaddedTokens   int64 // batch × padded length, summed over batches
	// FLOPs of the BERT forward passes run (2 per multiply-add), counted
	// on the padded shapes actually run.
	FLOPs     float64
	RunTime   time.Duration // wall time with at least one ONNX Runtime Run in flight
	TotalTime time.Duration // inside embed calls (tokenise, batch, run, pool)
	// SessionTime is how long creating the ONNX Runtime session took, in
	// the first embed call that needed it (0 until then); TotalTime
	// excludes it.
	SessionTime time.Duration
}

// Stats returns the counters since Load.
func (e *Model) Stats() Stats { return Stats(e.m.Stats()) }

// embed runs texts through the model (tokenised, sorted by length so each
// batch pads little, batched over the workers; see internal/inference) and
// pools each text's hidden states; results come back in input order.
func (e *Model) embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.run(ctx, inference.Inputs{Texts: texts})
}

// run is embed over any inputs.
func (e *Model) run(ctx context.Context, in inference.Inputs) ([][]float32, error) {
	man := e.Manifest()
	dim := man.Dim
	out := make([][]float32, len(in.Texts))
	err := e.m.Run(ctx, in, func(b inference.Batch) error {
		buf := make([]float32, len(b.Rows)*dim) // one allocation for the whole batch
		for r, i := range b.Rows {
			v := buf[r*dim : (r+1)*dim : (r+1)*dim]
			if model.PoolsInGraph(man.Pooling) { // the graph pooled
				copy(v, b.Out[r*dim:(r+1)*dim])
			} else {
				pool(v, b.Out[r*b.Seq*dim:(r+1)*b.Seq*dim], b.Mask[r*b.Seq:(r+1)*b.Seq], man.Pooling)
			}
			if man.Normalize {
				normalize(v)
			}
			out[i] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pool reduces one sequence's hidden states [seq, dim] to v.
func pool(v, hidden []float32, mask []int64, mode string) {
	dim := len(v)
	switch mode {
	case model.PoolingCLS:
		copy(v, hidden[:dim])
	case model.PoolingLastToken:
		last := 0
		for i, m := range mask {
			if m != 0 {
				last = i
			}
		}
		copy(v, hidden[last*dim:(last+1)*dim])
	default: // mean over real tokens, as sentence-transformers
		clear(v)
		n := 0
		for i, m := range mask {
			if m == 0 {
				continue
			}
			n++
			for j, x := range hidden[i*dim : (i+1)*dim] {
				v[j] += x
			}
		}
		if n > 0 {
			inv := 1 / float32(n)
			for j := range v {
				v[j] *= inv
			}
		}
	}
}

// normalize scales v to unit L2 norm (a zero vector stays zero), with the
// 1e-12 floor sentence-transformers' F.normalize uses.
func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	n := math.Max(math.Sqrt(s), 1e-12)
	inv := float32(1 / n)
	for i := range v {
		v[i] *= inv
	}
}
