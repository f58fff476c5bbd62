package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/fuzzcheck"
)

// fuzzRoutes are the paths FuzzHandlers sends requests to: every route of
// this package, and those of the dialects and MCP being added (a route
// that does not exist yet answers 404, which is checked like any answer).
var fuzzRoutes = []string{
	"/v1/search", "/v1/documents", "/v1/documents/", "/v1/embeddings", "/v1/rerank", "/v1/models", "/v1/models/",
	"/v1/stats", "/healthz", "/metrics", "/openapi.json", "/",
	"/mcp", "/v1/embed", "/v2/embed", "/v2/rerank", "/embed", "/rerank", "/info", "/api/embed", "/api/embeddings",
}

var fuzzMethods = []string{"POST", "GET", "DELETE", "PUT", "OPTIONS", "HEAD"}

var fuzzTypes = []string{"application/json", "application/x-ndjson", "", "text/plain", "application/json; charset=utf-8"}

// FuzzHandlers: any request to any route (method, path, Content-Type,
// Origin, body) is answered within a bound, never with a 500: a client's
// mistake is a 4xx whose error is JSON with a code and a message of at
// most 2 KiB; and the server answers a search afterwards.
func FuzzHandlers(f *testing.F) {
	eng, err := engine.Open(context.Background(), filepath.Join(f.TempDir(), "idx"),
		engine.Options{Encoder: &encodertest.Hashing{D: 16, FP: "fuzz-fp-0123456789"}, NoShare: true})
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(eng, Options{Timeout: 10 * time.Second, Reranker: &fakeReranker{}, RerankerName: "fake",
		Limits: Limits{MaxBodyBytes: 1 << 20, MaxBatch: 64, MaxInputs: 64}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close(); eng.Close() })
	serve := func(method, path, ctype, origin string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://127.0.0.1:8080/", bytes.NewReader(body))
		req.URL.Path = path
		req.Host = "127.0.0.1:8080"
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w
	}
	if w := serve("POST", "/v1/documents", "application/json", "", []byte(testDocs)); w.Code != 200 {
		f.Fatalf("add: %d %s", w.Code, w.Body)
	}
	for i, c := range []struct{ path, body string }{
		{"/v1/search", `{"query": "wild yeast", "k": 3, "snippets": true, "explain": true, "filter": {"topic": "food"}}`},
		{"/v1/documents", `{"documents": [{"id": "x", "text": "y", "metadata": {"k": ["a", 1]}}]}`},
		{"/v1/documents/", ""},
		{"/v1/embeddings", `{"input": ["a", "b"], "encoding_format": "base64"}`},
		{"/v1/rerank", `{"query": "bread", "documents": ["bread", {"text": "graphs"}], "top_n": 1}`},
	} {
		f.Add(uint8(i), uint8(0), uint8(0), "", "", []byte(c.body))
	}
	f.Add(uint8(2), uint8(1), uint8(2), "bread", "", []byte{})
	f.Add(uint8(1), uint8(0), uint8(1), "", "http://evil.example", []byte(`{"id": "z", "text": "w"}`))
	f.Fuzz(func(t *testing.T, route, method, ctype uint8, suffix, origin string, body []byte) {
		path := fuzzRoutes[int(route)%len(fuzzRoutes)] + suffix
		if u, err := http.NewRequest("GET", "http://h"+path, nil); err != nil || u.URL.Path == "" {
			return // not a path a client can send
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		var w *httptest.ResponseRecorder
		fuzzcheck.Within(t, 30*time.Second, m+" "+path, func() {
			w = serve(m, path, fuzzTypes[int(ctype)%len(fuzzTypes)], origin, body)
		})
		if w.Code >= 500 && w.Code != http.StatusNotImplemented {
			t.Fatalf("%s %q (%q): %d %s", m, path, body, w.Code, w.Body)
		}
		if w.Code >= 400 && m != "HEAD" {
			// OpenAI's shape, or Ollama's and text-embeddings-inference's.
			var e errorBody
			var p plainError
			code, msg := "", ""
			if err := json.Unmarshal(w.Body.Bytes(), &e); err == nil {
				code, msg = e.Error.Code, e.Error.Message
			} else if err := json.Unmarshal(w.Body.Bytes(), &p); err == nil {
				code, msg = p.ErrorType, p.Error
			}
			if code == "" || msg == "" {
				t.Fatalf("%s %q: %d with a body that is not an error: %q", m, path, w.Code, w.Body)
			}
			if len(msg) > maxErrorMessage {
				t.Fatalf("%s %q: a %d-byte error message", m, path, len(msg))
			}
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s %q: no nosniff", m, path)
		}
		if w := serve("POST", "/v1/search", "application/json", "", []byte(`{"query": "bread"}`)); w.Code != 200 {
			t.Fatalf("after %s %q (%q): a search answered %d %s", m, path, body, w.Code, w.Body)
		}
	})
}
