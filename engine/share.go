package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/anna-search/anna/engine/internal/share"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
	"github.com/anna-search/anna/model"
)

// Sharing a directory between processes (package doc, "Read-only and
// sharing"). bbolt's file lock admits one writer or any number of readers,
// so the process that has a directory open for writing answers the reads
// of read-only opens elsewhere: on a Unix socket in the directory,
// DIR/anna.sock (mode 0600), by HTTP with JSON bodies. Both ends are this
// package; the protocol is internal (shareProto versions it) and small:
// one POST /v1/METHOD per read method. The transport (the socket, the
// requests and the envelope of their answers) is engine/internal/share's;
// what the methods are and carry, and the errors' meaning, are here.

const (
	sockFile   = share.SockFile
	shareProto = 1
	// writerWait bounds how long a writable Open waits for the read-only
	// opens that hold the lock to close.
	writerWait = 10 * time.Second
	lockPoll   = 50 * time.Millisecond
)

// Variables only so that tests can shorten them (share_export_test.go).
var (
	// readerWait bounds how long a read-only Open waits while the lock is
	// held and nothing answers on the socket: a writer between taking the
	// lock and listening, or between closing the socket and releasing the
	// lock (both brief), a stopped one, or one that does not share
	// (Options.NoShare).
	readerWait = 5 * time.Second
	// helloTimeout bounds the first exchange with a writer, which answers
	// it at once unless stopped.
	helloTimeout = 5 * time.Second
)

// errGone: the writer a read-only engine read through has closed the
// directory or died; the call is retried on whatever holds it now.
var errGone = share.ErrGone

