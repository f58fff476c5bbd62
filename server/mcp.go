package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/hint"
)

// MCP: the Model Context Protocol server of an anna directory, with the
// official Go SDK. The same tools over stdio (annactl mcp) and streamable
// HTTP (annactl serve's /mcp, behind the API key): search, get, multi_get
// and status, and add and delete when writes are allowed. Every tool has
// an input and an output schema, answers structured content (and its JSON
// as text, for clients that read only that), and runs under the call's
// context: a client's cancellation, or the session's end, stops the
// engine's work.

// MCPOptions configure an MCP server.
type MCPOptions struct {
	// AllowWrites adds the add and delete tools.
	AllowWrites bool
	// Reranker says the engine has a Reranker: mode rerank is offered.
	Reranker bool
	// RerankFusion is the default of a rerank search's fusion with the
	// retrieval lists (how the reranker was measured to help).
	RerankFusion bool
	// Limits bound what a call may ask (k, query length, documents per
	// add); zero fields take the defaults.
	Limits Limits
	// Timeout bounds each tool call (default 30 s; negative: none).
	Timeout time.Duration
	// Version is the server's version in the MCP handshake.
	Version string
	// HintText, when set, renders the actions a failed call's error
	// suggests (package hint) in the error's text, as Options.HintText
	// does for the HTTP answers; unset: the actions' words.
	HintText func(hint.Action) string
}

// NewMCP returns the MCP server of eng (annactl serve's /mcp).
func NewMCP(eng *engine.Engine, opts MCPOptions) *mcp.Server {
	return newMCP(fixedEngine{eng}, opts)
}

// NewMCPHeld returns the MCP server of the directory open opens, which it
// opens on a tool call and closes once no call has come for hold (annactl
// mcp, which may run for days beside other processes: a read-only engine
// that reads the directory itself holds bbolt's shared lock, which a
// writer in another process waits for). Close the Closer returned when the
// server has stopped.
func NewMCPHeld(open func(ctx context.Context) (*engine.Engine, error), hold time.Duration, opts MCPOptions) (*mcp.Server, *HeldEngine) {
	h := &HeldEngine{open: open, hold: hold}
	return newMCP(h, opts), h
}

// engineRef lends the engine to one tool call.
type engineRef interface {
	acquire(ctx context.Context) (*engine.Engine, func(), error)
}

type fixedEngine struct{ e *engine.Engine }

func (f fixedEngine) acquire(context.Context) (*engine.Engine, func(), error) {
	return f.e, func() {}, nil
}

// HeldEngine is an engine opened when a call needs it and closed once
// calls have stopped coming for a while (NewMCPHeld).
type HeldEngine struct {
	open func(ctx context.Context) (*engine.Engine, error)
	hold time.Duration

	mu     sync.Mutex
	e      *engine.Engine
	refs   int
	timer  *time.Timer
	closed bool
}

func (h *HeldEngine) acquire(ctx context.Context) (*engine.Engine, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, engine.ErrClosed
	}
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.e == nil {
		e, err := h.open(ctx)
		if err != nil {
			return nil, nil, err
		}
		h.e = e
	}
	h.refs++
	e := h.e
	return e, func() { h.release(e) }, nil
}

func (h *HeldEngine) release(e *engine.Engine) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs--
	if h.refs > 0 || h.e != e {
		return
	}
	h.timer = time.AfterFunc(h.hold, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.refs == 0 && h.e == e {
			h.e = nil
			e.Close()
		}
	})
}

// Close closes the engine if it is open; later calls fail.
func (h *HeldEngine) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.e == nil {
		return nil
	}
	e := h.e
	h.e = nil
	return e.Close()
}

// mcpTools holds what the tools share.
type mcpTools struct {
	ref  engineRef
	opts MCPOptions
	lim  Limits
}

// The tools' limits beyond Limits.
const (
	mcpMaxK        = 50      // search results
	mcpMaxGet      = 1 << 20 // bytes of text one get returns
	mcpDefaultGet  = 20000   // ... when max_bytes is not given
	mcpMaxMulti    = 20      // documents one multi_get returns
	mcpDefaultPart = 4000    // bytes of each of them by default
)

const mcpInstructions = `anna searches a local collection of documents (an anna directory: BM25 and embeddings, fused).
Start with search: it returns the best documents with the passage that matched. Read more of a document with get
(by id; a line range or a byte range of a long one), several at once with multi_get. status tells how many documents
there are, the model, and the metadata keys that search's filter can use.`

