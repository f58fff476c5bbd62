// Package inference is the model runtime: it runs the converted models of
// `annactl models import` (a model.Dir: anna-model.json, config.json,
// model.onnx, tokenizer.json), BERT-family encoders and cross-encoders and
// Llama-family decoders alike, in ONNX Runtime or in pure Go
// (Options.Backend). (It was internal/bert, named for its first family.)
// It is the one copy of
// what the encoder (task embed) and rerank (task rerank) packages share:
// opening and checking a model directory for a task, loading its
// tokenizer, the backend that runs the graph (an ONNX Runtime session, or
// model/bert's forward over the graph's weights), the BERT run of one
// padded batch with its work counters, and the length-sorted batching of
// a call's inputs over a few goroutines. What an output means (pooling a text's hidden states, reading a pair's logits)
// stays with the caller.
//
// Backends: BackendORT ("onnxruntime") runs model.onnx in ONNX Runtime and
// exists only in builds with cgo and without the annapure tag
// (bert_ort.go); BackendGo ("go") reads the graph's weights (float32, or
// a BERT graph's int8 ones: model/bert's int8 forward follows the int8
// graph's arithmetic, its vectors within 1e-6 of ONNX Runtime's int8 ones
// for most texts, TestGoBackendInt8MatchesORT) and
// runs them in pure Go, in every build: model/bert's forward for plain
// BERT models (task embed with mean, CLS or last pooling outside the
// graph, task rerank with BertForSequenceClassification's head), and
// model/llama's Embedder for Llama-family decoders (decoder_go.go: any
// pooling, the trained heads, AutoRegEmbed, Causal2Vec, the yes/no
// reranker; float32, int8 and int4 graphs), giving the graph's own output
// within 1e-5 of ONNX Runtime's (TestGoDecoderMatchesORT; int4 and tiny
// int8 decoders likewise, TestGoDecoderQuantized: an int8 activation near
// a quantization step may round one step away from ONNX Runtime's, which
// over a real decoder's 30 layers leaves cosines ≈ 0.993–0.997). Open
// refuses a backend the build or the model cannot run, naming both. The default is ONNX Runtime
// where it is built in, else Go (DefaultBackend).
//
// Invariants:
//
//   - Open reads and checks the directory and loads the tokenizer but
//     creates no session (nor reads the Go backend's weights). The first
//     Run with at least one input creates it, exactly once however many
//     goroutines call Run at once; if that fails, that Run and every later
//     one return the error.
//   - Run batches its inputs by token length (a stable sort: equal lengths
//     keep input order) within windows of Spec.Window inputs, at most
//     BatchSize inputs and BatchTokens tokens a batch (an input longer
//     than BatchTokens alone), and only inputs of one token length: no
//     input is padded (unpaddedFrom). For the same inputs and Options the
//     batches, and so the outputs, are the same whatever Workers is:
//     workers only choose which goroutine runs which batch.
//   - An input's output does not depend on the other inputs of its Run
//     or batch: both backends compute each row of a batch of one length
//     as they compute it alone (an int8 graph quantizes per row), so an
//     input gives the same bits alone or among others (TestBatchInvariant
//     in package encoder; within 1.1e-7 when padded batches were allowed,
//     and an int8 vector then moved by up to 0.012).
//   - A Run whose context ends while the session is being created returns
//     ctx's error at once; the creation goes on in the background and the
//     next Run uses it.
//   - Close waits for running calls and for a session being created, then
//     frees the session (if one was created) and the tokenizer. Later Runs fail; a second Close does
//     nothing.
//
// A nil context.Context given to a function of this package is
// context.Background(), and a panic on a goroutine it starts comes back
// as Run's error (internal/parallel).
package inference

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/internal/parallel"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
)