// lockStore opens anna.db under bbolt's file lock. Who waits for whom (the
// package doc's invariants): a read-only open that finds the directory
// locked reads through the writer that answers on its socket (it sets
// e.via and returns a nil store), waiting up to readerWait for one to
// answer; a writable open fails at once when another writer answers, and
// waits up to writerWait for read-only opens to close.
func (e *Engine) lockStore(ctx context.Context, path string, opts Options) (*storage.Store, error) {
	if e.opts.ReadOnly && opts.NoShare {
		if why := heldHere(e.dir, true, false); why != "" {
			return nil, &openHereError{dir: e.dir, how: why}
		}
		st, err := openShared(e.dir, path, 0)
		if err != nil {
			return nil, e.storeError(err)
		}
		return st, nil
	}
	start, logged := time.Now(), false
	release, turnstile := func() {}, false // a writer's hold on the turnstile (turnstile_unix.go)
	defer func() { release() }()
	for {
		if why := heldHere(e.dir, e.opts.ReadOnly, true); why != "" {
			return nil, &openHereError{dir: e.dir, how: why}
		}
		if !e.opts.ReadOnly && !turnstile {
			release, turnstile = takeTurnstile(e.dir)
		}
		var st *storage.Store
		var err error
		if e.opts.ReadOnly {
			st, err = openShared(e.dir, path, -1)
		} else {
			st, err = storage.Open(path, storage.Options{Create: true, LockWait: -1})
		}
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, storage.ErrLocked) {
			return nil, e.storeError(err)
		}
		c, derr := dial(ctx, e.dir, e.logf)
		switch {
		case derr == nil && e.opts.ReadOnly:
			if err := e.readThrough(c, opts); err != nil {
				c.close()
				return nil, err
			}
			return nil, nil
		case derr == nil && opts.WriteThrough && c.hello.PID != os.Getpid():
			if err := e.readThrough(c, opts); err != nil {
				c.close()
				return nil, err
			}
			return nil, nil
		case derr == nil:
			c.close()
			if c.hello.PID == os.Getpid() {
				return nil, &openHereError{dir: e.dir, how: "for writing"}
			}
			return nil, fmt.Errorf("engine: %s: %w: process %d has it open for writing", e.dir, ErrLocked, c.hello.PID)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("engine: %s: %w", e.dir, ctx.Err())
		case !errors.Is(derr, errGone):
			return nil, fmt.Errorf("engine: %s: %w: %w", e.dir, ErrLocked, derr)
		}
		limit := writerWait
		if e.opts.ReadOnly {
			limit = readerWait
			if errors.Is(err, errWriterWaiting) {
				limit += writerWait // the writer first, then through it
			}
		}
		if time.Since(start) >= limit {
			if e.opts.ReadOnly {
				return nil, fmt.Errorf("engine: %s: %w: for %v, a process has had it open for writing without answering on %s (one opened with Options.NoShare, or by an older anna)", e.dir, ErrLocked, limit, sockFile)
			}
			return nil, fmt.Errorf("engine: %s: %w: for %v, read-only opens (searches, stats or checks: a read-only Engine) or a writer that does not answer on %s have held it; open it for writing once they close", e.dir, ErrLocked, limit, sockFile)
		}
		if !logged && !e.opts.ReadOnly {
			e.logf("%s: waiting up to %v for the read-only opens holding it to close", e.dir, limit)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("engine: %s: %w (waiting for its lock)", e.dir, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// errWriterWaiting: a writer holds the turnstile, waiting for anna.db's
// lock; a reader leaves the lock to it (it is ErrLocked).
var errWriterWaiting = fmt.Errorf("%w: a writer is waiting for it", storage.ErrLocked)

// openShared opens anna.db read-only, under bbolt's shared lock, unless a
// writer waits for the lock (errWriterWaiting): every read-only open of
// the store goes through here, so that a writer gets the lock in bounded
// time however many readers come and go (turnstile_unix.go). lockWait is
// storage.Options.LockWait.
func openShared(dir, path string, lockWait time.Duration) (*storage.Store, error) {
	if writerWaiting(dir) {
		return nil, fmt.Errorf("storage: open %s: %w", path, errWriterWaiting)
	}
	return storage.Open(path, storage.Options{ReadOnly: true, LockWait: lockWait})
}

// openHere is the engine's one package-level state: the directories this
// process has open. bbolt's lock is held per open file, so a second open of
// a directory in the same process excludes the first as another process's
// would; openHere lets Open say what happened instead of waiting and
// blaming another process. Engines enter it once they hold the lock and
// leave it on Close; those that read through a writer hold no lock and are
// not in it.
var openHere struct {
	sync.Mutex
	dirs []*heldDir
}

type heldDir struct {
	fi      os.FileInfo // the directory (os.SameFile)
	writer  bool
	shared  bool    // the writer answers on its socket
	eng     *Engine // the writer, once its Open has succeeded (Check runs in it)
	readers int     // read-only engines holding bbolt's shared lock
}

// opened enters e, open for writing, as its directory's writer for Check.
func (e *Engine) opened() {
	fi, err := os.Stat(e.dir)
	if err != nil {
		return
	}
	openHere.Lock()
	defer openHere.Unlock()
	for _, h := range openHere.dirs {
		if h.writer && os.SameFile(h.fi, fi) {
			h.eng = e
		}
	}
}

// writerHere is the engine of this process that has dir open for
// writing, nil when none has.
func writerHere(dir string) *Engine {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil
	}
	openHere.Lock()
	defer openHere.Unlock()
	for _, h := range openHere.dirs {
		if h.writer && h.eng != nil && os.SameFile(h.fi, fi) {
			return h.eng
		}
	}
	return nil
}

// heldHere says why this process's own engines keep an open of dir out:
// "for writing" or "read-only" ("" when nothing does). A read-only open
// that may read through a writer (through) reads through this process's
// own like any other, unless that one does not share.
func heldHere(dir string, readOnly, through bool) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	openHere.Lock()
	defer openHere.Unlock()
	for _, h := range openHere.dirs {
		switch {
		case !os.SameFile(h.fi, fi):
		case h.writer && (!readOnly || !through || !h.shared):
			return "for writing"
		case h.readers > 0 && !readOnly:
			return "read-only"
		}
	}
	return ""
}

// holdHere enters dir in openHere; the function returned takes it out.
func holdHere(dir string, writer, shared bool) func() error {
	fi, err := os.Stat(dir)
	if err != nil {
		return func() error { return nil }
	}
	openHere.Lock()
	defer openHere.Unlock()
	var h *heldDir
	for _, x := range openHere.dirs {
		if os.SameFile(x.fi, fi) {
			h = x
		}
	}
	if h == nil {
		h = &heldDir{fi: fi}
		openHere.dirs = append(openHere.dirs, h)
	}
	if writer {
		h.writer, h.shared = true, shared
	} else {
		h.readers++
	}
	return func() error {
		openHere.Lock()
		defer openHere.Unlock()
		if writer {
			h.writer, h.shared, h.eng = false, false, nil
		} else {
			h.readers--
		}
		if !h.writer && h.readers == 0 {
			for i, x := range openHere.dirs {
				if x == h {
					openHere.dirs = append(openHere.dirs[:i], openHere.dirs[i+1:]...)
					break
				}
			}
		}
		return nil
	}
}

// openHereError: the directory is open in this process already. It is
// ErrLocked for errors.Is, without blaming another process.
type openHereError struct{ dir, how string }

func (o *openHereError) Error() string {
	return fmt.Sprintf("engine: %s is already open %s in this process: use that Engine, or Close it first", o.dir, o.how)
}

func (o *openHereError) Is(target error) bool { return target == ErrLocked }

// --- the writer's side ---

// server answers the reads of other processes' read-only opens.
type server = share.Server

// serve makes e, just opened for writing (it holds the lock), answer on
// DIR/anna.sock. A socket that cannot be made is not an error: read-only
// opens elsewhere then fail with ErrLocked while e is open, as the log
// says: serve returns nil.
func (e *Engine) serve() *server {
	s, ln, err := share.Listen(e.dir, wireCodec{}, ErrClosed)
	if err != nil {
		e.logf("%s: read-only opens in other processes will fail while this engine has it open: %v", e.dir, err)
		return nil
	}
	s.HandleFunc("hello", func(w http.ResponseWriter, r *http.Request) { e.hello(s, w, r) })
	share.Handle(s, "search", func(ctx context.Context, r searchReq) ([]Result, error) {
		return e.Search(ctx, r.Query, r.Opts)
	})
	share.Handle(s, "retrieve", e.retrieveFor)
	share.Handle(s, "snippets", e.snippetsFor)
	share.Handle(s, "get", func(ctx context.Context, r getReq) ([]Document, error) {
		return e.Get(ctx, r.IDs...)
	})
	share.Handle(s, "vectors", func(ctx context.Context, r getReq) (vectorsResp, error) {
		if len(r.IDs) != 1 {
			return vectorsResp{}, fmt.Errorf("engine: vectors: want one ID, got %d", len(r.IDs))
		}
		v, ok, err := e.Teacher().Vectors(r.IDs[0])
		return vectorsResp{Vectors: v, Found: ok}, err
	})
	share.Handle(s, "stats", func(ctx context.Context, _ struct{}) (Stats, error) {
		return e.Stats()
	})
	share.Handle(s, "lexical-scores", func(ctx context.Context, r scoresReq) ([]float64, error) {
		return e.Teacher().LexicalScores(ctx, r.Query, r.Docs)
	})
	share.Handle(s, "unknown-keys", func(ctx context.Context, r keysReq) ([]string, error) {
		return e.UnknownKeys(r.Filter)
	})
	share.Handle(s, "metadata-keys", func(ctx context.Context, r keysReq) ([]MetadataKey, error) {
		return e.MetadataKeys(ctx, r.Top)
	})
	// Writes of engines opened with Options.WriteThrough.
	share.Handle(s, "add", func(ctx context.Context, r addReq) (AddResult, error) {
		return e.Apply(ctx, r.Docs, r.Deletes)
	})
	share.Handle(s, "delete", func(ctx context.Context, r getReq) (int, error) {
		return e.Delete(ctx, r.IDs)
	})
	share.Handle(s, "ids", func(ctx context.Context, _ struct{}) ([]string, error) {
		return e.Teacher().IDs(ctx)
	})
	share.Handle(s, "check", func(ctx context.Context, _ struct{}) (*Report, error) {
		return e.checkLive(ctx)
	})
	s.Serve(ln)
	e.closers = append(e.closers, s.Close)
	return s
}

// hello answers at once, telling whether the writer is still opening the
// directory, unless asked to wait until it has.
func (e *Engine) hello(s *server, w http.ResponseWriter, r *http.Request) {
	var req helloReq
	if !s.Decode(w, r, &req) {
		return
	}
	h := helloResp{Proto: shareProto, PID: os.Getpid()}
	ready, closed := s.Ready()
	if closed {
		s.Reply(w, nil, ErrClosed)
		return
	}
	if !ready && req.Wait {
		if err := s.Wait(r.Context()); err != nil {
			s.Reply(w, nil, err)
			return
		}
		ready = true
	}
	if ready {
		st, err := e.Stats()
		if err != nil {
			s.Reply(w, nil, err)
			return
		}
		e.mu.RLock()
		h.Bound = e.cur.bound
		e.mu.RUnlock()
		h.Ready, h.Model, h.Chunking, h.Backend = true, st.Model, st.Chunking, st.Backend
	}
	s.Reply(w, h, nil)
}

// retrieveFor is a reranking search's first half for a reader that
// reranks itself: the retrieval lists and their fusion, as Search makes
// them before reranking.
func (e *Engine) retrieveFor(ctx context.Context, r searchReq) (retrieveResp, error) {
	opts := r.Opts
	if err := opts.validate(); err != nil {
		return retrieveResp{}, err
	}
	if err := e.enter(); err != nil {
		return retrieveResp{}, err
	}
	defer e.leave()
	opts.Fusion = e.fusionFor(opts)
	base := opts
	if opts.Mode == ModeRerank && opts.RerankOf != "" && opts.RerankOf != ModeHybrid {
		base.Mode, base.K = opts.RerankOf, max(opts.K, opts.RerankDepth)
		base.Depth = max(base.Depth, base.K)
	}
	got, err := e.search(ctx, r.Query, base)
	if err != nil {
		return retrieveResp{}, err
	}
	return retrieveResp{Lists: got.lists, Fused: got.fused, Passage: got.passage, Fusion: opts.Fusion}, nil
}

// snippetsFor attaches snippets to a reader's reranked results.
func (e *Engine) snippetsFor(ctx context.Context, r snippetsReq) ([]Result, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.snippets(ctx, r.Query, r.Results, r.Passage, r.Size); err != nil {
		return nil, err
	}
	return r.Results, nil
}

// --- the wire ---

type (
	helloReq  struct{ Wait bool }
	helloResp struct {
		Proto    int
		PID      int
		Ready    bool // the writer has finished opening; the fields below are set
		Model    Model
		Chunking Chunking
		Bound    bool
		Backend  string
	}
	searchReq struct {
		Query string
		Opts  SearchOptions
	}
	retrieveResp struct {
		Lists   []fusion.List
		Fused   []fusion.Result
		Passage map[string]int
		Fusion  Fusion
	}
	snippetsReq struct {
		Query   string
		Results []Result
		Passage map[string]int
		Size    int
	}
	getReq      struct{ IDs []string }
	vectorsResp struct {
		Vectors [][]float32
		Found   bool
	}
	scoresReq struct {
		Query string
		Docs  []Document
	}
	keysReq struct {
		Filter Filter
		Top    int
	}
	addReq struct {
		Docs    []Document
		Deletes []string
	}
)

// wireError carries an error across: its message, the sentinels it wraps
// and the typed errors callers look for with errors.As.
type wireError struct {
	Message       string
	Is            []string            `json:",omitempty"`
	Option        *OptionError        `json:",omitempty"`
	Recovery      *RecoveryError      `json:",omitempty"`
	ModelNotFound *ModelNotFoundError `json:",omitempty"`
	Mismatch      *ModelMismatchError `json:",omitempty"`
	Hints         []hint.Action       `json:",omitempty"`
}

var wireSentinels = []struct {
	name string
	err  error
}{
	{"closed", ErrClosed}, {"read-only", ErrReadOnly}, {"empty-query", ErrEmptyQuery},
	{"empty-id", ErrEmptyID}, {"empty-document", ErrEmptyDocument}, {"invalid-option", ErrInvalidOption},
	{"not-index", ErrNotIndex}, {"locked", ErrLocked}, {"damaged", ErrDamaged},
	{"needs-recovery", ErrNeedsRecovery}, {"unsupported", ErrUnsupported}, {"model-not-found", ErrModelNotFound},
	{"canceled", context.Canceled}, {"deadline", context.DeadlineExceeded},
}

func toWire(err error) *wireError {
	w := &wireError{Message: err.Error()}
	for _, s := range wireSentinels {
		if errors.Is(err, s.err) {
			w.Is = append(w.Is, s.name)
		}
	}
	errors.As(err, &w.Option)
	errors.As(err, &w.Recovery)
	errors.As(err, &w.ModelNotFound)
	errors.As(err, &w.Mismatch)
	w.Hints = hint.Of(err)
	return w
}

// remoteError is an error the writer returned, as errors.Is and errors.As
// see it there.
type remoteError struct {
	msg     string
	wrapped []error
}

func (r *remoteError) Error() string   { return r.msg }
func (r *remoteError) Unwrap() []error { return r.wrapped }

func (w *wireError) err() error {
	r := &remoteError{msg: w.Message}
	for _, name := range w.Is {
		if name == "closed" {
			return fmt.Errorf("%w (%s)", errGone, w.Message)
		}
		for _, s := range wireSentinels {
			if s.name == name {
				r.wrapped = append(r.wrapped, s.err)
			}
		}
	}
	for _, typed := range []error{w.Option, w.Recovery, w.ModelNotFound, w.Mismatch} {
		if typed != nil && !isNilPtr(typed) {
			r.wrapped = append(r.wrapped, typed)
		}
	}
	if len(w.Hints) > 0 {
		r.wrapped = append(r.wrapped, &hint.Error{Err: errors.New(w.Message), Actions: w.Hints})
	}
	return r
}

// wireCodec carries the engine's errors across the socket as wireErrors.
type wireCodec struct{}

func (wireCodec) Encode(err error) any { return toWire(err) }

func (wireCodec) Decode(raw json.RawMessage) error {
	var w wireError
	if err := json.Unmarshal(raw, &w); err != nil {
		return fmt.Errorf("%w: %v", errGone, err)
	}
	return w.err()
}

func isNilPtr(err error) bool {
	switch p := err.(type) {
	case *OptionError:
		return p == nil
	case *RecoveryError:
		return p == nil
	case *ModelNotFoundError:
		return p == nil
	case *ModelMismatchError:
		return p == nil
	}
	return false
}

// --- the reader's side ---

// Writer reports the process that has dir open for writing and answers
// other processes on its socket (annactl serve or index, a program's
// Engine), and the model it embeds with, recorded in dir or not yet: what
// an Open with Options.WriteThrough would write through. pid is 0 when no
// process answers (none has dir open for writing, or one with NoShare).
func Writer(ctx context.Context, dir string) (pid int, m Model, err error) {
	ctx = safe.Ctx(ctx)
	if _, err := os.Stat(filepath.Join(dir, sockFile)); err != nil {
		return 0, Model{}, nil
	}
	c, err := dial(ctx, dir, func(string, ...any) {})
	if errors.Is(err, errGone) {
		return 0, Model{}, nil
	}
	if err != nil {
		return 0, Model{}, err
	}
	defer c.close()
	return c.hello.PID, c.hello.Model, nil
}

// writerModel is RecordedModel of a directory whose lock is held: the
// model the process writing it answers with, or, when none answers, what
// the store says once the lock is free (as long as a read-only Open
// waits).
func writerModel(dir string) (Model, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readerWait+writerWait)
	defer cancel()
	for {
		c, err := dial(ctx, dir, func(string, ...any) {})
		if err == nil {
			c.close()
			if !c.hello.Bound {
				return Model{}, nil
			}
			return c.hello.Model, nil
		}
		st, serr := openShared(dir, filepath.Join(dir, storeFile), lockPoll)
		if serr == nil {
			defer st.Close()
			return recordedModel(st)
		}
		if !errors.Is(serr, storage.ErrLocked) || ctx.Err() != nil {
			return Model{}, fmt.Errorf("engine: %w", serr)
		}
		if errors.Is(serr, errWriterWaiting) {
			time.Sleep(lockPoll)
		}
	}
}

