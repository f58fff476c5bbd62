package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/encodertest"
)

// mcpDocs are the documents of the MCP tests: one long enough for parts.
const mcpDocs = `{"documents": [
 {"id": "sourdough", "title": "Sourdough", "text": "Wild yeast bread.\nFeed the starter daily.\nBake at 250 degrees.\nLet it cool.", "metadata": {"shelf": "baking", "year": 2021}},
 {"id": "graphs", "title": "Graphs", "text": "Nearest neighbour graphs for vector search.", "metadata": {"shelf": "computing", "year": 2019}},
 {"id": "bread", "title": "Rye bread", "text": "Rye bread with a sour starter.", "metadata": {"shelf": "baking"}}
]}`

// mcpSession connects the Go SDK's client to srv over in-memory
// transports.
func mcpSession(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its structured content into out; it
// returns the error text when the tool failed.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return res.Content[0].(*mcp.TextContent).Text
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
	// The text content is the same JSON, for clients that read only it.
	if len(res.Content) != 1 || !json.Valid([]byte(res.Content[0].(*mcp.TextContent).Text)) {
		t.Errorf("%s: content %v is not the structured content's JSON", name, res.Content)
	}
	return ""
}

// TestMCPTools: the tools with the Go SDK's client: their list and schemas,
// search with a filter and its warning, get by lines and by bytes,
// multi_get, status with the metadata keys; add and delete only with
// writes allowed; errors a model can read.
func TestMCPTools(t *testing.T) {
	ts := newTestServer(t, Options{})
	if code, m := ts.do(t, "POST", "/v1/documents", mcpDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	cs := mcpSession(t, NewMCP(ts.eng, MCPOptions{}))
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s lacks a description or a schema", tool.Name)
		}
		if tool.Name == "search" {
			b, _ := json.Marshal(tool.InputSchema)
			for _, want := range []string{`"required":["query"]`, `"enum":["hybrid","lexical","dense"]`, `"maximum":50`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("search's input schema lacks %s: %s", want, b)
				}
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"get", "multi_get", "search", "status"}) {
		t.Fatalf("tools %v (no writes unless allowed)", names)
	}

	var sr MCPSearchResult
	if msg := callTool(t, cs, "search", map[string]any{"query": "starter bread", "k": 2, "filter": map[string]any{"shelf": "baking"}}, &sr); msg != "" {
		t.Fatal(msg)
	}
	if len(sr.Hits) != 2 || sr.Mode != "hybrid" || sr.Filter == nil {
		t.Fatalf("search: %+v", sr)
	}
	for _, h := range sr.Hits {
		if h.Metadata["shelf"].String() != "baking" || h.Snippet == nil || h.Bytes == 0 {
			t.Errorf("hit %+v: not baking, or no snippet", h)
		}
	}
	callTool(t, cs, "search", map[string]any{"query": "bread", "filter": map[string]any{"color": "red"}}, &sr)
	if len(sr.Warnings) != 1 || !strings.Contains(sr.Warnings[0], `"color"`) {
		t.Errorf("an unknown key's warning: %+v", sr.Warnings)
	}

	var doc MCPDocument
	callTool(t, cs, "get", map[string]any{"id": "sourdough", "start_line": 2, "end_line": 3}, &doc)
	if doc.Text != "Feed the starter daily.\nBake at 250 degrees." || doc.StartLine != 2 || doc.EndLine != 3 || doc.Lines != 4 || doc.Truncated {
		t.Errorf("get lines 2-3: %+v", doc)
	}
	callTool(t, cs, "get", map[string]any{"id": "sourdough", "offset": 5, "max_bytes": 5}, &doc)
	if doc.Text != "yeast" || !doc.Truncated || doc.NextOffset != 10 || doc.Offset != 5 {
		t.Errorf("get offset 5, 5 bytes: %+v", doc)
	}
	if msg := callTool(t, cs, "get", map[string]any{"id": "nope"}, &doc); !strings.Contains(msg, `"nope": not found`) {
		t.Errorf("get of a missing id: %q", msg)
	}
	var mg MCPMultiGetResult
	callTool(t, cs, "multi_get", map[string]any{"ids": []string{"graphs", "nope", "bread"}, "max_bytes": 4}, &mg)
	if len(mg.Documents) != 2 || mg.Documents[0].Text != "Near" || !slices.Equal(mg.Missing, []string{"nope"}) {
		t.Errorf("multi_get: %+v", mg)
	}
	var st MCPStatus
	callTool(t, cs, "status", nil, &st)
	if st.Documents != 3 || st.Writes || !st.UpToDate || len(st.Metadata) != 2 || st.Metadata[0].Key != "shelf" || st.Metadata[0].Top[0] != "baking" ||
		!st.Metadata[1].Numeric || st.Metadata[1].Min != 2019 || st.Metadata[1].Max != 2021 || st.LastChanged == "" {
		t.Errorf("status: %+v", st)
	}

	// A folder's document: where in its file.
	if code, m := ts.do(t, "POST", "/v1/documents", `{"documents": [{"id": "plan.pdf#3", "title": "Plan", "text": "The harvest plan for the orchard.", "metadata": {"path": "notes/plan.pdf", "page": 3}}]}`); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	callTool(t, cs, "search", map[string]any{"query": "harvest plan orchard", "k": 1, "mode": "lexical"}, &sr)
	if len(sr.Hits) != 1 || sr.Hits[0].Location == nil || sr.Hits[0].Location.Label != "notes/plan.pdf:page 3" || sr.Hits[0].Location.Page != 3 {
		t.Errorf("a folder's document's location: %+v", sr.Hits)
	}

	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"query": " "}, "empty query"},
		{map[string]any{"query": "x", "k": 51}, "maximum"},
		{map[string]any{"query": "x", "mode": "rerank"}, "rerank"},
		{map[string]any{"query": "x", "filter": map[string]any{"or": []any{}}}, "filter"},
		{map[string]any{"k": 3}, "query"},
	} {
		if msg := callTool(t, cs, "search", c.args, &sr); !strings.Contains(msg, c.want) {
			t.Errorf("search %v: %q, want an error naming %q", c.args, msg, c.want)
		}
	}
	if msg := callTool(t, cs, "get", map[string]any{"id": "sourdough", "start_line": 2, "offset": 3}, &doc); !strings.Contains(msg, "not both") {
		t.Errorf("get with lines and an offset: %q", msg)
	}

	// Writes, when allowed.
	w := mcpSession(t, NewMCP(ts.eng, MCPOptions{AllowWrites: true}))
	var ar MCPAddResult
	if msg := callTool(t, w, "add", map[string]any{"documents": []any{map[string]any{"id": "new", "text": "a new note about rye", "metadata": map[string]any{"tags": []string{"a", "b"}}}}}, &ar); msg != "" || ar.Added != 1 || !ar.Committed {
		t.Fatalf("add: %+v %s", ar, msg)
	}
	var dr MCPDeleteResult
	callTool(t, w, "delete", map[string]any{"ids": []string{"new", "nope"}}, &dr)
	if dr.Deleted != 1 || !slices.Equal(dr.Missing, []string{"nope"}) {
		t.Errorf("delete: %+v", dr)
	}
	if msg := callTool(t, w, "add", map[string]any{"documents": []any{map[string]any{"id": "e"}}}, &ar); !strings.Contains(msg, "empty") {
		t.Errorf("add of an empty document: %q", msg)
	}
}

