package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/snippet"
	"github.com/anna-search/anna/internal/storage"
	"github.com/anna-search/anna/lang"
)

// Files of an engine directory.
const (
	storeFile   = "anna.db"
	lexicalDir  = "lexical"
	denseFile   = "dense.hnsw"
	damagedMark = ".damaged-" // Repair moves a damaged store aside as anna.db.damaged-<time>
)

// State keys kept in anna.db. The model keys are written together with the
// first documents (so a directory that holds none is bound to no model) and
// changed together by Reindex. The fingerprint binds the directory to its
// model; the directory and name only say where to look first and what to
// call it (directories indexed before names were recorded have none).
const (
	stateFingerprint   = "model.fingerprint"
	stateDim           = "model.dim"
	stateModelDir      = "model.dir"
	stateModelName     = "model.name"     // the manifest's name
	stateReindexTarget = "reindex.target" // fingerprint a running Reindex writes vectors for
	stateChunking      = "model.chunking" // how long documents are split (Chunking.String)
)

// Options configure Open. The zero value is usable: it opens the directory
// for writing with the model recorded in it, or the default model installed
// by `go run github.com/anna-search/anna/cmd/anna-env setup` — in the form
// annactl index and annactl embed use too (home.DefaultEmbedModel:
// all-MiniLM-L6-v2-int8), so that a directory indexed by either gives the
// same vectors.
type Options struct {
	// Model is a model directory, or the name of an installed model
	// (under $ANNA_HOME/models, as `annactl models list` shows them and
	// annactl's --model takes them: "bge-small-en-v1.5-int8"); a path, or
	// a directory that exists where it is named, wins over a name. ""
	// means the model recorded in the directory, else the default model.
	// A directory bound to a model and opened with neither Model nor
	// Encoder loads its model only when it first embeds (see Open).
	Model string
	// Encoder, when set, embeds instead of a model loaded from Model (which
	// is then only recorded, so pass it when Encoder was loaded from it).
	Encoder encoder.Encoder
	// KeepModel, when set, keeps the model a directory binds to (with its
	// first documents, or by Reindex) installed under $ANNA_HOME/models:
	// a model directory is copied in by content (installed.Keep: as
	// `annactl models add DIR`, named NAME-FINGERPRINT) unless a model of
	// its fingerprint is installed already. The directory still records
	// the model directory given; once that moves, is deleted or holds
	// another model, the copy is found by fingerprint (FindModel), so
	// moving or deleting it breaks nothing. `annactl index` and `annactl
	// reindex` set it.
	KeepModel bool
	// EmbeddingCache, when set, is a directory in which embeddings are
	// cached by model fingerprint and text, so that re-indexing the same
	// texts costs no model time.
	EmbeddingCache string
	// Reranker, when set, enables ModeRerank.
	Reranker Reranker
	// ReadOnly opens without writing anything: no file is created or
	// changed, nothing is bound to a model; Add, Delete and Reindex fail
	// with ErrReadOnly. Other read-only opens may run at the same time, and
	// a writer in another process: the engine then reads through it (see
	// the package doc, Read-only and sharing).
	ReadOnly bool
	// NoShare turns off sharing the directory through its writer: opened
	// for writing, the engine answers no other process's read-only opens
	// (it makes no anna.sock), so they fail with ErrLocked while it is
	// open; opened read-only, it never reads through another process and
	// fails with ErrLocked while one has the directory open for writing.
	NoShare bool
	// WriteThrough, opening for writing a directory another process has
	// open for writing and shares (annactl serve, annactl index: any
	// writer without NoShare), writes through that process instead of
	// failing with ErrLocked: Add, Delete, Get, Search, Stats and the
	// Teacher's DeleteExcept and IDs are its, the model and chunking its own (an Options.Model
	// or Encoder of another fingerprint is refused with a
	// ModelMismatchError, bound directory or not); Reindex and SetFusion
	// are refused. Once that process has closed the directory, the engine
	// opens it itself (see the package doc, Read-only and sharing).
	// Without a writer, it changes nothing.
	WriteThrough bool
	// HNSW shapes the dense graph; zero fields take the defaults.
	HNSW HNSW
	// Chunking says how documents longer than the model's window are
	// embedded (the zero value: windows of the model's max length,
	// overlapping by half). It is recorded with the first documents; a
	// directory keeps its chunking (Reindex changes it), and opening it
	// with another non-zero Chunking is refused.
	Chunking Chunking
	// MaxPassages caps the passages one document is embedded as (0:
	// DefaultMaxPassages, 512). A document split into more (see Chunking)
	// is embedded by its first MaxPassages passages: the dense list does
	// not see the text after them (BM25 indexes all of it), and Logf names
	// the document. It is not recorded: it applies to what this engine
	// embeds (Add, Reindex, Repair).
	MaxPassages int
	// EmbedProgress, when set, is told how many passages of the documents
	// being embedded (one Add, or one Reindex batch) are done, out of how
	// many, after every 1,024.
	EmbedProgress func(done, total int)
	// Weaviate, when set, makes a Weaviate collection the retrieval
	// backend instead of the directory's BM25 index and HNSW graph (see
	// Weaviate). HNSW is then unused.
	Weaviate *Weaviate
	// CheckpointChanges bounds what a crash costs the next Open: the
	// dense graph is saved (a checkpoint) once it holds this many changes
	// its saved file lacks, or an eighth of its documents if more (0:
	// DefaultCheckpointChanges; negative: only by Flush and Close). The
	// graph is the one derived index that lives in memory; a crash makes
	// the next Open replay what its file lacks, as many changes as that.
	CheckpointChanges int
	// SearchWorkers is how many goroutines one BM25 search may score on
	// (0: GOMAXPROCS; 1: the calling goroutine alone, for a server whose
	// concurrent queries already keep every core busy). Results do not
	// depend on it. See lexical.Options.
	SearchWorkers int
	// Language is the language of the documents Add is given without one
	// (Document.Language): "" or "auto" detects each one's (package lang;
	// English where detection cannot tell), a code (lang.Parse: "de",
	// "zh") is theirs. It decides how BM25 and the snippets analyse them;
	// a query is analysed for every language the index holds. Not
	// recorded: an index rebuilt from the store detects again what was not
	// given.
	Language string
	// Logf, when set, receives what the engine does on its own: indexes
	// rebuilt or brought up to date on Open, and why.
	Logf func(format string, args ...any)
}