// client talks to the writer of a directory.
type client struct {
	*share.Client
	hello helloResp
}

// dial reaches the writer answering on dir's socket and says hello,
// waiting (logging why) while it is still opening the directory. An error
// wrapping errGone means nothing answers there (no socket, or a stale one
// of a writer that died).
func dial(ctx context.Context, dir string, logf func(string, ...any)) (*client, error) {
	sc, err := share.Dial(dir, wireCodec{})
	if err != nil {
		return nil, err
	}
	c := &client{Client: sc}
	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	err = c.call(hctx, "hello", helloReq{}, &c.hello)
	cancel()
	if err != nil {
		c.close()
		if hctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: no answer on %s within %v", errGone, sockFile, helloTimeout)
		}
		return nil, err
	}
	c.PID = c.hello.PID
	if c.hello.Proto != shareProto {
		c.close()
		return nil, fmt.Errorf("process %d, which has it open for writing, speaks protocol %d on %s, this anna %d (another anna version)", c.hello.PID, c.hello.Proto, sockFile, shareProto)
	}
	if !c.hello.Ready {
		logf("%s: process %d is opening it for writing; waiting for it", dir, c.hello.PID)
		if err := c.call(ctx, "hello", helloReq{Wait: true}, &c.hello); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

func (c *client) close() { c.Close() }

// call posts in to the writer's method and decodes its answer into out.
// Errors wrapping errGone mean the writer is no longer there.
func (c *client) call(ctx context.Context, method string, in, out any) error {
	return c.Call(ctx, method, in, out)
}

// readThrough makes e, a read-only open of a directory another process
// has open for writing, read through that process (c), or, opened for
// writing with Options.WriteThrough, write through it too. The model
// checks are Open's, made against the writer's model without loading one.
func (e *Engine) readThrough(c *client, opts Options) error {
	h := c.hello
	if opts.Encoder != nil || opts.Model != "" {
		fp, name := "", ""
		if opts.Encoder != nil {
			fp, name = opts.Encoder.Fingerprint(), modelName(opts.Encoder, opts.Model, opts.Encoder.Fingerprint())
		} else {
			man, err := model.LoadManifest(opts.Model)
			if err != nil {
				return fmt.Errorf("engine: loading the model: %w", err)
			}
			fp, name = man.Fingerprint, man.Name
		}
		// A writer embeds with its model even before the directory is
		// bound to it: what this engine would add is embedded with it.
		if (h.Bound || !e.opts.ReadOnly) && fp != h.Model.Fingerprint {
			if !h.Bound {
				return fmt.Errorf("engine: %s: %w: process %d has it open for writing and embeds with %s; this open asks for %s: open it without a model (the writer's is used), or once that process has closed it", e.dir, ErrLocked, h.PID, h.Model.Label(), modelLabel(name, fp))
			}
			mm := &ModelMismatchError{Dir: e.dir, Index: h.Model.Fingerprint, IndexName: h.Model.Name, Model: fp, ModelName: name}
			if !e.opts.ReadOnly {
				return fmt.Errorf("%w (process %d has it open for writing: open it without a model to write through it, or stop that process first to reindex)", mm, h.PID)
			}
			return mm
		}
	}
	if h.Bound && opts.Chunking != (Chunking{}) && opts.Chunking != h.Chunking {
		return hint.Wrap(optErr("Options.Chunking", opts.Chunking.String(), fmt.Sprintf("%s was indexed with chunking %s; Reindex changes it", e.dir, h.Chunking)),
			hint.Action{Kind: hint.Reindex, Index: e.dir, Option: "chunking", Value: opts.Chunking.String()})
	}
	if remote := strings.HasPrefix(h.Backend, "weaviate"); remote != (opts.Weaviate != nil) {
		want := "its own indexes"
		if opts.Weaviate != nil {
			want = "Weaviate"
		}
		return fmt.Errorf("engine: %s: %w: process %d has it open for writing with backend %s, and this read-only open asks for %s", e.dir, ErrLocked, h.PID, h.Backend, want)
	}
	e.mu.Lock()
	e.cur.model, e.cur.chunking, e.cur.bound, e.cur.enc = h.Model, h.Chunking, h.Bound, opts.Encoder
	e.mu.Unlock()
	e.via = &via{dir: e.dir, opts: opts, logf: e.logf, c: c}
	e.closers = append(e.closers, e.via.close)
	how := "reading"
	if !e.opts.ReadOnly {
		how = "writing"
	}
	e.logf("%s: process %d has it open for writing; %s through it", e.dir, h.PID, how)
	return nil
}

// via answers a read-only engine's reads through the process that has its
// directory open for writing; once that process has closed it (or died),
// through whatever Open finds then: the next writer, or the directory
// itself opened read-only (inner).
type via struct {
	dir   string
	opts  Options
	logf  func(string, ...any)
	mu    sync.Mutex // guards c and inner; held while reopening
	c     *client
	inner *Engine
}

// do runs remote against the writer, or local against inner once the
// directory is read directly, reopening when the writer goes away.
func (v *via) do(ctx context.Context, remote func(*client) error, local func(*Engine) error) error {
	var err error
	for range 3 {
		c, in, terr := v.target(ctx)
		if terr != nil {
			return terr
		}
		if in != nil {
			return local(in)
		}
		if err = remote(c); !errors.Is(err, errGone) {
			return err
		}
		v.drop(c)
	}
	return fmt.Errorf("engine: %s: %w", v.dir, err)
}

func (v *via) target(ctx context.Context) (*client, *Engine, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.inner != nil || v.c != nil {
		return v.c, v.inner, nil
	}
	ne, err := Open(ctx, v.dir, v.opts)
	if err != nil {
		return nil, nil, err
	}
	if ne.via == nil {
		v.logf("%s: the process that had it open for writing has closed it; reading it directly", v.dir)
		v.inner = ne
		return nil, ne, nil
	}
	ne.via.mu.Lock()
	v.c, ne.via.c = ne.via.c, nil
	ne.via.mu.Unlock()
	ne.Close()
	return v.c, nil, nil
}

// drop forgets c, which no longer answers.
func (v *via) drop(c *client) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.c == c {
		v.c = nil
		c.close()
	}
}