// blockingQueries is the hashing encoder whose EmbedQueries waits for its
// context once armed, telling when it has seen it end.
type blockingQueries struct {
	*countingEncoder
	armed   atomic.Bool
	entered chan struct{}
	ended   chan error
}

func (b *blockingQueries) EmbedQueries(ctx context.Context, q []string, p encoder.Prompt) ([][]float32, error) {
	if b.armed.Load() {
		b.entered <- struct{}{}
		<-ctx.Done()
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	}
	return b.countingEncoder.EmbedQueries(ctx, q, p)
}

// TestMCPCancel: a client's cancelled call cancels the engine's work (the
// encoder sees its context end), and the session goes on.
func TestMCPCancel(t *testing.T) {
	enc := &blockingQueries{countingEncoder: &countingEncoder{Hashing: &encodertest.Hashing{D: 32, FP: "fp"}}, entered: make(chan struct{}, 1), ended: make(chan error, 1)}
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "idx"), engine.Options{Encoder: enc, NoShare: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Add(context.Background(), []engine.Document{{ID: "a", Text: "wild yeast bread"}}); err != nil {
		t.Fatal(err)
	}
	cs := mcpSession(t, NewMCP(eng, MCPOptions{}))
	enc.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": "bread", "mode": "dense"}})
		done <- err
	}()
	select {
	case <-enc.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the search did not reach the encoder")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-enc.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the encoder's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client's cancel did not reach the engine")
	}
	t.Logf("the engine saw the cancel %s after it", time.Since(start))
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	enc.armed.Store(false)
	var sr MCPSearchResult
	if msg := callTool(t, cs, "search", map[string]any{"query": "bread", "mode": "dense"}, &sr); msg != "" || len(sr.Hits) != 1 {
		t.Fatalf("a call after the cancel: %s %+v", msg, sr)
	}
}