// DefaultCheckpointChanges is Options.CheckpointChanges when 0.
const DefaultCheckpointChanges = 10_000

// HNSW shapes the dense graph. Zero fields take the defaults (M 16,
// EfConstruction 200, EfSearch 64); M and EfConstruction are fixed when the
// graph is built.
type HNSW struct {
	M              int // links per node on the upper layers (2·M on the base layer)
	EfConstruction int // candidate list while inserting
	EfSearch       int // candidate list while searching (at least K is used)
}

// Reranker rescores (query, document) pairs, higher is better; the rerank
// package's cross-encoder implements it.
type Reranker interface {
	Score(ctx context.Context, query string, docs []string) ([]float32, error)
}

// Model describes the model an engine embeds with.
type Model struct {
	Fingerprint string // names the exact vectors: equal fingerprints give equal vectors
	Dir         string // model directory, "" for the default model or an Encoder given alone
	Dim         int
	// Name is the model's manifest name, "" when unknown (an Encoder given
	// alone, or a directory indexed before names were recorded whose model
	// is not where it was).
	Name string
}

// Engine is an open anna directory. It is safe for concurrent use: any
// number of searches run alongside one writer.
type Engine struct {
	dir      string
	opts     Options // as Open was given them, Language parsed (the BM25 index's default); never changed after
	store    *storage.Store
	closers  []func() error // what Open loaded and Close releases
	warnings []string

	life lifetime // held by every call (enter, leave), taken by Close

	be backend // where the lists come from: a *local (the directory's indexes) or a *remote; nil reading through another process

	writeMu sync.Mutex // one writer at a time

	loadMu sync.Mutex // serialises loading the model when first needed (ensureEncoder)

	mu  sync.RWMutex // guards cur and the backend's index (Reindex swaps them together)
	cur snapshot     // the model the engine embeds with, and what goes with it

	hl highlighters // the snippets' highlighter per language (snippets.go)

	// via, when set, reads (and, with Options.WriteThrough, writes)
	// through the process that has dir open for writing: the engine then
	// has no store, backend or model of its own (share.go). A writer's
	// answers to such engines are a closer of its own (serve).
	via *via
}