func newMCP(ref engineRef, opts MCPOptions) *mcp.Server {
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	t := &mcpTools{ref: ref, opts: opts, lim: opts.Limits.withDefaults()}
	version := opts.Version
	if version == "" {
		version = "devel"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "anna", Title: "anna: local hybrid search", Version: version},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	modes := []any{"hybrid", "lexical", "dense"}
	if opts.Reranker {
		modes = append(modes, "rerank")
	}
	searchIn := mcpSchema[MCPSearchInput]()
	searchIn.Properties["mode"].Enum = modes
	setRange(searchIn.Properties["k"], 1, mcpMaxK)
	setRange(searchIn.Properties["snippet_size"], 50, float64(t.lim.MaxSnippetSize))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "search",
		Title: "Search the documents",
		Description: `Search the indexed documents for a query and return the best matches, best first, each with its id, title, score,
metadata and the passage that matched (snippet, with its byte offsets in the document's text). Hybrid search (the default)
finds documents that share the query's words or its meaning; use lexical for exact names, codes and phrases, dense for
paraphrases. Narrow with a metadata filter (the keys are listed by status). Read a hit in full with get.`,
		InputSchema:  searchIn,
		OutputSchema: mcpSchema[MCPSearchResult](),
		Annotations:  readOnly,
	}, hinted(t, t.search))
	getIn := mcpSchema[MCPGetInput]()
	setRange(getIn.Properties["max_bytes"], 1, mcpMaxGet)
	setRange(getIn.Properties["start_line"], 1, 0)
	setRange(getIn.Properties["end_line"], 1, 0)
	setRange(getIn.Properties["offset"], 0, 0)
	mcp.AddTool(s, &mcp.Tool{
		Name:  "get",
		Title: "Read a document",
		Description: `Read one document by id (an id from search): its title, metadata and text, whole or a part of it — a range of
lines (start_line, end_line: 1-based, inclusive) or of bytes (offset, as search's snippet offsets) — at most max_bytes
(default 20000). When more text follows, next_offset says where to go on.`,
		InputSchema:  getIn,
		OutputSchema: mcpSchema[MCPDocument](),
		Annotations:  readOnly,
	}, hinted(t, t.get))
	multiIn := mcpSchema[MCPMultiGetInput]()
	multiIn.Properties["ids"].MaxItems = ptr(mcpMaxMulti)
	multiIn.Properties["ids"].MinItems = ptr(1)
	setRange(multiIn.Properties["max_bytes"], 1, mcpMaxGet)
	mcp.AddTool(s, &mcp.Tool{
		Name:  "multi_get",
		Title: "Read several documents",
		Description: `Read up to 20 documents by id at once: each one's title, metadata and the start of its text (max_bytes each,
default 4000). Ids not found are listed apart.`,
		InputSchema:  multiIn,
		OutputSchema: mcpSchema[MCPMultiGetResult](),
		Annotations:  readOnly,
	}, hinted(t, t.multiGet))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "status",
		Title: "Describe the collection",
		Description: `Describe the collection: how many documents, the embedding model, when it last changed, whether the indexes
are up to date, the search modes offered, and the metadata keys (with their most common values, or the range of
numbers) that search's filter can use.`,
		InputSchema:  mcpSchema[struct{}](),
		OutputSchema: mcpSchema[MCPStatus](),
		Annotations:  readOnly,
	}, hinted(t, t.status))
	if opts.AllowWrites {
		addIn := mcpSchema[MCPAddInput]()
		addIn.Properties["documents"].MaxItems = ptr(t.lim.MaxBatch)
		addIn.Properties["documents"].MinItems = ptr(1)
		addIn.Properties["documents"].Items.Required = []string{"id"}
		mcp.AddTool(s, &mcp.Tool{
			Name:  "add",
			Title: "Add or update documents",
			Description: `Add documents to the collection, or update those whose id is already there (the same id replaces the
document). Each needs an id and a title or text; metadata is an object of strings, numbers or arrays of them. Answered
once the documents are stored and searchable.`,
			InputSchema:  addIn,
			OutputSchema: mcpSchema[MCPAddResult](),
			Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
		}, hinted(t, t.add))
		delIn := mcpSchema[MCPDeleteInput]()
		delIn.Properties["ids"].MinItems = ptr(1)
		delIn.Properties["ids"].MaxItems = ptr(t.lim.MaxBatch)
		mcp.AddTool(s, &mcp.Tool{
			Name:         "delete",
			Title:        "Delete documents",
			Description:  `Delete documents from the collection by id. Ids not in it are listed, not an error.`,
			InputSchema:  delIn,
			OutputSchema: mcpSchema[MCPDeleteResult](),
			Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
		}, hinted(t, t.delete))
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// mcpSchema is the JSON schema of T, with a metadata Value as any JSON.
func mcpSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[filter.Value](): {Description: "a string, a number, or an array of them"},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcp schema of %T: %v", *new(T), err))
	}
	return s
}

