package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/clip"
	"github.com/anna-search/anna/rerank"
)

// Limits bound what one request may ask. Zero fields take the defaults.
type Limits struct {
	MaxBodyBytes   int64 // request body (default 16 MiB)
	MaxBatch       int   // documents per POST /v1/documents (default 1024)
	MaxInputs      int   // texts per /v1/embeddings, documents per /v1/rerank (default 2048, OpenAI's)
	MaxK           int   // k and top_n (default 1000)
	MaxQueryBytes  int   // query length in bytes (default 16 KiB)
	MaxSnippetSize int   // snippet_size (default 4096)
	// MaxTextBytes bounds one text: an embeddings input, a rerank
	// document, a document's title and text together (default 1 MiB).
	MaxTextBytes int
	// MaxBodyBytesInFlight bounds the bodies of the requests being
	// answered at once, in bytes (default MaxBodyBytes and 4 MiB: one
	// body of the largest size and small ones beside it); a request that
	// does not fit waits its turn (inflight.go).
	MaxBodyBytesInFlight int64
	// MaxRequestTokens bounds the model tokens one request may cost,
	// counted before any model work: embeddings inputs as the model reads
	// them (truncated to its window), rerank pairs as the reranker reads
	// them, documents' texts up to what the engine embeds of each
	// (default 300,000, OpenAI's limit of one embeddings request; some 30
	// s of MiniLM on two cores).
	MaxRequestTokens int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 16 << 20
	}
	if l.MaxBatch <= 0 {
		l.MaxBatch = 1024
	}
	if l.MaxInputs <= 0 {
		l.MaxInputs = 2048
	}
	if l.MaxK <= 0 {
		l.MaxK = 1000
	}
	if l.MaxQueryBytes <= 0 {
		l.MaxQueryBytes = 16 << 10
	}
	if l.MaxSnippetSize <= 0 {
		l.MaxSnippetSize = 4096
	}
	if l.MaxBodyBytesInFlight <= 0 {
		l.MaxBodyBytesInFlight = l.MaxBodyBytes + 4<<20
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = 1 << 20
	}
	if l.MaxRequestTokens <= 0 {
		l.MaxRequestTokens = 300_000
	}
	return l
}

// Options configure a Server. The zero value serves reads and writes with
// no key, the default limits and a 30 s timeout.
type Options struct {
	// APIKey, when set, is required of every request but GET /healthz, GET / and
	// GET /openapi.json (Authorization: Bearer KEY, or X-API-Key: KEY).
	APIKey string
	// ReadOnly refuses POST and DELETE /v1/documents (403, read_only).
	ReadOnly bool
	Limits   Limits
	// Timeout bounds each request (default 30 s; negative: none).
	Timeout time.Duration
	// Reranker serves /v1/rerank (and should be the engine's
	// Options.Reranker, for mode rerank); nil: the rerank routes answer 400 "unsupported" (a 5xx would be retried by clients).
	Reranker rerank.Reranker
	// RerankerName is the reranker's name in /v1/rerank answers.
	RerankerName string
	// RerankFusion is the default of a search's rerank_fusion: how the
	// reranker was measured to help.
	RerankFusion bool
	// BatchWait is how long the embedding and rerank batchers wait after
	// a request for others to join its batch (default 2 ms; negative: no
	// wait, but requests queued meanwhile still join).
	BatchWait time.Duration
	// BatchTexts and BatchTokens bound one coalesced batch (defaults 256
	// texts, 16384 tokens): texts and their tokens for embeddings,
	// (query, document) pairs and their tokens for rerank (counted when the
	// reranker has PairTokens, as rerank.Model does); a single
	// request larger than them runs alone.
	BatchTexts, BatchTokens int
	// MCPWrites offers the add and delete tools on /mcp (not with
	// ReadOnly).
	MCPWrites bool
	// Version is the server's version in the MCP handshake.
	Version string
	// StrictModel refuses a request that names a model other than the one
	// served (404 model_not_found), in every dialect. Unset, the server
	// answers any model name with the one model it has (the clients'
	// examples name OpenAI's, Cohere's or Ollama's models), logging each
	// new name once through Logf.
	StrictModel bool
	// Logf, when set, receives what the server does on its own (a
	// handler's panic, a batch's failure, a model name answered by
	// another).
	Logf func(format string, args ...any)
	// AllowedHosts are the names, besides loopback names and IP
	// addresses, that a request's Host may give (DNS rebinding; see
	// desktop.go): the name the server is reached by, when it is not
	// loopback. annactl serve adds its --listen host.
	AllowedHosts []string
	// CORS lists the origins (scheme://host[:port]) whose web pages may
	// call the server from a browser, "*" for any; none by default, and
	// then a browser page of another origin can neither write nor read.
	CORS []string
	// HintText, when set, renders the actions an error answer suggests
	// (its "hint", package hint) for the people who run the server:
	// annactl serve names its flags. Unset: the actions' words.
	HintText func(hint.Action) string
}