// lifetime is held for reading by every call and for writing by Close, so
// Close waits for running calls and later calls get ErrClosed.
type lifetime struct {
	sync.RWMutex
	closed bool
}

// snapshot is the model an engine embeds with and what goes with it,
// guarded by Engine.mu: Reindex swaps it together with the backend's
// index, so a search never mixes one model's query with another's vectors.
type snapshot struct {
	enc      encoder.Encoder // nil until first needed when Open did not load the model
	model    Model
	chunking Chunking
	bound    bool         // model recorded in the store (it holds or held documents)
	fusion   FusionChoice // recorded by SetFusion ("" Fusion: none)
}

// highlighters holds the snippets' highlighter per language, made on first
// use.
type highlighters struct {
	mu sync.Mutex // guards m
	m  map[string]*snippet.Highlighter
}

// Open opens the engine directory dir, creating it (unless opts.ReadOnly)
// when it does not exist or is empty.
//
// A directory whose store is missing or empty while indexes derived from it
// are present, or whose store is damaged, is refused with a DamageError:
// nothing is re-created over it (see Check and Repair). Derived indexes
// that are behind the store replay the missing changes; one built from
// another store or ahead of this one (the store lost changes it once had)
// is rebuilt from the store, and Warnings says why. Read-only, the dense
// graph is brought up to date in memory and a BM25 index out of step makes
// lexical searches fail with a RecoveryError.
func Open(ctx context.Context, dir string, opts Options) (_ *Engine, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := opts.HNSW.validate(); err != nil {
		return nil, err
	}
	if err := opts.Chunking.validate(); err != nil {
		return nil, err
	}
	if opts.MaxPassages < 0 {
		return nil, optErr("Options.MaxPassages", opts.MaxPassages, "must be 0 (the default, 512) or positive")
	}
	if opts.SearchWorkers < 0 {
		return nil, optErr("Options.SearchWorkers", opts.SearchWorkers, "must be 0 (the default, GOMAXPROCS) or positive")
	}
	language, lerr := lang.Parse(opts.Language)
	if lerr != nil {
		return nil, optErr("Options.Language", opts.Language, "must be \"\", \"auto\" or a language code such as \"de\"")
	}
	opts.Language = language
	e := &Engine{dir: dir, opts: opts}
	ok := false
	var srv *server // answers other processes' opens once e is open
	defer func() {
		switch {
		case !ok:
			e.release()
		case srv != nil:
			srv.Opened()
			fallthrough
		case !e.opts.ReadOnly:
			e.opened()
		}
	}()
	srv, err = e.openStore(ctx, opts)
	if err != nil {
		return nil, err
	}
	if e.via != nil { // read-only, through the process writing dir
		ok = true
		return e, nil
	}
	if w := e.store.Warning(); w != "" {
		e.warn("anna.db: %s", w)
	}
	if err := e.openModel(ctx, opts); err != nil {
		return nil, err
	}
	if err := e.loadFusion(); err != nil {
		return nil, err
	}
	if !e.opts.ReadOnly {
		if err := e.dropRetiredVectors(); err != nil {
			return nil, err
		}
	}
	if opts.Weaviate != nil {
		if err := e.openRemote(ctx, *opts.Weaviate); err != nil {
			return nil, err
		}
		ok = true
		return e, nil
	}
	l := &local{e: e}
	e.be = l
	if err := l.openLexical(ctx); err != nil {
		return nil, err
	}
	if err := l.openDense(ctx); err != nil {
		return nil, err
	}
	l.checkpoint() // a replay of many changes, or a rebuild, is not done again after another crash
	ok = true
	return e, nil
}