// Options tune a Model. Zero (or negative) values take the Spec's
// Defaults, and zero there the rule given per field.
type Options struct {
	// IntraOpThreads is ONNX Runtime's thread count inside one operator
	// (0: one per core).
	IntraOpThreads int
	InterOpThreads int // across operators (0: 1)
	// Workers is how many batches of one Run go through the model at once
	// (0: the cores divided by IntraOpThreads, at least 1).
	Workers   int
	BatchSize int // inputs per ONNX Runtime call, at most (0: 32)
	// BatchTokens caps a batch's padded tokens (inputs × the longest
	// one's tokens; 0: 1024): long inputs go a few at a time, short ones
	// BatchSize at a time. Smaller batches of long texts pad less and keep
	// their activations in cache: bge-small embedded SciFact abstracts
	// (up to 512 tokens) 1.4× faster in float32 and int8 alike with 1,024
	// tokens than with 32 inputs a batch (BenchmarkQuantSciFact).
	BatchTokens int
	// MaxLength is the token limit inputs are truncated to (0: the
	// manifest's). A limit other than the manifest's must be at most the
	// model's max_position_embeddings.
	MaxLength int
	// Backend runs the graph: BackendORT or BackendGo ("": the Spec's
	// default, else DefaultBackend(), but BackendGo for an int8 model
	// on a CPU with AMX-INT8 or AVX-512 VNNI: see backendFor).
	Backend string
}

// Backends, Options.Backend's values.
const (
	BackendORT = "onnxruntime"
	BackendGo  = "go"
)

// DefaultBackend is the backend of an Options without one: ONNX Runtime
// where this build has it (ort.Built), else pure Go — except for an int8
// model on a CPU with AMX-INT8 or AVX-512 VNNI (backendFor).
func DefaultBackend() string {
	if ort.Built {
		return BackendORT
	}
	return BackendGo
}

// backendFor is the backend of an Options without one for the model md
// (its output, and whether it is a Causal2Vec graph): DefaultBackend(),
// but the pure-Go forward for an int8 model it runs where the CPU has
// AMX-INT8 or AVX-512 VNNI, whose products its kernels use. Measured
// (BenchmarkEncoderBackends, docs/results/indexing.md and encoder.md):
// on a Xeon with AMX (2 cores, shared) Go int8 embedded SciFact abstracts
// 1.53–1.58× as fast as ONNX Runtime int8 per CPU-second (its VNNI kernel,
// AMX left out: 1.00–1.09×); on an AMD EPYC with VNNI and no AMX 1.26–1.41×,
// a short query's p50 1.70–1.79 ms against ONNX Runtime's 2.43–2.71
// (2026-12-07). Its vectors are within cosine 0.998 of ONNX Runtime's,
// nearer than either is to float32. Elsewhere (AVX2 only, not measured
// against ONNX Runtime) the choice stays DefaultBackend's.
func backendFor(md *model.Dir, output string, context bool) string {
	if md.Manifest.Quantization == model.QuantizeInt8 && goSupports(md, output, context) == nil {
		return Int8Backend()
	}
	return DefaultBackend()
}

// Int8Backend is the backend an int8 model the Go forward supports runs
// on when none is named (backendFor): BackendGo where this CPU's int8
// kernel is AMX's or AVX-512 VNNI's, else DefaultBackend().
func Int8Backend() string {
	if _, k := tensor.Kernels(); k == "amx" || k == "avx512vnni" {
		return BackendGo
	}
	return DefaultBackend()
}

// runner runs one padded batch through the model's graph: ids, mask and
// types are [b, seq] row-major, ctxRows a Causal2Vec graph's context
// ([b, context], else nil); it returns the graph's output (see Batch.Out).
type runner interface {
	run(ids, mask, types []int64, b, seq int, ctxRows []float32) ([]float32, error)
	close() error
}

// Spec says what a package serves from a model directory.
type Spec struct {
	Task string // model.TaskEmbed or model.TaskRerank
	Name string // prefix of the errors returned ("encoder", "rerank")
	// Want completes the error for a directory of another task:
	// "DIR is a TASK model, not " + Want.
	Want string
	// Hints are what the user can do about a directory of another task
	// (hint.Of of the error).
	Hints []hint.Action
	// Window is how many inputs are tokenised and length-sorted together
	// (0: all of a Run's).
	Window   int
	Defaults Options
}

// ErrClosed is returned (wrapped) by Run after Close.
var ErrClosed = errors.New("use of closed model")

// Model is an opened model directory whose ONNX Runtime session is created
// on first use. It is safe for concurrent use.
type Model struct {
	dir     *model.Dir
	tok     *tokenizer.Tokenizer
	spec    Spec
	maxLen  int
	batch   batching
	workers int
	output  string // the graph output of spec.Task
	// prompt is a decoder reranker's pair layout (the manifest's
	// PairPrompt) with its prefix and suffix tokenised; nil otherwise.
	prompt *prompt
	// context is a Causal2Vec graph's context width (0: not one).
	context int
	threads struct{ intra, inter int } // Options.IntraOpThreads, InterOpThreads
	backend string
	// auto: the backend is backendFor's choice, not the caller's; a Go
	// forward that cannot read the graph then falls back to ONNX Runtime.
	auto bool

	mu      sync.RWMutex // held for reading by every Run; Close takes it for writing
	closed  bool
	once    sync.Once     // starts creating sess
	ready   chan struct{} // closed once sess or sessErr is set
	sess    runner
	sessErr error
	// newRunner, set by tests only, replaces the backend's constructor.
	newRunner func(*Model) (runner, error)

	stats counters
}