// Server is the http.Handler of one engine. Close it before the engine.
type Server struct {
	eng     *engine.Engine
	opts    Options
	lim     Limits
	mux     *http.ServeMux
	handler http.Handler // mux behind guard (desktop.go) and the body budget (inflight.go)
	bodies  *bodyBudget
	freeing atomic.Bool // returnMemory is running
	keyHash [32]byte
	metrics *metrics

	embedMu  sync.Mutex // guards embedder and tokens, started on first use
	embedder *batcher[embedJob]
	tokens   *tokenCounter

	rerankB *batcher[rerankJob]

	namesMu     sync.Mutex
	namesLogged map[string]bool // model names asked for and logged (noteModel)

	mcp *mcp.StreamableHTTPHandler // /mcp
	// streams ends the long-lived GET /mcp streams when the http.Server
	// shuts down (Serve), so that they do not hold it for the grace period.
	streams     context.Context
	stopStreams context.CancelFunc

	closeOnce sync.Once
	base      context.Context
	cancel    context.CancelFunc
}

// New returns the handler of eng. It starts the batchers' goroutines;
// Close stops them.
func New(eng *engine.Engine, opts Options) (*Server, error) {
	if eng == nil {
		return nil, errors.New("server: nil engine")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.BatchWait == 0 {
		opts.BatchWait = 2 * time.Millisecond
	}
	if opts.BatchTexts <= 0 {
		opts.BatchTexts = 256
	}
	if opts.BatchTokens <= 0 {
		opts.BatchTokens = 16384
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s := &Server{eng: eng, opts: opts, lim: opts.Limits.withDefaults(), mux: http.NewServeMux()}
	if opts.APIKey != "" {
		s.keyHash = sha256.Sum256([]byte(opts.APIKey))
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.metrics = newMetrics(eng)
	s.rerankB = newBatcher(s.base, opts.BatchWait, opts.BatchTexts, opts.BatchTokens, s.runRerank, s.metrics.batchObserver("rerank"))
	s.streams, s.stopStreams = context.WithCancel(s.base)
	m := NewMCP(eng, MCPOptions{AllowWrites: opts.MCPWrites && !opts.ReadOnly, Reranker: opts.Reranker != nil, RerankFusion: opts.RerankFusion,
		Limits: opts.Limits, Timeout: opts.Timeout, Version: opts.Version, HintText: opts.HintText})
	// Sessions idle for 30 minutes are closed; the tool calls keep the
	// server's timeout (the handler's requests do not: a session's GET
	// stream lasts as long as the session).
	s.mcp = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m },
		&mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute, MaxRequestBodyBytes: s.lim.MaxBodyBytes})
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, s.wrap(rt))
	}
	s.mux.Handle("/", s.wrap(route{pattern: "/", name: "unknown", public: true, methods: map[string]http.HandlerFunc{}}))
	s.bodies = &bodyBudget{size: s.lim.MaxBodyBytesInFlight}
	s.handler = s.guard(s.withBodyBudget(s.mux))
	return s, nil
}