// openStore opens anna.db, refusing to create one beside derived indexes
// (their store is gone) or over an empty file. A read-only open of a
// directory another process has open for writing reads through that
// process instead (e.via, no store: see lockStore); a writable one answers
// other processes' read-only opens unless opts.NoShare (serve), through
// the server it returns (nil when it does not).
func (e *Engine) openStore(ctx context.Context, opts Options) (*server, error) {
	path := filepath.Join(e.dir, storeFile)
	fi, err := os.Stat(path)
	derived := e.derivedPresent()
	switch {
	case errors.Is(err, fs.ErrNotExist) && len(derived) > 0:
		return nil, &DamageError{Dir: e.dir, What: fmt.Sprintf("anna.db is missing, but %s (derived from it) %s present: the documents of this directory are gone", joinAnd(derived), isAre(len(derived))),
			Fix: "restore anna.db from a backup, or repair the directory (Repair) to list what the indexes held and start over with an empty store"}
	case errors.Is(err, fs.ErrNotExist) && e.opts.ReadOnly:
		return nil, hint.Errorf(hint.Action{Kind: hint.AddDocuments, Index: e.dir}, "engine: %s is %w (no anna.db): create it by adding documents (Open it for writing)", e.dir, ErrNotIndex)
	case err == nil && fi.Size() == 0:
		return nil, &DamageError{Dir: e.dir, What: "anna.db is empty (0 bytes): the document store was lost (anna never leaves one empty)",
			Fix: "restore anna.db from a backup, or repair the directory (Repair) to list what the indexes held and start over"}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("engine: %w", err)
	}
	if !e.opts.ReadOnly {
		if err := os.MkdirAll(e.dir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: creating %s: %w", e.dir, err)
		}
	}
	st, err := e.lockStore(ctx, path, opts)
	if err != nil || st == nil { // nil, nil: e reads through the writer
		return nil, err
	}
	e.store = st
	e.closers = append(e.closers, st.Close)
	var srv *server
	if !e.opts.ReadOnly && !opts.NoShare {
		srv = e.serve()
	}
	e.closers = append(e.closers, holdHere(e.dir, !e.opts.ReadOnly, srv != nil))
	return srv, nil
}

// storeError is the engine's error for storage.Open's err.
func (e *Engine) storeError(err error) error {
	switch {
	case errors.Is(err, storage.ErrLocked):
		return fmt.Errorf("engine: %s: %w: %w", e.dir, ErrLocked, err)
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrEmptyFile):
		return &DamageError{Dir: e.dir, What: "anna.db cannot be read", Err: err,
			Fix: "Check names the damage, and Repair salvages every whole record into a new store"}
	}
	return fmt.Errorf("engine: %w", err)
}

// derivedPresent lists the derived indexes found in the directory.
func (e *Engine) derivedPresent() []string {
	var out []string
	if _, err := os.Stat(filepath.Join(e.dir, lexicalDir)); err == nil {
		out = append(out, "the BM25 index (lexical/)")
	}
	if _, err := os.Stat(filepath.Join(e.dir, denseFile)); err == nil {
		out = append(out, "the HNSW graph (dense.hnsw)")
	}
	return out
}

// openModel picks the encoder and checks it against the model recorded in
// the store. A directory bound to a model and opened with neither
// opts.Model nor opts.Encoder takes the recorded model without loading it:
// ensureEncoder loads it when something first embeds, so lexical searches
// and Stats work without the model. A model given explicitly (or the
// default model of an unbound directory) is loaded here, and one of
// another fingerprint than the recorded one is refused here.
func (e *Engine) openModel(ctx context.Context, opts Options) error {
	recorded, err := recordedModel(e.store)
	if err != nil {
		return err
	}
	e.cur.bound = recorded.Fingerprint != ""
	if e.cur.bound && recorded.Name == "" {
		recorded.Name = manifestName(recorded.Dir, recorded.Fingerprint) // indexed before names were recorded
	}
	if e.cur.bound && opts.Encoder == nil && opts.Model == "" {
		e.cur.model = recorded
	} else if err := e.loadModel(ctx, opts, recorded); err != nil {
		return err
	}
	e.cur.chunking = opts.Chunking
	if e.cur.bound {
		raw, err := e.store.State(stateChunking)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		recordedCh := Chunking{Off: true} // directories indexed before documents were split
		if raw != nil {
			if recordedCh, err = parseChunking(string(raw)); err != nil {
				return fmt.Errorf("engine: %s: %w", e.dir, err)
			}
		}
		if opts.Chunking != (Chunking{}) && opts.Chunking != recordedCh {
			return hint.Wrap(optErr("Options.Chunking", opts.Chunking.String(), fmt.Sprintf("%s was indexed with chunking %s; Reindex changes it", e.dir, recordedCh)),
				hint.Action{Kind: hint.Reindex, Index: e.dir, Option: "chunking", Value: opts.Chunking.String()})
		}
		e.cur.chunking = recordedCh
	}
	return nil
}