func (v *via) close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.c != nil {
		v.c.close()
		v.c = nil
	}
	if v.inner != nil {
		err := v.inner.Close()
		v.inner = nil
		return err
	}
	return nil
}

// search is Search through the writer. A reranking search retrieves
// there and reranks here, with this engine's Reranker.
func (v *via) search(ctx context.Context, e *Engine, query string, opts SearchOptions) ([]Result, error) {
	if opts.EfSearch == 0 {
		opts.EfSearch = e.opts.HNSW.EfSearch
	}
	var out []Result
	err := v.do(ctx, func(c *client) error {
		if opts.Mode != ModeRerank {
			return c.call(ctx, "search", searchReq{Query: query, Opts: opts}, &out)
		}
		var r retrieveResp
		if err := c.call(ctx, "retrieve", searchReq{Query: query, Opts: opts}, &r); err != nil {
			return err
		}
		o := opts
		o.Fusion, o.Snippets = r.Fusion, false
		res, err := e.finish(ctx, query, retrieved{lists: r.Lists, fused: r.Fused, passage: r.Passage}, o)
		if err != nil || !opts.Snippets {
			out = res
			return err
		}
		return c.call(ctx, "snippets", snippetsReq{Query: query, Results: res, Passage: r.Passage, Size: opts.SnippetSize}, &out)
	}, func(in *Engine) (err error) {
		out, err = in.Search(ctx, query, opts)
		return err
	})
	return out, err
}