// Close stops the batchers (a request still waiting on one fails with
// unavailable) and frees the tokenizer. It does not close the engine.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.stopStreams()
		s.rerankB.waitDone()
		s.embedMu.Lock()
		defer s.embedMu.Unlock()
		if s.embedder != nil {
			s.embedder.waitDone()
		}
		s.tokens.close()
	})
	return nil
}

// ServeHTTP answers one request: the route's, once guard (desktop.go) has
// let it through.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// route is one path of the API with its handlers by method.
type route struct {
	pattern string // a net/http pattern without method
	name    string // the metrics label
	public  bool   // its GET served without the API key
	write   bool   // refused by ReadOnly (its non-GET methods)
	// stream: its GET is a stream that lasts (the MCP session's), run
	// without Options.Timeout.
	stream bool
	// plainErrors answers errors as {"error": MESSAGE, "error_type": CODE},
	// the shape of Ollama and text-embeddings-inference, whose clients
	// read a string there.
	plainErrors bool
	methods     map[string]http.HandlerFunc
}

// routes is the API; TestOpenAPIMatchesRoutes checks openapi.json
// against it.
func (s *Server) routes() []route {
	return []route{
		{pattern: "/v1/search", name: "search", methods: map[string]http.HandlerFunc{"POST": s.search}},
		{pattern: "/v1/documents", name: "documents", write: true, methods: map[string]http.HandlerFunc{"POST": s.addDocuments}},
		{pattern: "/v1/documents/{id}", name: "document", write: true, methods: map[string]http.HandlerFunc{"GET": s.getDocument, "DELETE": s.deleteDocument}},
		{pattern: "/v1/stats", name: "stats", methods: map[string]http.HandlerFunc{"GET": s.stats}},
		{pattern: "/v1/metadata", name: "metadata", methods: map[string]http.HandlerFunc{"GET": s.metadata}},
		{pattern: "/v1/embeddings", name: "embeddings", methods: map[string]http.HandlerFunc{"POST": s.embeddings}},
		{pattern: "/v1/models", name: "models", methods: map[string]http.HandlerFunc{"GET": s.models}},
		{pattern: "/v1/models/{id}", name: "model", methods: map[string]http.HandlerFunc{"GET": s.model}},
		{pattern: "/v1/rerank", name: "rerank", methods: map[string]http.HandlerFunc{"POST": s.rerank}},
		{pattern: "/v1/embed", name: "cohere_embed", methods: map[string]http.HandlerFunc{"POST": s.cohereEmbedV1}},
		{pattern: "/v2/embed", name: "cohere_embed_v2", methods: map[string]http.HandlerFunc{"POST": s.cohereEmbedV2}},
		{pattern: "/v2/rerank", name: "cohere_rerank_v2", methods: map[string]http.HandlerFunc{"POST": s.cohereRerankV2}},
		{pattern: "/embed", name: "tei_embed", plainErrors: true, methods: map[string]http.HandlerFunc{"POST": s.teiEmbed}},
		{pattern: "/rerank", name: "tei_rerank", plainErrors: true, methods: map[string]http.HandlerFunc{"POST": s.teiRerank}},
		{pattern: "/info", name: "tei_info", plainErrors: true, methods: map[string]http.HandlerFunc{"GET": s.teiInfo}},
		{pattern: "/api/embed", name: "ollama_embed", plainErrors: true, methods: map[string]http.HandlerFunc{"POST": s.ollamaEmbed}},
		{pattern: "/api/embeddings", name: "ollama_embeddings", plainErrors: true, methods: map[string]http.HandlerFunc{"POST": s.ollamaEmbeddings}},
		{pattern: "/api/tags", name: "ollama_tags", plainErrors: true, methods: map[string]http.HandlerFunc{"GET": s.ollamaTags}},
		{pattern: "/mcp", name: "mcp", stream: true, methods: map[string]http.HandlerFunc{"GET": s.serveMCP, "POST": s.serveMCP, "DELETE": s.serveMCP}},
		{pattern: "/healthz", name: "healthz", public: true, methods: map[string]http.HandlerFunc{"GET": s.healthz}},
		{pattern: "/metrics", name: "metrics", methods: map[string]http.HandlerFunc{"GET": s.metrics.serve}},
		{pattern: "/openapi.json", name: "openapi", public: true, methods: map[string]http.HandlerFunc{"GET": serveOpenAPI}},
		// POST / is text-embeddings-inference's: what huggingface_hub's
		// InferenceClient(model=URL).feature_extraction posts to.
		{pattern: "/{$}", name: "page", public: true, plainErrors: true, methods: map[string]http.HandlerFunc{"GET": servePage, "POST": s.teiRoot}},
	}
}