// loadModel loads the model opts name (opts.Encoder, opts.Model, else the
// default model), refuses one of another fingerprint than a bound
// directory's, and keeps it (opts.KeepModel) in an unbound directory that
// may bind to it.
func (e *Engine) loadModel(ctx context.Context, opts Options, recorded Model) error {
	dir := opts.Model
	if !encoder.IsRemote(dir) {
		d, err := installed.Resolve(home.ModelsDir(), opts.Model)
		if err != nil {
			return hint.Wrap(optErr("Options.Model", opts.Model, err.Error()), hint.Of(err)...)
		}
		dir = d
	}
	e.cur.model.Dir = dir
	enc := opts.Encoder
	if enc == nil {
		if e.cur.model.Dir == "" {
			e.cur.model.Dir = recorded.Dir
		}
		load := e.cur.model.Dir
		if load == "" {
			// The default model, recorded as "" (FindModel looks for it
			// under whichever $ANNA_HOME the directory is opened with).
			var err error
			if load, err = home.RequireDefaultEmbedModel(); err != nil {
				return fmt.Errorf("engine: loading the default model: %w", err)
			}
		}
		var (
			closer func() error
			err    error
		)
		if enc, closer, err = openEncoder(ctx, load); err != nil {
			return fmt.Errorf("engine: loading the model: %w", err)
		}
		e.closers = append(e.closers, closer)
	}
	if opts.EmbeddingCache != "" {
		c, err := encoder.NewCache(enc, opts.EmbeddingCache)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		enc = c
	}
	e.cur.enc = enc
	e.cur.model.Fingerprint, e.cur.model.Dim = enc.Fingerprint(), enc.Dim()
	e.cur.model.Name = modelName(enc, e.cur.model.Dir, e.cur.model.Fingerprint)
	if e.cur.bound && recorded.Fingerprint != e.cur.model.Fingerprint {
		return &ModelMismatchError{Dir: e.dir, Index: recorded.Fingerprint, IndexName: recorded.Name, Model: e.cur.model.Fingerprint, ModelName: e.cur.model.Name}
	}
	if !e.cur.bound && opts.KeepModel && !e.opts.ReadOnly {
		return e.keepModel(ctx, e.cur.model)
	}
	return nil
}

// modelState is what binds the store to the engine's model.
func (e *Engine) modelState(m Model, ch Chunking) map[string][]byte {
	return map[string][]byte{
		stateFingerprint: []byte(m.Fingerprint),
		stateDim:         []byte(strconv.Itoa(m.Dim)),
		stateModelDir:    []byte(m.Dir),
		stateModelName:   []byte(m.Name),
		stateChunking:    []byte(ch.String()),
	}
}

// vecKey is the store key of the current model's vectors.
func (e *Engine) vecKey() string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return vectorKey(e.cur.model.Fingerprint, e.cur.chunking)
}