// setRange bounds an integer property (hi 0: no upper bound).
func setRange(s *jsonschema.Schema, lo, hi float64) {
	s.Minimum = &lo
	if hi > 0 {
		s.Maximum = &hi
	}
}

// hinted is a tool's handler whose error, when it carries actions
// (package hint: an index to repair, a model to install), says them after
// its message: an agent reads a failed call's text only.
func hinted[In, Out any](t *mcpTools, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		r, out, err := h(ctx, req, in)
		if err == nil {
			return r, out, nil
		}
		actions := hint.Of(err)
		if len(actions) == 0 {
			return r, out, err
		}
		texts := make([]string, len(actions))
		for i, a := range actions {
			texts[i] = hintText(t.opts.HintText, a)
		}
		return r, out, fmt.Errorf("%w\nwhat to do: %s", err, strings.Join(texts, "; or: "))
	}
}

// call runs fn with the engine under the tool call's context and timeout.
func (t *mcpTools) call(ctx context.Context, fn func(ctx context.Context, e *engine.Engine) error) error {
	if t.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.opts.Timeout)
		defer cancel()
	}
	e, release, err := t.ref.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	err = fn(ctx, e)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("timed out after %s: %w", t.opts.Timeout, err)
	}
	return err
}

// MCPSearchInput is the search tool's input.
type MCPSearchInput struct {
	Query       string         `json:"query" jsonschema:"what to look for: keywords, a question or a passage"`
	K           int            `json:"k,omitempty" jsonschema:"how many results (default 10)"`
	Mode        string         `json:"mode,omitempty" jsonschema:"hybrid (default: words and meaning), lexical (BM25: exact words, names, codes), dense (meaning only), rerank (hybrid reordered by a cross-encoder)"`
	Filter      map[string]any `json:"filter,omitempty" jsonschema:"metadata filter, JSON: {\"lang\": \"en\"} (equal), {\"in\": {\"lang\": [\"en\", \"de\"]}}, {\"prefix\": {\"path\": \"docs/\"}}, {\"gte\": {\"year\": 2020}} (also gt, lt, lte), {\"range\": {\"year\": {\"gte\": 1960, \"lt\": 1970}}}, {\"and\": [...]}, {\"or\": [...]}, {\"not\": {...}}"`
	SnippetSize int            `json:"snippet_size,omitempty" jsonschema:"bytes of each snippet (default 300)"`
}

// MCPSearchResult is the search tool's answer.
type MCPSearchResult struct {
	Query    string     `json:"query"`
	Mode     string     `json:"mode"`
	Hits     []MCPHit   `json:"hits"`
	Warnings []string   `json:"warnings,omitempty" jsonschema:"what the search could not do as asked (a filter key no document has)"`
	Filter   *MCPFilter `json:"filter,omitempty"`
}

// MCPFilter is the filter a search applied, as the engine read it.
type MCPFilter struct {
	Applied string `json:"applied" jsonschema:"the filter in the explicit form"`
}

// MCPHit is one search result.
type MCPHit struct {
	Rank     int                     `json:"rank"`
	ID       string                  `json:"id" jsonschema:"the document's id, for get"`
	Title    string                  `json:"title,omitempty"`
	Score    float64                 `json:"score" jsonschema:"the mode's score: fused, BM25, cosine or the reranker's"`
	Location *Location               `json:"location,omitempty" jsonschema:"where in its file the hit lies (path, page, lines, section; label says it in one line), for the documents of an indexed folder"`
	Snippet  *MCPSnippet             `json:"snippet,omitempty"`
	Metadata map[string]engine.Value `json:"metadata,omitempty"`
	Bytes    int                     `json:"bytes" jsonschema:"length of the document's text in bytes"`
}