// wrap adds what every route shares: the method check, the key, the
// read-only switch, the body limit, the timeout, panics, metrics.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, plain: rt.plainErrors}
		defer func() {
			if p := recover(); p != nil {
				s.opts.Logf("serve: %s %s panicked: %v", r.Method, r.URL.Path, p)
				if !sw.wrote {
					s.writeError(sw, errorf(http.StatusInternalServerError, "internal", "internal error: %v", p))
				}
			}
			s.metrics.observe(rt.name, r.Method, sw.status(), time.Since(start))
		}()
		h, ok := rt.methods[r.Method]
		if r.Method == http.MethodHead {
			h, ok = rt.methods[http.MethodGet]
		}
		if !ok {
			if len(rt.methods) == 0 {
				s.writeError(sw, errorf(http.StatusNotFound, "not_found", "no route %s %s (GET /openapi.json lists them)", clip.String(r.Method), clip.String(r.URL.Path)))
				return
			}
			allowed := make([]string, 0, len(rt.methods))
			for _, m := range []string{"GET", "POST", "DELETE"} {
				if rt.methods[m] != nil {
					allowed = append(allowed, m)
				}
			}
			sw.Header().Set("Allow", strings.Join(allowed, ", "))
			s.writeError(sw, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s %s: method not allowed (allowed: %s)", clip.String(r.Method), clip.String(r.URL.Path), strings.Join(allowed, ", ")))
			return
		}
		public := rt.public && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		if !public && s.opts.APIKey != "" && !s.authorized(r) {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="anna"`)
			sw.Header().Set("Connection", "close") // not waiting for the rest of a body nobody will read
			s.writeError(sw, errorf(http.StatusUnauthorized, "unauthorized", "missing or wrong API key (send Authorization: Bearer KEY)"))
			return
		}
		if rt.write && s.opts.ReadOnly && r.Method != http.MethodGet {
			ro := hint.Action{Kind: hint.SetOption, Option: "server.Options.ReadOnly", Value: "unset"}
			s.writeError(sw, errorf(http.StatusForbidden, "read_only", "writes are disabled on this server (to allow them: %s)", s.optionText(ro)).with(ro))
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.lim.MaxBodyBytes)
		ctx := r.Context()
		if s.opts.Timeout > 0 && !(rt.stream && r.Method == http.MethodGet) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
			defer cancel()
		}
		h(sw, r.WithContext(ctx))
	})
}

// serveMCP answers /mcp with the MCP SDK's streamable HTTP handler; a
// session's GET stream ends when the server shuts down.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		r = r.WithContext(ctx)
	}
	ew := &sdkErrors{ResponseWriter: w}
	s.mcp.ServeHTTP(ew, r)
	if ew.code != 0 {
		code := "invalid_request"
		switch ew.code {
		case http.StatusNotFound:
			code = "not_found"
		case http.StatusMethodNotAllowed:
			code = "method_not_allowed"
		case http.StatusRequestEntityTooLarge:
			code = "too_large"
		}
		if ew.code >= 500 {
			code = "internal"
		}
		w.Header().Del("Content-Type")
		s.writeError(w, errorf(ew.code, code, "%s", strings.TrimSpace(string(ew.msg))))
	}
}

// sdkErrors holds back the MCP SDK's plain-text error answers (its
// http.Error: "Accept must contain both 'application/json' and
// 'text/event-stream'") so that serveMCP answers them in the server's JSON
// error shape, like every other route's; everything else passes through.
type sdkErrors struct {
	http.ResponseWriter
	code int    // a plain-text error's status, written by serveMCP
	msg  []byte // its message, at most maxErrorMessage bytes
}

func (w *sdkErrors) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.code = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sdkErrors) Write(b []byte) (int, error) {
	if w.code == 0 {
		return w.ResponseWriter.Write(b)
	}
	w.msg = append(w.msg, b[:min(len(b), max(0, maxErrorMessage-len(w.msg)))]...)
	return len(b), nil
}

// Flush and Unwrap keep the SDK's event streams flowing.
func (w *sdkErrors) Flush() {
	if w.code == 0 {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *sdkErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// shutdown ends the streams that would hold an http.Server's Shutdown
// (GET /mcp): Serve calls it when shutting down.
func (s *Server) shutdown() { s.stopStreams() }

// authorized reports whether r carries the API key; the hashes are
// compared in constant time (their length is fixed, so the key's length
// does not leak either).
func (s *Server) authorized(r *http.Request) bool {
	got := r.Header.Get("X-API-Key")
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, ok := strings.Cut(a, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return false
		}
		got = strings.TrimSpace(tok)
	}
	h := sha256.Sum256([]byte(got))
	return got != "" && subtle.ConstantTimeCompare(h[:], s.keyHash[:]) == 1
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.base.Err() != nil {
		s.writeError(w, errorf(http.StatusServiceUnavailable, "unavailable", "the server is shutting down"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// statusWriter remembers the status written, for metrics and panics.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
	plain bool // the route's errors are {"error": MESSAGE} (route.plainErrors)
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// apiError is an error answer: status, stable code, message.
type apiError struct {
	status  int
	code    string
	message string
	hints   []hint.Action // what the user can do: the answer's "hint"
}

func (e *apiError) Error() string        { return e.message }
func (e *apiError) Hints() []hint.Action { return e.hints }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// with attaches actions to e.
func (e *apiError) with(actions ...hint.Action) *apiError {
	e.hints = actions
	return e
}

// errorBody is the JSON of an error answer, in the shape OpenAI's clients
// read (error.message; type is OpenAI's coarse class; hint, when the
// error carries one, what the user can do).
type errorBody struct {
	Error struct {
		Code    string      `json:"code"`
		Message string      `json:"message"`
		Type    string      `json:"type"`
		Hint    []hintEntry `json:"hint,omitempty"`
	} `json:"error"`
}

// plainError is the error body of Ollama and text-embeddings-inference.
type plainError struct {
	Error     string      `json:"error"`
	ErrorType string      `json:"error_type"`
	Hint      []hintEntry `json:"hint,omitempty"`
}

// hintEntry is an action of an error's hint in an answer: the action and
// its text (Options.HintText's, else its words).
type hintEntry struct {
	hint.Action
	Text string `json:"text"`
}

// hintText is action a as render says it (Options.HintText,
// MCPOptions.HintText: annactl's command), else in words.
func hintText(render func(hint.Action) string, a hint.Action) string {
	if render != nil {
		if t := render(a); t != "" {
			return t
		}
	}
	return a.String()
}

// hintEntries renders actions for an answer (nil for none).
func (s *Server) hintEntries(actions []hint.Action) []hintEntry {
	var out []hintEntry
	for _, a := range actions {
		out = append(out, hintEntry{Action: a, Text: clip.Bytes(hintText(s.opts.HintText, a), maxErrorMessage)})
	}
	return out
}

// maxErrorMessage bounds an error answer's message: errors quote what was
// wrong by its start (internal/clip), and this is the last guard, so that
// no answer repeats a request's input at length (a 1 MB ID in a URL came
// back in a 1 MB 404).
const maxErrorMessage = 2048

func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	hints := s.hintEntries(e.hints)
	if sw, ok := w.(*statusWriter); ok && sw.plain {
		writeJSON(w, e.status, plainError{Error: clip.Bytes(e.message, maxErrorMessage), ErrorType: e.code, Hint: hints})
		return
	}
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Hint = e.code, clip.Bytes(e.message, maxErrorMessage), hints
	switch {
	case e.status == http.StatusUnauthorized:
		b.Error.Type = "authentication_error"
	case e.status == http.StatusNotFound:
		b.Error.Type = "not_found_error"
	case e.status >= 500:
		b.Error.Type = "server_error"
	default:
		b.Error.Type = "invalid_request_error"
	}
	writeJSON(w, e.status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// fail answers err: an *apiError as it is, an engine error by its kind,
// with the engine's message.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var mbe *http.MaxBytesError
	var mnf *engine.ModelNotFoundError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &mbe):
		ae = errorf(http.StatusRequestEntityTooLarge, "too_large", "request body over %d bytes (the server's limit)", mbe.Limit)
	case errors.Is(err, engine.ErrInvalidOption), errors.Is(err, engine.ErrEmptyQuery), errors.Is(err, engine.ErrEmptyID), errors.Is(err, engine.ErrEmptyDocument),
		errors.Is(err, engine.ErrInvalidDocument):
		ae = &apiError{status: http.StatusBadRequest, code: "invalid_request", message: err.Error()}
	case errors.Is(err, engine.ErrReadOnly):
		ae = &apiError{status: http.StatusForbidden, code: "read_only", message: err.Error()}
	case errors.As(err, &mnf), errors.Is(err, engine.ErrLocked), errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrNeedsRecovery):
		ae = &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: err.Error()}
	case errors.Is(err, engine.ErrUnsupported):
		ae = &apiError{status: http.StatusNotImplemented, code: "unsupported", message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		ae = &apiError{status: http.StatusGatewayTimeout, code: "timeout", message: fmt.Sprintf("timed out after %s: %v", s.opts.Timeout, err)}
	case errors.Is(err, context.Canceled) && s.base.Err() != nil:
		ae = &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: "the server is shutting down"}
	case errors.Is(err, context.Canceled):
		// The client went away: nobody reads this.
		ae = &apiError{status: 499, code: "canceled", message: err.Error()}
	default:
		ae = &apiError{status: http.StatusInternalServerError, code: "internal", message: err.Error()}
	}
	if ae.hints == nil {
		if hs := hint.Of(err); hs != nil {
			c := *ae
			c.hints = hs
			ae = &c
		}
	}
	s.writeError(w, ae)
}

// decode reads r's JSON body into v: unknown fields, a wrong type or
// trailing data are errors naming the field.
func decode(r *http.Request, v any) error { return decodeBody(r, v, true) }

// decodeLenient is decode with unknown fields ignored: for the dialects of
// other APIs, whose clients add fields from one version to the next that
// change nothing anna does.
func decodeLenient(r *http.Request, v any) error { return decodeBody(r, v, false) }

func decodeBody(r *http.Request, v any, strict bool) error {
	dec := json.NewDecoder(r.Body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid_request", "invalid JSON: data after the request object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, "invalid_request", "invalid JSON: data after the request object")
	}
	return nil
}

// jsonError turns a decoding error into an answer that names the field.
func jsonError(err error) error {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errorf(http.StatusRequestTimeout, "timeout", "the request body did not arrive in time")
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "invalid_request", "empty request body: want a JSON object")
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return errorf(http.StatusBadRequest, "invalid_request", "invalid JSON: want an object, got %s", te.Value)
		}
		return errorf(http.StatusBadRequest, "invalid_request", "field %q: want %s, got %s", field, jsonType(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, "invalid_request", "invalid JSON at byte %d: %v", se.Offset, err)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errorf(http.StatusBadRequest, "invalid_request", "invalid JSON: %s", msg)
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int64", "float64", "float32":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return kind
}