func (v *via) get(ctx context.Context, ids []string) ([]Document, error) {
	var out []Document
	err := v.do(ctx, func(c *client) error {
		return c.call(ctx, "get", getReq{IDs: ids}, &out)
	}, func(in *Engine) (err error) {
		out, err = in.Get(ctx, ids...)
		return err
	})
	return out, err
}

// docs serves docsByID (reranking's texts and the results' documents).
func (v *via) docs(ids []string) (map[string]storage.Doc, error) {
	got, err := v.get(context.Background(), ids)
	if err != nil {
		return nil, err
	}
	m := make(map[string]storage.Doc, len(got))
	for _, d := range got {
		m[d.ID] = storage.Doc(d)
	}
	return m, nil
}

func (v *via) vectors(id string) ([][]float32, bool, error) {
	ctx := context.Background()
	var out vectorsResp
	err := v.do(ctx, func(c *client) error {
		return c.call(ctx, "vectors", getReq{IDs: []string{id}}, &out)
	}, func(in *Engine) (err error) {
		out.Vectors, out.Found, err = in.Teacher().Vectors(id)
		return err
	})
	return out.Vectors, out.Found, err
}

func (v *via) lexicalScores(ctx context.Context, query string, docs []Document) ([]float64, error) {
	var out []float64
	err := v.do(ctx, func(c *client) error {
		return c.call(ctx, "lexical-scores", scoresReq{Query: query, Docs: docs}, &out)
	}, func(in *Engine) (err error) {
		out, err = in.Teacher().LexicalScores(ctx, query, docs)
		return err
	})
	return out, err
}