// MCPSnippet is the part of a hit's text that matched.
type MCPSnippet struct {
	Text  string `json:"text"`
	Start int    `json:"start" jsonschema:"byte offset of the snippet in the document's text (get's offset)"`
	End   int    `json:"end"`
	Lines [2]int `json:"lines" jsonschema:"the first and last line of the snippet (get's start_line and end_line)"`
}

func (t *mcpTools) search(ctx context.Context, _ *mcp.CallToolRequest, in MCPSearchInput) (*mcp.CallToolResult, MCPSearchResult, error) {
	out := MCPSearchResult{Query: in.Query, Hits: []MCPHit{}}
	if strings.TrimSpace(in.Query) == "" {
		return nil, out, engine.ErrEmptyQuery
	}
	if len(in.Query) > t.lim.MaxQueryBytes {
		return nil, out, fmt.Errorf("query: %d bytes, over the limit of %d", len(in.Query), t.lim.MaxQueryBytes)
	}
	k := in.K
	if k == 0 {
		k = 10
	}
	if k < 1 || k > mcpMaxK {
		return nil, out, fmt.Errorf("k: %d, want 1 to %d", k, mcpMaxK)
	}
	mode, err := engine.ParseMode(in.Mode)
	if err != nil {
		return nil, out, err
	}
	if mode == engine.ModeRerank && !t.opts.Reranker {
		return nil, out, fmt.Errorf("mode rerank: this server has no reranker; use hybrid")
	}
	size := in.SnippetSize
	if size == 0 {
		size = 300
	}
	if size < 0 || size > t.lim.MaxSnippetSize {
		return nil, out, fmt.Errorf("snippet_size: %d, want 1 to %d", size, t.lim.MaxSnippetSize)
	}
	opts := engine.SearchOptions{Mode: mode, K: k, Snippets: true, SnippetSize: size, RerankFusion: t.opts.RerankFusion}
	if len(in.Filter) > 0 {
		raw, _ := json.Marshal(in.Filter)
		f, err := engine.ParseFilter(raw)
		if err == nil {
			err = f.Validate()
		}
		if err != nil {
			return nil, out, fmt.Errorf("filter: %w", err)
		}
		opts.Filter = f
		out.Filter = &MCPFilter{Applied: f.String()}
	}
	out.Mode = string(mode)
	if mode == "" {
		out.Mode = string(engine.ModeHybrid)
	}
	err = t.call(ctx, func(ctx context.Context, e *engine.Engine) error {
		res, err := e.Search(ctx, in.Query, opts)
		if err != nil {
			return err
		}
		for i, r := range res {
			h := MCPHit{Rank: i + 1, ID: r.ID, Title: r.Title, Score: r.Score, Metadata: metadataOf(r.Meta, r.MetaValues), Bytes: len(r.Text)}
			if l := r.Location; l != nil {
				h.Location = &Location{Location: *l, Label: l.String()}
			}
			if sn := r.Snippet; sn != nil {
				h.Snippet = &MCPSnippet{Text: sn.Text, Start: sn.Start, End: sn.End,
					Lines: [2]int{lineAt(r.Text, sn.Start), lineAt(r.Text, max(sn.Start, sn.End-1))}}
			}
			out.Hits = append(out.Hits, h)
		}
		if unknown, err := e.UnknownKeys(opts.Filter); err == nil && len(unknown) > 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("no document has the metadata key %s: the filter cannot match on it (status lists the keys)", strings.Join(quoteEach(unknown), ", ")))
		}
		return nil
	})
	return nil, out, err
}

