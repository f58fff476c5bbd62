package server

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/encodertest"
)

// TestModelNames: a one-model server answers any model name in every
// dialect, logging each new name once; with StrictModel each dialect
// refuses it (404 model_not_found), its own names still accepted.
func TestModelNames(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	logf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, f)
	}
	requests := []struct{ path, body string }{
		{"/v1/embeddings", `{"input": "x", "model": "text-embedding-3-small"}`},
		{"/v1/embed", `{"texts": ["x"], "model": "embed-english-v3.0"}`},
		{"/v2/embed", `{"texts": ["x"], "model": "embed-v4.0", "input_type": "search_document"}`},
		{"/api/embed", `{"input": "x", "model": "nomic-embed-text"}`},
		{"/api/embeddings", `{"prompt": "x", "model": "nomic-embed-text"}`},
		{"/v1/rerank", `{"query": "x", "documents": ["x"], "model": "rerank-english-v3.0"}`},
		{"/v2/rerank", `{"query": "x", "documents": ["x"], "model": "rerank-v3.5"}`},
	}
	lenient := newTestServer(t, Options{Reranker: &fakeReranker{}, RerankerName: "fake", Logf: logf})
	for _, rq := range requests {
		for range 2 {
			if code, m := lenient.do(t, "POST", rq.path, rq.body); code != 200 {
				t.Errorf("%s %s: %d %v", rq.path, rq.body, code, m)
			}
		}
	}
	mu.Lock()
	// 6 names (nomic-embed-text twice), each logged once.
	if len(logged) != 6 {
		t.Errorf("logged %d lines, want 6 (one per name): %q", len(logged), logged)
	}
	mu.Unlock()
	strict := newTestServer(t, Options{Reranker: &fakeReranker{}, RerankerName: "fake", StrictModel: true})
	for _, rq := range requests {
		code, m := strict.do(t, "POST", rq.path, rq.body)
		if code != 404 || !strings.Contains(errMessage(m)+plainMessage(m), "leave server.Options.StrictModel unset") {
			t.Errorf("strict %s: %d %v, want 404 saying how to let other names through", rq.path, code, m)
		}
	}
	for _, rq := range []struct{ path, body string }{
		{"/v1/embeddings", `{"input": "x", "model": "test-fp-0123456789"}`},
		{"/api/embed", `{"input": "x", "model": "test-fp-0123456789:latest"}`},
		{"/v1/rerank", `{"query": "x", "documents": ["x"], "model": "fake"}`},
	} {
		if code, m := strict.do(t, "POST", rq.path, rq.body); code != 200 {
			t.Errorf("strict %s with the served name: %d %v", rq.path, code, m)
		}
	}
	if code, m := strict.do(t, "GET", "/v1/models/test-fp-0123456789", ""); code != 200 || m["id"] != "test-fp-0123456789" {
		t.Errorf("GET /v1/models/{served}: %d %v", code, m)
	}
	if code, m := strict.do(t, "GET", "/v1/models/fake", ""); code != 200 || m["id"] != "fake" {
		t.Errorf("GET /v1/models/{reranker}: %d %v", code, m)
	}
	if code, m := strict.do(t, "GET", "/v1/models/gpt-4", ""); code != 404 || errCode(m) != "model_not_found" {
		t.Errorf("GET /v1/models/gpt-4: %d %v", code, m)
	}
}

// plainMessage is the message of an error in Ollama's and TEI's shape.
func plainMessage(m map[string]any) string {
	s, _ := m["error"].(string)
	return s
}

