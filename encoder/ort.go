package encoder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/parallel"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/onnx"
	"github.com/anna-search/anna/tokenizer"
)

// Options tune an ORTEncoder. Zero values pick the defaults.
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
	BatchSize int // texts per ONNX Runtime call (default 32)
	// MaxLength overrides the manifest's max length (at most the model's
	// max_position_embeddings). Vectors of longer texts change, so the
	// fingerprint changes with it.
	MaxLength int
}

// ORTEncoder embeds with a converted model in ONNX Runtime. It is safe for
// concurrent use; Close it when done.
type ORTEncoder struct {
	dir         string
	man         *model.Manifest
	cfg         *model.Config
	tok         *tokenizer.Tokenizer
	sess        *ortgo.DynamicAdvancedSession
	maxLen      int
	batch       int
	workers     int
	fingerprint string

	mu     sync.RWMutex // held for reading by every embed call; Close takes it for writing
	closed bool

	stats counters
}

var _ Encoder = (*ORTEncoder)(nil)

// Default loads the default model (home.DefaultModel(), installed by
// `make setup`).
func Default(ctx context.Context) (*ORTEncoder, error) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return Load(ctx, dir, Options{})
}

// Load opens the converted embedding model in modelDir.
func Load(ctx context.Context, modelDir string, opts Options) (*ORTEncoder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	md, err := model.OpenDir(modelDir)
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	man, cfg, onnxPath := md.Manifest, md.Config, md.ONNXPath
	if man.Task != model.TaskEmbed {
		return nil, fmt.Errorf("encoder: %s is a %s model, not an embedding model", modelDir, man.Task)
	}
	e := &ORTEncoder{dir: modelDir, man: man, cfg: cfg, maxLen: man.MaxLength, batch: opts.BatchSize, fingerprint: man.Fingerprint}
	if e.batch <= 0 {
		e.batch = 32
	}
	intra := max(1, opts.IntraOpThreads)
	if e.workers = opts.Workers; e.workers <= 0 {
		e.workers = max(1, runtime.NumCPU()/intra)
	}
	if opts.MaxLength > 0 && opts.MaxLength != man.MaxLength {
		if opts.MaxLength > cfg.MaxPositionEmbeddings {
			return nil, fmt.Errorf("encoder: max length %d exceeds the model's max_position_embeddings %d", opts.MaxLength, cfg.MaxPositionEmbeddings)
		}
		e.maxLen = opts.MaxLength
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00max_length=%d", man.Fingerprint, e.maxLen))
		e.fingerprint = hex.EncodeToString(h[:])
	}
	e.tok, err = tokenizer.Load(filepath.Join(modelDir, onnx.TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	e.sess, err = ort.NewSession(onnxPath,
		[]string{onnx.InputIDs, onnx.InputMask, onnx.InputTypeIDs}, []string{onnx.OutputHidden},
		ort.Options{IntraOpThreads: intra, InterOpThreads: opts.InterOpThreads})
	if err != nil {
		e.tok.Close()
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return e, nil
}

// Close frees the ONNX Runtime session and the tokenizer. It waits for
// running calls; later calls fail.
func (e *ORTEncoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return errors.Join(e.sess.Destroy(), e.tok.Close())
}

// Dim is the embedding width.
func (e *ORTEncoder) Dim() int { return e.man.Dim }

// Fingerprint is the manifest's fingerprint (adjusted for a MaxLength
// override).
func (e *ORTEncoder) Fingerprint() string { return e.fingerprint }

// Manifest returns the model's manifest (do not modify it).
func (e *ORTEncoder) Manifest() *model.Manifest { return e.man }

// MaxLength is the token limit inputs are truncated to.
func (e *ORTEncoder) MaxLength() int { return e.maxLen }

// FormatDocument is the exact text embedded for document d.
func (e *ORTEncoder) FormatDocument(d string) string { return e.man.DocumentPrefix + d }

// FormatQuery is the exact text embedded for query q under prompt p.
func (e *ORTEncoder) FormatQuery(q string, p Prompt) string {
	t := e.man.InstructionTemplate
	if t == "" {
		t = model.DefaultInstructionTemplate
	}
	return FormatQuery(t, e.man.QueryPrefix, p, q)
}

// EmbedDocuments embeds texts as documents, in input order.
func (e *ORTEncoder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	in := texts
	if e.man.DocumentPrefix != "" {
		in = make([]string, len(texts))
		for i, t := range texts {
			in[i] = e.FormatDocument(t)
		}
	}
	return e.embed(ctx, in)
}

// EmbedQueries embeds queries formatted with p (see Prompt), in input order.
func (e *ORTEncoder) EmbedQueries(ctx context.Context, queries []string, p Prompt) ([][]float32, error) {
	in := make([]string, len(queries))
	for i, q := range queries {
		in[i] = e.FormatQuery(q, p)
	}
	return e.embed(ctx, in)
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
}

type counters struct {
	texts, batches, tokens, padded, flops, run, total atomic.Int64

	// busy tracks Runs in flight, so that run counts wall time once
	// however many batches run in parallel.
	busy struct {
		sync.Mutex
		n     int
		since time.Time
	}
}

func (c *counters) runStarted() {
	c.busy.Lock()
	if c.busy.n == 0 {
		c.busy.since = time.Now()
	}
	c.busy.n++
	c.busy.Unlock()
}

func (c *counters) runEnded() {
	c.busy.Lock()
	if c.busy.n--; c.busy.n == 0 {
		c.run.Add(int64(time.Since(c.busy.since)))
	}
	c.busy.Unlock()
}

// Stats returns the counters since Load.
func (e *ORTEncoder) Stats() Stats {
	c := &e.stats
	return Stats{
		Texts: c.texts.Load(), Batches: c.batches.Load(), Tokens: c.tokens.Load(), PaddedTokens: c.padded.Load(),
		FLOPs: float64(c.flops.Load()), RunTime: time.Duration(c.run.Load()), TotalTime: time.Duration(c.total.Load()),
	}
}

// sortWindow is how many texts are tokenised and length-sorted together:
// enough that batches pad little, few enough that token ids for a huge
// call are not all held at once.
const sortWindow = 4096

// embed tokenises, sorts by length so each batch pads little, runs the
// batches and pools; results come back in input order.
func (e *ORTEncoder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, errors.New("encoder: use of closed encoder")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := time.Now()
	defer func() { e.stats.total.Add(int64(time.Since(start))) }()
	out := make([][]float32, len(texts))
	for lo := 0; lo < len(texts); lo += sortWindow {
		hi := min(lo+sortWindow, len(texts))
		if err := e.embedWindow(ctx, texts[lo:hi], out[lo:hi]); err != nil {
			return nil, err
		}
	}
	e.stats.texts.Add(int64(len(texts)))
	return out, nil
}

func (e *ORTEncoder) embedWindow(ctx context.Context, texts []string, out [][]float32) error {
	encs := e.tok.EncodeBatch(texts, e.maxLen)
	order := make([]int, len(encs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(encs[order[a]].IDs) < len(encs[order[b]].IDs) })
	// Batches run in parallel, in order of length, on up to e.workers
	// goroutines; the first error stops the rest.
	nb := (len(order) + e.batch - 1) / e.batch
	return parallel.Each(ctx, nb, e.workers, func(b int) error {
		rows := order[b*e.batch : min((b+1)*e.batch, len(order))]
		batch := make([]tokenizer.Encoding, len(rows))
		for j, i := range rows {
			batch[j] = encs[i]
		}
		vecs, err := e.runBatch(batch)
		if err != nil {
			return err
		}
		for j, i := range rows {
			out[i] = vecs[j]
		}
		return nil
	})
}

// runBatch runs one padded batch through ONNX Runtime and pools it.
func (e *ORTEncoder) runBatch(encs []tokenizer.Encoding) ([][]float32, error) {
	ids, types, mask, seq := tokenizer.Pad(encs, e.tok.PadID())
	b, dim := len(encs), e.man.Dim
	shape := ortgo.NewShape(int64(b), int64(seq))
	hidden, err := runBERT(e.sess, shape, ids, mask, types, ortgo.NewShape(int64(b), int64(seq), int64(dim)), &e.stats)
	if err != nil {
		return nil, fmt.Errorf("encoder: %s: %w", e.dir, err)
	}
	e.stats.flops.Add(int64(e.cfg.ForwardFLOPs(b, seq)))
	vecs := make([][]float32, b)
	buf := make([]float32, b*dim) // one allocation for the whole batch
	for r := range vecs {
		v := buf[r*dim : (r+1)*dim : (r+1)*dim]
		pool(v, hidden[r*seq*dim:(r+1)*seq*dim], mask[r*seq:(r+1)*seq], e.man.Pooling)
		if e.man.Normalize {
			normalize(v)
		}
		vecs[r] = v
	}
	return vecs, nil
}

// runBERT feeds one [batch, seq] batch to a BERT session and returns the
// single output, whose shape the caller states. It counts the work in c.
func runBERT(sess *ortgo.DynamicAdvancedSession, shape ortgo.Shape, ids, mask, types []int64, outShape ortgo.Shape, c *counters) ([]float32, error) {
	tIDs, err := ortgo.NewTensor(shape, ids)
	if err != nil {
		return nil, fmt.Errorf("input_ids tensor: %w", err)
	}
	defer tIDs.Destroy()
	tMask, err := ortgo.NewTensor(shape, mask)
	if err != nil {
		return nil, fmt.Errorf("attention_mask tensor: %w", err)
	}
	defer tMask.Destroy()
	tTypes, err := ortgo.NewTensor(shape, types)
	if err != nil {
		return nil, fmt.Errorf("token_type_ids tensor: %w", err)
	}
	defer tTypes.Destroy()
	out, err := ortgo.NewEmptyTensor[float32](outShape)
	if err != nil {
		return nil, fmt.Errorf("output tensor %v: %w", outShape, err)
	}
	defer out.Destroy()
	if c != nil {
		c.runStarted()
	}
	err = sess.Run([]ortgo.Value{tIDs, tMask, tTypes}, []ortgo.Value{out})
	if c != nil {
		c.runEnded()
	}
	if err != nil {
		return nil, fmt.Errorf("running model on batch %v: %w", shape, err)
	}
	if c != nil {
		c.batches.Add(1)
		c.padded.Add(shape.FlattenedSize())
		var real int64
		for _, m := range mask {
			real += m
		}
		c.tokens.Add(real)
	}
	// out's memory is freed by Destroy: copy what the caller keeps.
	return append([]float32(nil), out.GetData()...), nil
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