func quoteEach(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// lineAt is the 1-based line of byte offset off in text.
func lineAt(text string, off int) int {
	off = min(max(off, 0), len(text))
	return strings.Count(text[:off], "\n") + 1
}

// MCPGetInput is the get tool's input.
type MCPGetInput struct {
	ID        string `json:"id" jsonschema:"the document's id (from search)"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"first line to read, 1-based"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"last line to read, inclusive"`
	Offset    int    `json:"offset,omitempty" jsonschema:"byte offset to read from (a snippet's start, or next_offset)"`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"most bytes of text to return (default 20000)"`
}

// MCPDocument is a document, or the part of it asked for.
type MCPDocument struct {
	ID         string                  `json:"id"`
	Title      string                  `json:"title,omitempty"`
	Metadata   map[string]engine.Value `json:"metadata,omitempty"`
	Text       string                  `json:"text" jsonschema:"the text, or the part asked for"`
	Offset     int                     `json:"offset" jsonschema:"byte offset of text in the document's text"`
	StartLine  int                     `json:"start_line" jsonschema:"the line text starts on"`
	EndLine    int                     `json:"end_line" jsonschema:"the line text ends on"`
	Lines      int                     `json:"lines" jsonschema:"lines in the document"`
	Bytes      int                     `json:"bytes" jsonschema:"bytes in the document's text"`
	Truncated  bool                    `json:"truncated" jsonschema:"more of the part asked for follows (read on from next_offset)"`
	NextOffset int                     `json:"next_offset,omitempty" jsonschema:"where to read on, when truncated"`
}

func (t *mcpTools) get(ctx context.Context, _ *mcp.CallToolRequest, in MCPGetInput) (*mcp.CallToolResult, MCPDocument, error) {
	var out MCPDocument
	if in.MaxBytes == 0 {
		in.MaxBytes = mcpDefaultGet
	}
	if in.MaxBytes < 1 || in.MaxBytes > mcpMaxGet {
		return nil, out, fmt.Errorf("max_bytes: %d, want 1 to %d", in.MaxBytes, mcpMaxGet)
	}
	err := t.call(ctx, func(ctx context.Context, e *engine.Engine) error {
		docs, err := getDocs(ctx, e, []string{in.ID})
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return fmt.Errorf("document %q: not found (search gives the ids)", in.ID)
		}
		out, err = documentPart(docs[0], in)
		return err
	})
	return nil, out, err
}

// missingIDs lists the ids docs do not hold, in order.
func missingIDs(ids []string, docs []engine.Document) []string {
	held := make(map[string]bool, len(docs))
	for _, d := range docs {
		held[d.ID] = true
	}
	var out []string
	for _, id := range ids {
		if !held[id] {
			out = append(out, id)
		}
	}
	return out
}

// getDocs is Engine.Get with the IDs checked first.
func getDocs(ctx context.Context, e *engine.Engine, ids []string) ([]engine.Document, error) {
	for _, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("an empty id")
		}
	}
	return e.Get(ctx, ids...)
}

// documentPart cuts the part of d that in asks for: lines, or bytes from
// an offset, at most in.MaxBytes, on UTF-8 boundaries.
func documentPart(d engine.Document, in MCPGetInput) (MCPDocument, error) {
	text := d.Text
	out := MCPDocument{ID: d.ID, Title: d.Title, Metadata: metadataOf(d.Meta, d.MetaValues), Bytes: len(text), Lines: strings.Count(text, "\n") + 1}
	lines := in.StartLine != 0 || in.EndLine != 0
	if lines && in.Offset != 0 {
		return out, fmt.Errorf("give a line range (start_line, end_line) or an offset, not both")
	}
	if in.StartLine < 0 || in.EndLine < 0 || in.Offset < 0 {
		return out, fmt.Errorf("start_line, end_line and offset must not be negative")
	}
	start, end := 0, len(text)
	if lines {
		first, last := max(in.StartLine, 1), in.EndLine
		if last == 0 {
			last = out.Lines
		}
		if last < first {
			return out, fmt.Errorf("end_line %d is before start_line %d", last, first)
		}
		if first > out.Lines {
			return out, fmt.Errorf("start_line %d: the document has %d lines", first, out.Lines)
		}
		start, end = lineStart(text, first), lineStart(text, last+1)
		if end > start && end <= len(text) && text[end-1] == '\n' && last < out.Lines {
			end-- // the last line without its newline
		}
	} else {
		if in.Offset > len(text) {
			return out, fmt.Errorf("offset %d: the text has %d bytes", in.Offset, len(text))
		}
		start = in.Offset
		for start > 0 && start < len(text) && !utf8.RuneStart(text[start]) {
			start--
		}
	}
	stop := end
	if stop-start > in.MaxBytes {
		stop = start + in.MaxBytes
		for stop > start && stop < len(text) && !utf8.RuneStart(text[stop]) {
			stop--
		}
		out.Truncated, out.NextOffset = true, stop
	}
	out.Text, out.Offset = text[start:stop], start
	out.StartLine, out.EndLine = lineAt(text, start), lineAt(text, max(start, stop-1))
	return out, nil
}

// lineStart is the byte offset where 1-based line n starts (len(text)
// past the last line).
func lineStart(text string, n int) int {
	off := 0
	for i := 1; i < n; i++ {
		j := strings.IndexByte(text[off:], '\n')
		if j < 0 {
			return len(text)
		}
		off += j + 1
	}
	return off
}

// MCPMultiGetInput is the multi_get tool's input.
type MCPMultiGetInput struct {
	IDs      []string `json:"ids" jsonschema:"the documents' ids"`
	MaxBytes int      `json:"max_bytes,omitempty" jsonschema:"most bytes of each document's text (default 4000)"`
}

// MCPMultiGetResult is the multi_get tool's answer.
type MCPMultiGetResult struct {
	Documents []MCPDocument `json:"documents"`
	Missing   []string      `json:"missing,omitempty" jsonschema:"ids not found"`
}

func (t *mcpTools) multiGet(ctx context.Context, _ *mcp.CallToolRequest, in MCPMultiGetInput) (*mcp.CallToolResult, MCPMultiGetResult, error) {
	out := MCPMultiGetResult{Documents: []MCPDocument{}}
	if len(in.IDs) == 0 || len(in.IDs) > mcpMaxMulti {
		return nil, out, fmt.Errorf("ids: %d, want 1 to %d", len(in.IDs), mcpMaxMulti)
	}
	if in.MaxBytes == 0 {
		in.MaxBytes = mcpDefaultPart
	}
	if in.MaxBytes < 1 || in.MaxBytes > mcpMaxGet {
		return nil, out, fmt.Errorf("max_bytes: %d, want 1 to %d", in.MaxBytes, mcpMaxGet)
	}
	err := t.call(ctx, func(ctx context.Context, e *engine.Engine) error {
		docs, err := getDocs(ctx, e, in.IDs)
		if err != nil {
			return err
		}
		for _, d := range docs {
			part, err := documentPart(d, MCPGetInput{ID: d.ID, MaxBytes: in.MaxBytes})
			if err != nil {
				return err
			}
			out.Documents = append(out.Documents, part)
		}
		out.Missing = missingIDs(in.IDs, docs)
		return nil
	})
	return nil, out, err
}

// MCPStatus is the status tool's answer.
type MCPStatus struct {
	Documents   int          `json:"documents"`
	Model       string       `json:"model" jsonschema:"the embedding model"`
	Dim         int          `json:"dim"`
	Chunking    string       `json:"chunking" jsonschema:"how long documents are split into passages"`
	Modes       []string     `json:"modes" jsonschema:"the search modes offered"`
	Fusion      string       `json:"fusion" jsonschema:"how hybrid search fuses its lists"`
	Changes     uint64       `json:"changes" jsonschema:"the number of the last change stored"`
	LastChanged string       `json:"last_changed,omitempty" jsonschema:"when the store last changed (RFC 3339)"`
	UpToDate    bool         `json:"up_to_date" jsonschema:"both indexes hold every stored change"`
	Writes      bool         `json:"writes" jsonschema:"the add and delete tools are offered"`
	WriterPID   int          `json:"writer_pid,omitempty" jsonschema:"the process that has the directory open for writing, read through"`
	Metadata    []MCPMetaKey `json:"metadata" jsonschema:"the metadata keys, for search's filter"`
	Warnings    []string     `json:"warnings,omitempty"`
}

// MCPMetaKey is a metadata key of the documents.
type MCPMetaKey struct {
	Key     string   `json:"key"`
	Values  int      `json:"values" jsonschema:"distinct values"`
	Top     []string `json:"top,omitempty" jsonschema:"the values held by the most documents"`
	Numeric bool     `json:"numeric,omitempty"`
	Min     float64  `json:"min,omitempty"`
	Max     float64  `json:"max,omitempty"`
}

func (t *mcpTools) status(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, MCPStatus, error) {
	var out MCPStatus
	err := t.call(ctx, func(ctx context.Context, e *engine.Engine) error {
		st, err := e.Stats()
		if err != nil {
			return err
		}
		out = MCPStatus{Documents: st.Documents, Model: st.Model.Label(), Dim: st.Model.Dim, Chunking: st.Chunking.String(),
			Modes: []string{"hybrid", "lexical", "dense"}, Fusion: string(st.Fusion), Changes: st.Seq,
			Writes: t.opts.AllowWrites, WriterPID: st.WriterPID, Warnings: st.Warnings, Metadata: []MCPMetaKey{}}
		if t.opts.Reranker {
			out.Modes = append(out.Modes, "rerank")
		}
		// Through a writer the counts of its indexes are not known here.
		out.UpToDate = st.WriterPID != 0 || (st.LexicalSeq == st.Seq && st.DenseSeq == st.Seq && st.LexicalStale == "")
		if fi, err := os.Stat(filepath.Join(e.Dir(), "anna.db")); err == nil {
			out.LastChanged = fi.ModTime().UTC().Format(time.RFC3339)
		}
		keys, err := e.MetadataKeys(ctx, 5)
		if err != nil && !errors.Is(err, engine.ErrUnsupported) {
			return err
		}
		for _, k := range keys {
			mk := MCPMetaKey{Key: k.Key, Values: k.Values, Numeric: k.Numeric, Min: k.Min, Max: k.Max}
			for _, v := range k.Top {
				mk.Top = append(mk.Top, v.Value)
			}
			out.Metadata = append(out.Metadata, mk)
		}
		return nil
	})
	return nil, out, err
}

// MCPAddInput is the add tool's input.
type MCPAddInput struct {
	Documents []MCPNewDocument `json:"documents"`
}

// MCPNewDocument is a document to add.
type MCPNewDocument struct {
	ID       string                  `json:"id" jsonschema:"the document's id; an id already stored is replaced"`
	Title    string                  `json:"title,omitempty"`
	Text     string                  `json:"text,omitempty"`
	Metadata map[string]engine.Value `json:"metadata,omitempty" jsonschema:"strings, numbers or arrays of them, for search's filter"`
}

// MCPAddResult is the add tool's answer.
type MCPAddResult struct {
	Added     int  `json:"added"`
	Updated   int  `json:"updated"`
	Unchanged int  `json:"unchanged"`
	Committed bool `json:"committed" jsonschema:"the documents are stored and searchable"`
}

func (t *mcpTools) add(ctx context.Context, _ *mcp.CallToolRequest, in MCPAddInput) (*mcp.CallToolResult, MCPAddResult, error) {
	var out MCPAddResult
	if len(in.Documents) == 0 || len(in.Documents) > t.lim.MaxBatch {
		return nil, out, fmt.Errorf("documents: %d, want 1 to %d", len(in.Documents), t.lim.MaxBatch)
	}
	docs := make([]engine.Document, len(in.Documents))
	for i, d := range in.Documents {
		docs[i] = engine.Document{ID: d.ID, Title: d.Title, Text: d.Text}
		for k, v := range d.Metadata {
			if docs[i].MetaValues == nil {
				docs[i].MetaValues = map[string]engine.Value{}
			}
			docs[i].MetaValues[k] = v
		}
		if d.ID == "" {
			return nil, out, fmt.Errorf("documents[%d]: %w", i, engine.ErrEmptyID)
		}
		if engine.IsEmpty(docs[i]) {
			return nil, out, fmt.Errorf("documents[%d] (%q): %w", i, d.ID, engine.ErrEmptyDocument)
		}
	}
	err := t.call(ctx, func(ctx context.Context, e *engine.Engine) error {
		res, err := e.Add(ctx, docs)
		out = MCPAddResult{Added: res.Added, Updated: res.Updated, Unchanged: res.Unchanged, Committed: res.Committed}
		return err
	})
	return nil, out, err
}

// MCPDeleteInput is the delete tool's input.
type MCPDeleteInput struct {
	IDs []string `json:"ids" jsonschema:"the ids of the documents to delete"`
}

// MCPDeleteResult is the delete tool's answer.
type MCPDeleteResult struct {
	Deleted int      `json:"deleted"`
	Missing []string `json:"missing,omitempty" jsonschema:"ids that were not stored"`
}

func (t *mcpTools) delete(ctx context.Context, _ *mcp.CallToolRequest, in MCPDeleteInput) (*mcp.CallToolResult, MCPDeleteResult, error) {
	var out MCPDeleteResult
	if len(in.IDs) == 0 || len(in.IDs) > t.lim.MaxBatch {
		return nil, out, fmt.Errorf("ids: %d, want 1 to %d", len(in.IDs), t.lim.MaxBatch)
	}
	err := t.call(ctx, func(ctx context.Context, e *engine.Engine) error {
		have, err := getDocs(ctx, e, in.IDs)
		if err != nil {
			return err
		}
		out.Missing = missingIDs(in.IDs, have)
		out.Deleted, err = e.Delete(ctx, in.IDs)
		return err
	})
	return nil, out, err
}