// Chunking is how the engine embeds long documents.
func (e *Engine) Chunking() Chunking {
	if e == nil {
		return Chunking{}
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cur.chunking
}

func recordedModel(st *storage.Store) (Model, error) {
	var m Model
	for key, dst := range map[string]*string{stateFingerprint: &m.Fingerprint, stateModelDir: &m.Dir, stateModelName: &m.Name} {
		v, err := st.State(key)
		if err != nil {
			return Model{}, fmt.Errorf("engine: reading the recorded model: %w", err)
		}
		*dst = string(v)
	}
	v, err := st.State(stateDim)
	if err != nil {
		return Model{}, fmt.Errorf("engine: reading the recorded model: %w", err)
	}
	m.Dim, _ = strconv.Atoi(string(v))
	return m, nil
}

// RecordedModel returns the model recorded in the engine directory dir (the
// zero Model when the directory holds no documents yet or does not exist),
// without loading it: tools use it to pick the right model before Open. It
// writes nothing.
func RecordedModel(dir string) (Model, error) {
	path := filepath.Join(dir, storeFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return Model{}, nil
	}
	st, err := openShared(dir, path, -1)
	if errors.Is(err, storage.ErrLocked) {
		return writerModel(dir) // another process writes dir (or waits to): it knows
	}
	if err != nil {
		return Model{}, fmt.Errorf("engine: %w", err)
	}
	defer st.Close()
	return recordedModel(st)
}

// dropRetiredVectors removes the vectors of models that are neither the
// current one nor the target of an unfinished Reindex: left behind when a
// Reindex was interrupted after its switch.
func (e *Engine) dropRetiredVectors() error {
	fps, err := e.store.Fingerprints()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	target, err := e.store.State(stateReindexTarget)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	for _, fp := range fps {
		if fp == vectorKey(e.cur.model.Fingerprint, e.cur.chunking) || fp == string(target) || !e.cur.bound {
			continue
		}
		e.logf("dropping the vectors of model %s, retired by a reindex", fp)
		if err := e.store.DeleteVectors(fp); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	return nil
}

// logf tells Options.Logf, when set, what the engine does on its own.
func (e *Engine) logf(format string, args ...any) {
	if e.opts.Logf != nil {
		e.opts.Logf(format, args...)
	}
}

func (e *Engine) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.warnings = append(e.warnings, msg)
	e.logf("%s", msg)
}

// Warnings lists what Open found wrong and dealt with: a damaged meta page
// of the store, an index rebuilt because it was built from another store or
// was ahead of this one (the store lost changes). Nil when all was well.
func (e *Engine) Warnings() []string {
	if e == nil {
		return nil
	}
	return append([]string(nil), e.warnings...)
}

// enter admits a call unless the engine is closed (or nil: a nil *Engine
// is a closed one); leave ends it. Every exported method that can fail
// calls it before it looks at its arguments, so a closed engine answers
// ErrClosed whatever it is asked.
func (e *Engine) enter() error {
	if e == nil {
		return ErrClosed
	}
	e.life.RLock()
	if e.life.closed {
		e.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (e *Engine) leave() { e.life.RUnlock() }

// Flush saves the dense graph if it changed. Documents are durable as soon
// as Add returns; Flush only saves the replay work on the next Open. It is
// a no-op on a read-only engine.
func (e *Engine) Flush() error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	return e.flushLocked()
}

func (e *Engine) flushLocked() error {
	if l := e.local(); l != nil {
		return l.flush()
	}
	return nil
}

// Close saves the dense graph (unless read-only) and closes everything. It
// waits for running calls; later calls fail with ErrClosed. Closing twice
// is harmless, and so is closing a nil *Engine (which every other method
// treats as a closed one).
func (e *Engine) Close() error {
	if e == nil {
		return nil
	}
	e.life.Lock()
	defer e.life.Unlock()
	if e.life.closed {
		return nil
	}
	e.life.closed = true
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	err := e.flushLocked()
	return errors.Join(err, e.release())
}

// release closes what Open opened, last opened first.
func (e *Engine) release() error {
	var errs []error
	if l := e.local(); l != nil {
		errs = append(errs, l.close())
	}
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// Dir is the engine's directory.
func (e *Engine) Dir() string {
	if e == nil {
		return ""
	}
	return e.dir
}

// Model is the model the engine embeds with.
func (e *Engine) Model() Model {
	if e == nil {
		return Model{}
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cur.model
}

// Encoder is the encoder the engine embeds with (for tools that embed
// queries or documents the same way), loading the model if it is not
// loaded yet; nil when it cannot be loaded (Teacher().LoadEncoder says why) or the
// engine is closed.
func (e *Engine) Encoder() encoder.Encoder {
	enc, _ := e.Teacher().LoadEncoder(context.Background())
	return enc
}

func (h HNSW) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"HNSW.M", h.M}, {"HNSW.EfConstruction", h.EfConstruction}, {"HNSW.EfSearch", h.EfSearch}} {
		if f.v < 0 {
			return optErr("Options."+f.name, f.v, "must be 0 (the default) or positive")
		}
	}
	if h.M == 1 {
		return optErr("Options.HNSW.M", h.M, "must be at least 2")
	}
	return nil
}

func (h HNSW) config(dim int) dense.Config {
	return dense.Config{Dim: dim, M: h.M, EfSearch: h.EfSearch, EfConstruction: h.EfConstruction}
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	s := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		s += ", " + p
	}
	return s + " and " + parts[len(parts)-1]
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