// stats is Stats through the writer: its counts and model, with this
// engine's own Dir, ReadOnly, Reranker and Warnings, and WriterPID.
func (v *via) stats(e *Engine) (Stats, error) {
	ctx := context.Background()
	var st Stats
	err := v.do(ctx, func(c *client) error {
		if err := c.call(ctx, "stats", struct{}{}, &st); err != nil {
			return err
		}
		st.WriterPID, st.Warnings = c.hello.PID, e.Warnings()
		return nil
	}, func(in *Engine) (err error) {
		st, err = in.Stats()
		return err
	})
	if err != nil {
		return Stats{}, err
	}
	st.Dir, st.ReadOnly, st.Reranker = e.dir, e.opts.ReadOnly, e.opts.Reranker != nil
	e.mu.Lock()
	e.cur.model, e.cur.chunking = st.Model, st.Chunking
	e.mu.Unlock()
	return st, nil
}

// viaCall is method's call through the writer (req its request), or
// local's once the directory is read (or written) here.
func viaCall[T any](ctx context.Context, v *via, method string, req any, local func(*Engine) (T, error)) (T, error) {
	var out T
	err := v.do(ctx, func(c *client) error {
		return c.call(ctx, method, req, &out)
	}, func(in *Engine) (err error) {
		out, err = local(in)
		return err
	})
	return out, err
}