// Open opens the converted model in dir for spec.Task: it reads and checks
// the manifest, config.json and model.onnx's presence (model.OpenDir),
// refuses another task, applies o over spec.Defaults and loads the
// tokenizer. The session waits for the first Run.
func Open(ctx context.Context, dir string, spec Spec, o Options) (*Model, error) {
	ctx = safe.Ctx(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	md, err := model.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	man, cfg := md.Manifest, md.Config
	if man.Task != spec.Task {
		return nil, hint.Wrap(fmt.Errorf("%s: %s is a %s model, not %s", spec.Name, dir, man.Task, spec.Want), spec.Hints...)
	}
	o = o.withDefaults(spec.Defaults)
	m := &Model{dir: md, spec: spec, maxLen: man.MaxLength, batch: batching{o.BatchSize, o.BatchTokens, unpaddedFrom}, workers: o.Workers,
		output: model.OutputHidden, backend: o.Backend}
	m.threads.intra, m.threads.inter = o.IntraOpThreads, o.InterOpThreads
	switch {
	case spec.Task == model.TaskRerank:
		m.output = model.OutputLogits
	case model.PoolsInGraph(man.Pooling):
		m.output = model.OutputEmbedding // the graph pools (a trained head, Causal2Vec)
	}
	if c := man.Context; c != nil {
		m.context = c.Dim
	}
	if o.MaxLength > 0 && o.MaxLength != man.MaxLength {
		if o.MaxLength > cfg.MaxPositionEmbeddings {
			return nil, fmt.Errorf("%s: max length %d exceeds the model's max_position_embeddings %d", spec.Name, o.MaxLength, cfg.MaxPositionEmbeddings)
		}
		m.maxLen = o.MaxLength
	}
	if m.backend == "" {
		m.backend, m.auto = backendFor(md, m.output, m.context > 0), true
	}
	if err := m.checkBackend(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", spec.Name, dir, err)
	}
	if m.tok, err = tokenizer.Load(filepath.Join(dir, model.TokenizerFile)); err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	if p := man.PairPrompt; p != nil {
		m.prompt = &prompt{p: p, prefix: m.tok.IDs(p.Prefix), suffix: m.tok.IDs(p.Suffix)}
	}
	return m, nil
}

// prompt is a model.PairPrompt with its fixed parts tokenised once.
type prompt struct {
	p              *model.PairPrompt
	prefix, suffix []int64
}

// withDefaults fills o's unset fields from d, then from the per-field rules.
func (o Options) withDefaults(d Options) Options {
	for _, f := range []struct{ v, d *int }{
		{&o.IntraOpThreads, &d.IntraOpThreads}, {&o.InterOpThreads, &d.InterOpThreads},
		{&o.Workers, &d.Workers}, {&o.BatchSize, &d.BatchSize}, {&o.BatchTokens, &d.BatchTokens},
	} {
		if *f.v <= 0 {
			*f.v = max(0, *f.d)
		}
	}
	if o.Workers == 0 {
		intra := o.IntraOpThreads
		if intra == 0 {
			intra = runtime.NumCPU()
		}
		o.Workers = max(1, runtime.NumCPU()/intra)
	}
	if o.BatchSize == 0 {
		o.BatchSize = 32
	}
	if o.BatchTokens == 0 {
		o.BatchTokens = 1024
	}
	if o.Backend == "" {
		o.Backend = d.Backend
	}
	return o
}

// Manifest is the model's manifest (do not modify it).
func (m *Model) Manifest() *model.Manifest { return m.dir.Manifest }

// Tokenizer is the model's tokenizer (for splitting texts into windows;
// Run tokenises by itself).
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Config is the model's config.json (do not modify it).
func (m *Model) Config() *model.Config { return m.dir.Config }

// Path is the model directory.
func (m *Model) Path() string { return m.dir.Path }

// MaxLength is the token limit inputs are truncated to.
func (m *Model) MaxLength() int { return m.maxLen }

// Backend is the backend that runs the graph (BackendORT or BackendGo).
func (m *Model) Backend() string { return m.backend }

// checkBackend refuses a backend that this build or this model cannot run.
func (m *Model) checkBackend() error {
	switch m.backend {
	case BackendORT:
		if !ort.Built {
			return fmt.Errorf("backend %s: %w; use backend %s", BackendORT, ort.ErrNotBuilt, BackendGo)
		}
		return nil
	case BackendGo:
		return goSupports(m.dir, m.output, m.context > 0)
	default:
		return fmt.Errorf("unknown backend %q (want %s or %s)", m.backend, BackendORT, BackendGo)
	}
}

// Close waits for running calls and frees the session, if one was created,
// and the tokenizer.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.ready != nil {
		<-m.ready // a creation a cancelled Run left running
	}
	var err error
	if m.sess != nil {
		err = m.sess.close()
	}
	return errors.Join(err, m.tok.Close())
}

