package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// fuzzServer is one server for a fuzz process: the hashing encoder, a
// reranker, a few documents.
var fuzzServer struct {
	once sync.Once
	srv  *Server
	eng  *engine.Engine
	err  error
}

func fuzzSetup(f *testing.F) (*Server, *engine.Engine) {
	fuzzServer.once.Do(func() {
		dir := filepath.Join(f.TempDir(), "idx")
		rr := &fakeReranker{}
		eng, err := engine.Open(context.Background(), dir, engine.Options{Encoder: &encodertest.Hashing{D: 16, FP: "fuzz-fp-0123456789"}, Reranker: rr, NoShare: true})
		if err != nil {
			fuzzServer.err = err
			return
		}
		srv, err := New(eng, Options{Reranker: rr, RerankerName: "fake", MCPWrites: true, Limits: Limits{MaxBodyBytes: 1 << 16, MaxInputs: 64, MaxK: 50, MaxBatch: 16}})
		if err != nil {
			fuzzServer.err = err
			return
		}
		fuzzServer.srv, fuzzServer.eng = srv, eng
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "http://127.0.0.1/v1/documents", strings.NewReader(pageDocs))
		req.Header.Set("Content-Type", "application/json")
		srv.ServeHTTP(rec, req)
		if rec.Code != 200 {
			fuzzServer.err = &apiError{status: rec.Code, code: "setup", message: rec.Body.String()}
		}
	})
	if fuzzServer.err != nil {
		f.Fatal(fuzzServer.err)
	}
	return fuzzServer.srv, fuzzServer.eng
}

// dialectRoutes are the routes FuzzDialects posts to.
var dialectRoutes = []string{"/v1/embeddings", "/v1/embed", "/v2/embed", "/v1/rerank", "/v2/rerank", "/embed", "/rerank", "/", "/api/embed", "/api/embeddings", "/v1/search"}

// FuzzDialects posts arbitrary bodies to the embedding and rerank dialects
// (and search): every answer is a 200 or a client error (never a 500: an
// input the handler did not expect), in JSON, in the route's error shape.
func FuzzDialects(f *testing.F) {
	srv, _ := fuzzSetup(f)
	for i, body := range []string{
		`{"input": ["a", "b"], "model": "text-embedding-3-small", "encoding_format": "base64"}`,
		`{"texts": ["a"], "input_type": "search_query", "embedding_types": ["float"]}`,
		`{"inputs": [{"content": [{"type": "text", "text": "x"}]}], "output_dimension": 16}`,
		`{"query": "bread", "documents": ["a", {"text": "b"}], "top_n": 1, "return_documents": false}`,
		`{"query": "bread", "documents": ["a", "b"], "top_n": 0}`,
		`{"inputs": "bread", "prompt_name": "query"}`,
		`{"query": "bread", "texts": ["a", "b"], "raw_scores": true, "return_text": true}`,
		`{"inputs": [[1, 2, 3]]}`,
		`{"model": "nomic-embed-text", "input": ["a", 3]}`,
		`{"model": "x", "prompt": ""}`,
		`{"query": "bread", "k": 3, "filter": {"or": [{"shelf": "baking"}, {"gte": {"year": 2020}}]}, "snippets": true, "explain": true}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := dialectRoutes[int(route)%len(dialectRoutes)]
		req := httptest.NewRequest("POST", "http://127.0.0.1"+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusNotImplemented {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body.Bytes())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST %s %q: %d, not JSON: %q", path, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			var plain struct{ Error json.RawMessage }
			json.Unmarshal(rec.Body.Bytes(), &plain)
			isString := len(plain.Error) > 0 && plain.Error[0] == '"'
			wantString := path == "/embed" || path == "/rerank" || path == "/" || strings.HasPrefix(path, "/api/")
			if isString != wantString {
				t.Fatalf("POST %s: error %s in the wrong shape", path, rec.Body.Bytes())
			}
		}
	})
}

// mcpTools are the tools FuzzMCP calls.
var mcpToolNames = []string{"search", "get", "multi_get", "status", "add", "delete"}

// FuzzMCP calls the MCP tools with arbitrary arguments through the Go
// SDK's client: every call answers (a result or a tool error the model
// reads), never a broken session or a crash.
func FuzzMCP(f *testing.F) {
	_, eng := fuzzSetup(f)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := NewMCP(eng, MCPOptions{AllowWrites: true, Reranker: true, Limits: Limits{MaxBatch: 16}}).Connect(ctx, st, nil); err != nil {
		f.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	for i, args := range []string{
		`{"query": "bread", "k": 3, "mode": "rerank", "filter": {"shelf": "baking"}, "snippet_size": 80}`,
		`{"id": "sourdough", "start_line": 2, "end_line": 9}`,
		`{"ids": ["sourdough", "nope"], "max_bytes": 3}`,
		`{}`,
		`{"documents": [{"id": "n", "text": "new", "metadata": {"tags": ["a", 1]}}]}`,
		`{"ids": ["n"]}`,
		`{"id": "sourdough", "offset": 3, "max_bytes": 1}`,
		`{"query": "x", "filter": {"range": {"year": {"gte": "a"}}}}`,
	} {
		f.Add(uint8(i%len(mcpToolNames)), []byte(args))
	}
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		if !json.Valid(args) {
			return
		}
		name := mcpToolNames[int(tool)%len(mcpToolNames)]
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			// Arguments that are not an object are refused by the protocol;
			// the session must go on.
			if perr := cs.Ping(ctx, nil); perr != nil {
				t.Fatalf("%s %s: %v, and the session is broken: %v", name, args, err, perr)
			}
			return
		}
		if len(res.Content) == 0 {
			t.Fatalf("%s %s: an answer with no content", name, args)
		}
	})
}