func (v *via) unknownKeys(ctx context.Context, f Filter) ([]string, error) {
	return viaCall(ctx, v, "unknown-keys", keysReq{Filter: f}, func(in *Engine) ([]string, error) { return in.UnknownKeys(f) })
}

func (v *via) metadataKeys(ctx context.Context, top int) ([]MetadataKey, error) {
	return viaCall(ctx, v, "metadata-keys", keysReq{Top: top}, func(in *Engine) ([]MetadataKey, error) { return in.MetadataKeys(ctx, top) })
}

// apply is Apply (and Add) through the writer (Options.WriteThrough). A
// writer that goes away mid-call is asked again, or the directory opened
// here: applying a batch twice stores it once.
func (v *via) apply(ctx context.Context, docs []Document, deletes []string) (AddResult, error) {
	return viaCall(ctx, v, "add", addReq{Docs: docs, Deletes: deletes}, func(in *Engine) (AddResult, error) { return in.Apply(ctx, docs, deletes) })
}

// documents is Documents through the writer: its IDs, then their
// documents a chunk at a time, so that no answer holds the whole store.
func (v *via) documents(ctx context.Context, fn func(Document) error) error {
	ids, err := v.ids(ctx)
	if err != nil {
		return err
	}
	const chunk = 256
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		docs, err := v.get(ctx, part)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if err := fn(d); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v *via) delete(ctx context.Context, ids []string) (int, error) {
	return viaCall(ctx, v, "delete", getReq{IDs: ids}, func(in *Engine) (int, error) { return in.Delete(ctx, ids) })
}

func (v *via) ids(ctx context.Context) ([]string, error) {
	return viaCall(ctx, v, "ids", struct{}{}, func(in *Engine) ([]string, error) { return in.Teacher().IDs(ctx) })
}

// writerOnly is the error of a call an engine writing through another
// process cannot make there.
func (v *via) writerOnly(what string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.inner != nil {
		return nil
	}
	pid := 0
	if v.c != nil {
		pid = v.c.hello.PID
	}
	return fmt.Errorf("engine: %s: %w: process %d has it open for writing, and this engine writes through it (Options.WriteThrough: adds and deletes only); %s once that process has closed it", v.dir, ErrLocked, pid, what)
}