// session creates the backend's runner (an ONNX Runtime session, or the
// Go model read from the graph) once, in a goroutine of its own started by
// the first call, and waits for it or for ctx: creating an ONNX Runtime
// session takes up to a second or two and does not look at a context, so
// a cancelled caller returns at once while the creation finishes in the
// background for the next caller (or for Close to free). Callers hold
// m.mu for reading, so Close cannot run meanwhile.
func (m *Model) session(ctx context.Context) (runner, error) {
	m.once.Do(func() {
		m.ready = make(chan struct{})
		go func() {
			defer close(m.ready)
			start := time.Now()
			var r runner
			err := safe.Call(func() (err error) {
				switch {
				case m.newRunner != nil:
					r, err = m.newRunner(m)
				case m.backend == BackendGo:
					if r, err = newGoRunner(m); err != nil && m.auto && ort.Built {
						r, err = newORTRunner(m)
					}
				default:
					r, err = newORTRunner(m)
				}
				return err
			})
			if err != nil {
				m.sessErr = fmt.Errorf("%s: %w", m.spec.Name, err)
				return
			}
			m.sess = r
			m.stats.sessions.Add(1)
			m.stats.session.Store(int64(time.Since(start)))
		}()
	})
	select {
	case <-m.ready:
		return m.sess, m.sessErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Inputs are what a Run tokenises: Texts[i] alone, or the pair
// (First(i), Texts[i]) when First is set ([CLS] first [SEP] text [SEP],
// truncated longest-first; for a decoder reranker, the manifest's
// PairPrompt filled with the pair, its body cut from the right).
type Inputs struct {
	Texts []string
	First func(i int) string
	// Prepare, when set, rewrites single text i's token ids (special
	// tokens included, EOS last) into the ids the graph takes: the papers'
	// decoder embedders place a Causal2Vec contextual token's placeholder
	// or append AutoRegEmbed's instruction and memory tokens. Texts are
	// tokenised Reserve tokens under the max length, so what Prepare adds
	// fits.
	Prepare func(i int, ids []int64) []int64
	Reserve int
	// Context feeds a Causal2Vec graph (model.PoolingCausal2Vec), which
	// requires it: Context[i] is the paired encoder's vector of input i.
	Context [][]float32
}

// Batch is one padded batch as run. Rows are the indices of its inputs,
// one per row, Seq its padded length and Mask its attention mask
// [len(Rows) × Seq]. Out is the model's output, row-major: the hidden
// states [len(Rows) × Seq × dim] for task embed, the pooled embeddings
// [len(Rows) × dim] for task embed with a trained pooling head
// (model.IsHeadPooling), the logits [len(Rows) × num_labels] for task
// rerank.
type Batch struct {
	Rows []int
	Seq  int
	Mask []int64
	Out  []float32
}

// Run tokenises in, runs it through the model in batches sorted by token
// length and calls done with each batch's output. Batches run on up to
// Workers goroutines, so done is called concurrently, each time for other
// rows. The first error stops the rest and is returned: ctx's error as it
// is, others prefixed with the Spec's Name.
func (m *Model) Run(ctx context.Context, in Inputs, done func(Batch) error) error {
	ctx = safe.Ctx(ctx)
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return fmt.Errorf("%s: %w", m.spec.Name, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := len(in.Texts)
	if n == 0 {
		return nil
	}
	sess, err := m.session(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	defer func() { m.stats.total.Add(int64(time.Since(start))) }()
	if m.context > 0 {
		if len(in.Context) != n || in.Prepare == nil {
			return fmt.Errorf("%s: %s is a Causal2Vec model: each text needs its context vector (%d for %d texts) and its contextual token's placeholder", m.spec.Name, m.dir.Path, len(in.Context), n)
		}
		for i, v := range in.Context {
			if len(v) != m.context {
				return fmt.Errorf("%s: context vector %d has %d values, the model takes %d", m.spec.Name, i, len(v), m.context)
			}
		}
	}
	encode := func(lo, hi int) []tokenizer.Encoding {
		if in.Prepare != nil {
			encs := m.tok.EncodeBatch(in.Texts[lo:hi], max(m.maxLen-in.Reserve, 1))
			for j, e := range encs {
				ids := in.Prepare(lo+j, e.IDs)
				encs[j] = tokenizer.Encoding{IDs: ids, TypeIDs: make([]int64, len(ids)), Mask: make([]int64, len(ids))}
				for k := range ids {
					encs[j].Mask[k] = 1
				}
			}
			return encs
		}
		if in.First == nil {
			return m.tok.EncodeBatch(in.Texts[lo:hi], m.maxLen)
		}
		encs := make([]tokenizer.Encoding, hi-lo)
		for i := range encs {
			if p := m.prompt; p != nil { // a decoder reranker: one text through its prompt
				encs[i] = m.tok.EncodePrompt(p.prefix, p.p.Fill(in.First(lo+i), in.Texts[lo+i]), p.suffix, m.maxLen)
				continue
			}
			encs[i] = m.tok.EncodePair(in.First(lo+i), in.Texts[lo+i], m.maxLen)
		}
		return encs
	}
	err = forEachBatch(ctx, n, m.spec.Window, m.batch, m.workers, encode, func(rows []int, encs []tokenizer.Encoding) error {
		var ctxRows []float32
		if m.context > 0 {
			ctxRows = make([]float32, 0, len(rows)*m.context)
			for _, i := range rows {
				ctxRows = append(ctxRows, in.Context[i]...)
			}
		}
		out, mask, seq, err := m.runBatch(sess, encs, ctxRows)
		if err != nil {
			return err
		}
		return done(Batch{Rows: rows, Seq: seq, Mask: mask, Out: out})
	})
	if err != nil {
		return err
	}
	m.stats.inputs.Add(int64(n))
	return nil
}

// Plan tokenises texts as Run does single texts (at the max length) and
// returns their encodings and the batches Run cuts them into (indices into
// texts, a batch's inputs in the order Run pads them), all in one window:
// what a benchmark needs to run the same batches through a forward of its
// own (benchmarks' EncoderRoofline).
func (m *Model) Plan(texts []string) ([]tokenizer.Encoding, [][]int) {
	encs := m.tok.EncodeBatch(texts, m.maxLen)
	order := byLength(encs)
	cut := m.batch.cuts(encs, order)
	batches := make([][]int, len(cut)-1)
	for b := range batches {
		batches[b] = order[cut[b]:cut[b+1]]
	}
	return encs, batches
}

// batching is where Run cuts its length-sorted inputs: a batch takes at
// most size inputs and tokens padded tokens, and at least one input; an
// input of even tokens or more (even > 0) starts a new batch unless the
// input before it has its length.
type batching struct{ size, tokens, even int }

// unpaddedFrom is Run's batching.even: texts this long or longer go in
// batches of one length, which need no padding — all of them, so that a
// text's output is the same bits alone or in any batch. In ONNX Runtime a
// padded batch runs the masked attention kernel, an unpadded one the flash
// kernel (model/onnx's fusedLayer), whose float32 sums differ in the last
// bits; an int8 graph quantizes a row's activations to the nearest step,
// so such a difference could move a value a whole step: 34 of 120 SciFact
// texts embedded by MiniLM int8 in padded batches differed from
// themselves alone by more than 1e-6 (up to 0.012), none in batches of one
// length (2026-12-06, ONNX Runtime 1.24). It costs no speed: MiniLM int8
// on 1,500 SQuAD questions 1.82 against 1.92 CPU-s padded, on 646 SQuAD
// paragraphs 10.3–10.8 against 11.1–11.4 (same day, shared 2-core
// machine). Before, only texts of 128 tokens or more went unpadded:
// bge-small over 200 SciFact abstracts (Python ONNX Runtime 1.24, one
// thread, CPU seconds; float32 / int8): padded batches 36.6 / 17.6, one
// length from 256 tokens 34.0 / 15.7, from 128 33.6 / 15.3, from 64
// 33.6 / 15.6, always 33.7 / 15.7.
const unpaddedFrom = 1

// cuts returns the batch boundaries of encs, sorted by token count through
// order: batch b is order[cut[b]:cut[b+1]].
func (c batching) cuts(encs []tokenizer.Encoding, order []int) []int {
	cut := []int{0}
	for i := range order {
		lo := cut[len(cut)-1]
		// Sorted ascending, so input i is the longest of the batch it joins.
		l := len(encs[order[i]].IDs)
		if n := i - lo + 1; i > lo && (n > c.size || n*l > c.tokens || c.even > 0 && l >= c.even && l != len(encs[order[i-1]].IDs)) {
			cut = append(cut, i)
		}
	}
	return append(cut, len(order))
}

// byLength is the order of encs by token count, stable.
func byLength(encs []tokenizer.Encoding) []int {
	order := make([]int, len(encs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(encs[order[a]].IDs) < len(encs[order[b]].IDs) })
	return order
}

// forEachBatch is Run's schedule, apart from the model: inputs [0, n) are
// tokenised by encode a window at a time (window <= 0: all at once),
// stably sorted by token count within the window and cut into batches by
// c, which run (rows: input indices; encs: their encodings, in row order)
// on up to workers goroutines. The first error stops the rest.
func forEachBatch(ctx context.Context, n, window int, c batching, workers int, encode func(lo, hi int) []tokenizer.Encoding, run func(rows []int, encs []tokenizer.Encoding) error) error {
	if window <= 0 {
		window = n
	}
	for lo := 0; lo < n; lo += window {
		hi := min(lo+window, n)
		encs := encode(lo, hi)
		order := byLength(encs)
		cut := c.cuts(encs, order)
		err := parallel.Each(ctx, len(cut)-1, workers, func(b int) error {
			local := order[cut[b]:cut[b+1]]
			rows := make([]int, len(local))
			batch := make([]tokenizer.Encoding, len(local))
			for j, i := range local {
				rows[j], batch[j] = lo+i, encs[i]
			}
			return run(rows, batch)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runBatch pads encs, runs them and returns the output with the mask and
// padded length it was run with, counting the work.
func (m *Model) runBatch(sess runner, encs []tokenizer.Encoding, ctxRows []float32) (out []float32, mask []int64, seq int, err error) {
	ids, types, mask, seq := tokenizer.Pad(encs, m.tok.PadID())
	c := &m.stats
	c.runStarted()
	out, err = sess.run(ids, mask, types, len(encs), seq, ctxRows)
	c.runEnded()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s: %s: running model on batch [%d %d]: %w", m.spec.Name, m.dir.Path, len(encs), seq, err)
	}
	c.batches.Add(1)
	c.padded.Add(int64(len(ids)))
	var real int64
	for _, v := range mask {
		real += v
	}
	c.tokens.Add(real)
	c.flops.Add(int64(m.dir.Config.ForwardFLOPs(len(encs), seq)))
	return out, mask, seq, nil
}

// Stats are cumulative counters of a Model's work, for benchmarks. The
// layout is encoder.Stats', which is converted from it and documents the
// fields; Texts counts inputs (texts or pairs) of successful Runs, and
// TotalTime (time inside Runs) excludes SessionTime, the session's
// creation.
type Stats struct {
	Texts, Batches, Tokens, PaddedTokens int64
	FLOPs                                float64
	RunTime, TotalTime, SessionTime      time.Duration
}

// Stats returns the counters since Open.
func (m *Model) Stats() Stats {
	c := &m.stats
	return Stats{
		Texts: c.inputs.Load(), Batches: c.batches.Load(), Tokens: c.tokens.Load(), PaddedTokens: c.padded.Load(),
		FLOPs: float64(c.flops.Load()), RunTime: time.Duration(c.run.Load()), TotalTime: time.Duration(c.total.Load()),
		SessionTime: time.Duration(c.session.Load()),
	}
}

// Sessions is how many sessions (ONNX Runtime sessions, or Go models read
// from the graph) m has created: 0 before the first Run with an input,
// then 1.
func (m *Model) Sessions() int64 { return m.stats.sessions.Load() }

type counters struct {
	inputs, batches, tokens, padded, flops, run, total, sessions, session atomic.Int64

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