// TestDialectShapes: each dialect's answer in its API's shape, with the
// served encoder's vectors (queries where the request says so) and the
// reranker's order; errors of Ollama's and TEI's routes as a string.
func TestDialectShapes(t *testing.T) {
	ts := newTestServer(t, Options{Reranker: &fakeReranker{}, RerankerName: "fake", APIKey: "k"})
	h := &encodertest.Hashing{D: 32, FP: "x"}
	doc, _ := h.EmbedDocuments(context.Background(), []string{"bread"})
	query, _ := h.EmbedQueries(context.Background(), []string{"bread"}, encoder.Prompt{})
	auth := []string{"Authorization", "Bearer k"}
	vec := func(v any) []float32 { return vecOf(t, v) }
	same := func(label string, got any, want []float32) {
		t.Helper()
		g := vec(got)
		if len(g) != len(want) {
			t.Fatalf("%s: %d dimensions", label, len(g))
		}
		for i := range g {
			if g[i] != want[i] {
				t.Fatalf("%s[%d] = %v, want %v", label, i, g[i], want[i])
			}
		}
	}

	code, m := ts.do(t, "POST", "/v1/embed", `{"texts": ["bread"], "input_type": "search_query", "truncate": "END", "new_field": 1}`, auth...)
	if code != 200 || m["response_type"] != "embeddings_floats" || m["meta"].(map[string]any)["api_version"].(map[string]any)["version"] != "1" {
		t.Fatalf("cohere v1: %d %v", code, m)
	}
	same("cohere v1 search_query", m["embeddings"].([]any)[0], query[0])
	code, m = ts.do(t, "POST", "/v2/embed", `{"inputs": [{"content": [{"type": "text", "text": "bread"}]}], "input_type": "search_document", "embedding_types": ["float"]}`, auth...)
	if code != 200 || m["response_type"] != "embeddings_by_type" {
		t.Fatalf("cohere v2: %d %v", code, m)
	}
	same("cohere v2 inputs", m["embeddings"].(map[string]any)["float"].([]any)[0], doc[0])
	for _, c := range []struct{ path, body, want string }{
		{"/v1/embed", `{"texts": ["x"], "embedding_types": ["int8"]}`, `"int8"`},
		{"/v1/embed", `{"texts": ["x"], "input_type": "image"}`, "input_type"},
		{"/v2/embed", `{"texts": []}`, `"texts"`},
		{"/v2/embed", `{"inputs": [{"content": [{"type": "image_url"}]}]}`, "text only"},
		{"/v2/embed", `{"texts": ["x"], "output_dimension": 8}`, "output_dimension 8"},
		{"/v2/rerank", `{"query": "x", "documents": ["a"], "top_n": 0}`, "top_n"},
	} {
		if code, m := ts.do(t, "POST", c.path, c.body, auth...); code != 400 || !strings.Contains(errMessage(m), c.want) {
			t.Errorf("%s %s: %d %v, want 400 naming %s", c.path, c.body, code, m, c.want)
		}
	}

	// Jina's rerank: documents back unless return_documents is false.
	code, m = ts.do(t, "POST", "/v1/rerank", `{"model": "jina-reranker-v2-base-multilingual", "query": "wild yeast bread", "documents": ["graphs", {"text": "wild yeast bread"}], "top_n": 1}`, auth...)
	res := m["results"].([]any)
	if code != 200 || len(res) != 1 || res[0].(map[string]any)["document"].(map[string]any)["text"] != "wild yeast bread" {
		t.Fatalf("jina rerank: %d %v", code, m)
	}
	_, m = ts.do(t, "POST", "/v1/rerank", `{"query": "q", "documents": ["a"], "return_documents": false}`, auth...)
	if _, ok := m["results"].([]any)[0].(map[string]any)["document"]; ok {
		t.Errorf("return_documents false: %v", m)
	}

	// TEI.
	code, m2 := ts.doAny(t, "POST", "/embed", `{"inputs": "bread", "prompt_name": "query", "normalize": true}`, auth...)
	if code != 200 {
		t.Fatalf("tei embed: %d %v", code, m2)
	}
	same("tei query", m2.([]any)[0], query[0])
	code, m2 = ts.doAny(t, "POST", "/rerank", `{"query": "wild yeast bread", "texts": ["graphs", "bread with yeast", "wild yeast bread"], "raw_scores": true, "return_text": true}`, auth...)
	ranks := m2.([]any)
	if code != 200 || len(ranks) != 3 || ranks[0].(map[string]any)["index"] != 2.0 || ranks[0].(map[string]any)["score"] != 3.0 || ranks[0].(map[string]any)["text"] != "wild yeast bread" {
		t.Fatalf("tei rerank: %d %v", code, m2)
	}
	code, m2 = ts.doAny(t, "POST", "/", `{"query": "bread", "texts": ["graphs", "bread"]}`, auth...)
	if code != 200 || m2.([]any)[0].(map[string]any)["index"] != 1.0 {
		t.Fatalf("tei root rerank: %d %v", code, m2)
	}
	if code, m = ts.do(t, "GET", "/info", "", auth...); code != 200 || m["model_id"] != "test-fp-0123456789" {
		t.Fatalf("tei info: %d %v", code, m)
	}
	if code, m = ts.do(t, "POST", "/embed", `{"inputs": [[101, 102]]}`, auth...); code != 400 || !strings.Contains(plainMessage(m), "token IDs") || m["error_type"] != "invalid_request" {
		t.Errorf("tei token ids: %d %v, want a plain error", code, m)
	}
	// POST / wants the key; GET / (the page) does not.
	if code, _ := ts.do(t, "POST", "/", `{"inputs": "x"}`); code != 401 {
		t.Errorf("POST / without the key: %d", code)
	}
	if code, _ := ts.do(t, "GET", "/", ""); code != 200 {
		t.Errorf("GET / without the key: %d", code)
	}

	// Ollama.
	code, m = ts.do(t, "POST", "/api/embed", `{"model": "test-fp-0123456789:latest", "input": ["bread"], "truncate": true, "options": {"num_ctx": 512}}`, auth...)
	if code != 200 || m["model"] != "test-fp-0123456789:latest" {
		t.Fatalf("ollama embed: %d %v", code, m)
	}
	same("ollama embed", m["embeddings"].([]any)[0], doc[0])
	if code, m = ts.do(t, "POST", "/api/embeddings", `{"model": "x", "prompt": ""}`, auth...); code != 400 || !strings.Contains(plainMessage(m), "prompt[0]: empty text") {
		t.Errorf("ollama empty prompt: %d %v", code, m)
	}
	if code, m = ts.do(t, "GET", "/api/tags", "", auth...); code != 200 || len(m["models"].([]any)) != 1 {
		t.Errorf("ollama tags: %d %v", code, m)
	}
}