// keyTransport adds the API key to every request.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPOverHTTP: /mcp speaks streamable HTTP to the Go SDK's client,
// behind the API key; writes only with MCPWrites.
func TestMCPOverHTTP(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "k", MCPWrites: true})
	if code, m := ts.do(t, "POST", "/v1/documents", mcpDocs, "Authorization", "Bearer k"); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.url + "/mcp", MaxRetries: -1}, nil); err == nil {
		t.Fatal("connected without the key")
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.url + "/mcp", HTTPClient: &http.Client{Transport: keyTransport{"k"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var sr MCPSearchResult
	if msg := callTool(t, cs, "search", map[string]any{"query": "nearest neighbour graphs", "k": 1}, &sr); msg != "" || len(sr.Hits) != 1 || sr.Hits[0].ID != "graphs" {
		t.Fatalf("search over HTTP: %s %+v", msg, sr)
	}
	var ar MCPAddResult
	if msg := callTool(t, cs, "add", map[string]any{"documents": []any{map[string]any{"id": "x", "text": "over http"}}}, &ar); msg != "" || ar.Added != 1 {
		t.Fatalf("add over HTTP: %s %+v", msg, ar)
	}
	if d, _ := ts.eng.Get(ctx, "x"); len(d) != 1 {
		t.Fatalf("the added document is not stored")
	}
	// The DNS rebinding guard: a Host that is not loopback.
	req, _ := http.NewRequest("POST", ts.url+"/mcp", strings.NewReader(`{}`))
	req.Host = "attacker.example"
	req.Header.Set("Authorization", "Bearer k")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("/mcp with Host attacker.example: %v %v", resp, err)
	}
	// A read-only server offers no writes, whatever MCPWrites says.
	ro := newTestServer(t, Options{ReadOnly: true, MCPWrites: true})
	rcs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ro.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rcs.Close()
	for tool, err := range rcs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "add" || tool.Name == "delete" {
			t.Errorf("a read-only server offers %s", tool.Name)
		}
	}
}

// TestMCPStreamShutdown: an MCP session's open GET stream does not hold
// Serve's shutdown for its grace period.
func TestMCPStreamShutdown(t *testing.T) {
	ts := newTestServer(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ts.srv, []net.Listener{ln}, 20*time.Second) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the client's GET stream is open
	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve waited for the MCP stream")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %s", d)
	}
}

// TestMetadataRoute: GET /v1/metadata lists the keys for the page's
// filters.
func TestMetadataRoute(t *testing.T) {
	ts := newTestServer(t, Options{})
	if code, m := ts.do(t, "POST", "/v1/documents", mcpDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	code, m := ts.do(t, "GET", "/v1/metadata?top=1", "")
	keys, _ := m["keys"].([]any)
	if code != 200 || len(keys) != 2 {
		t.Fatalf("metadata: %d %v", code, m)
	}
	shelf, year := keys[0].(map[string]any), keys[1].(map[string]any)
	top := shelf["top"].([]any)
	if shelf["key"] != "shelf" || shelf["values"] != 2.0 || len(top) != 1 || top[0].(map[string]any)["value"] != "baking" || top[0].(map[string]any)["documents"] != 2.0 {
		t.Errorf("shelf: %v", shelf)
	}
	if year["key"] != "year" || year["numeric"] != true || year["min"] != 2019.0 || year["max"] != 2021.0 {
		t.Errorf("year: %v", year)
	}
	if code, m := ts.do(t, "GET", "/v1/metadata?top=500", ""); code != 400 {
		t.Errorf("top=500: %d %v", code, m)
	}
}

// TestMCPErrorHints: a failed call's text says what to do about it (the
// error's hints, package hint), as annactl mcp renders them when set, in
// words otherwise: an agent reads nothing else.
func TestMCPErrorHints(t *testing.T) {
	missing := &engine.ModelNotFoundError{Dir: "/data/idx", Model: engine.Model{Name: "all-MiniLM-L6-v2", Fingerprint: "5ac62f6b6ec2aa"}, Why: "its directory is gone", ModelsDir: "/home/models"}
	open := func(context.Context) (*engine.Engine, error) {
		return nil, fmt.Errorf("opening /data/idx: %w", missing)
	}
	for _, tc := range []struct {
		name string
		text func(hint.Action) string
		want []string
	}{
		{"words", nil, []string{"what to do: install the model directory that holds it; or: reindex /data/idx with the model you choose"}},
		{"rendered", func(a hint.Action) string {
			if a.Kind == hint.Reindex {
				return "run: reindex --index " + a.Index
			}
			return ""
		}, []string{"what to do: install the model directory that holds it; or: run: reindex --index /data/idx"}},
	} {
		srv, held := NewMCPHeld(open, time.Minute, MCPOptions{HintText: tc.text})
		cs := mcpSession(t, srv)
		msg := callTool(t, cs, "status", map[string]any{}, nil)
		if !strings.HasPrefix(msg, "opening /data/idx: engine: /data/idx: its model") {
			t.Errorf("%s: the error's own text first: %q", tc.name, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
		held.Close()
	}
	// An error without hints is left as it is.
	srv, held := NewMCPHeld(func(context.Context) (*engine.Engine, error) { return nil, errors.New("plain failure") }, time.Minute, MCPOptions{})
	defer held.Close()
	if msg := callTool(t, mcpSession(t, srv), "status", map[string]any{}, nil); msg != "plain failure" {
		t.Errorf("an error without hints: %q", msg)
	}
}
