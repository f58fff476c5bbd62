package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/encodertest"
)

// countingEncoder counts EmbedDocuments calls and texts; block, when set,
// makes each call wait for it (or the context).
type countingEncoder struct {
	*encodertest.Hashing
	calls, texts atomic.Int64
	block        chan struct{}
	maxBatch     atomic.Int64
}

func (c *countingEncoder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls.Add(1)
	c.texts.Add(int64(len(texts)))
	for {
		m := c.maxBatch.Load()
		if int64(len(texts)) <= m || c.maxBatch.CompareAndSwap(m, int64(len(texts))) {
			break
		}
	}
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Hashing.EmbedDocuments(ctx, texts)
}

func (c *countingEncoder) Unwrap() encoder.Encoder { return c.Hashing }

// testServer is an engine on a temporary directory (the hashing encoder)
// behind a Server on a loopback httptest server.
type testServer struct {
	eng *engine.Engine
	srv *Server
	enc *countingEncoder
	url string
}

func newTestServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	enc := &countingEncoder{Hashing: &encodertest.Hashing{D: 32, FP: "test-fp-0123456789"}}
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "idx"), engine.Options{Encoder: enc, NoShare: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv) // 127.0.0.1
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		eng.Close()
	})
	return &testServer{eng: eng, srv: srv, enc: enc, url: hs.URL}
}

// do sends a request and returns the status and the decoded JSON body
// (nil when the answer is not a JSON object).
func (ts *testServer) do(t *testing.T, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	code, v := ts.doAny(t, method, path, body, header...)
	m, _ := v.(map[string]any)
	return code, m
}

// doAny sends a request and returns the status and the decoded JSON body,
// whatever its shape (TEI's answers are arrays); nil when it is not JSON.
func (ts *testServer) doAny(t *testing.T, method, path, body string, header ...string) (int, any) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, v
}

// errCode is the error code of an error answer.
func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["message"].(string)
	return c
}

const testDocs = `{"documents": [
 {"id": "hnsw", "title": "HNSW", "text": "Layered proximity graphs for approximate nearest neighbour search over vectors.", "metadata": {"topic": "search", "year": 2016}},
 {"_id": "bm25", "title": "BM25", "text": "A ranking function built from term frequencies and document lengths.", "metadata": {"topic": "search", "year": 1994}},
 {"id": "bread", "title": "Sourdough", "text": "Bread leavened by wild yeast and lactic acid bacteria.", "metadata": {"topic": "food", "tags": ["baking", "yeast"]}}
]}`

func TestDocumentsSearchStats(t *testing.T) {
	ts := newTestServer(t, Options{})
	code, m := ts.do(t, "POST", "/v1/documents", testDocs)
	if code != 200 || m["added"] != 3.0 || m["committed"] != true {
		t.Fatalf("add: %d %v", code, m)
	}
	// The same batch again: unchanged, nothing committed.
	if code, m = ts.do(t, "POST", "/v1/documents", testDocs); code != 200 || m["unchanged"] != 3.0 {
		t.Fatalf("re-add: %d %v", code, m)
	}
	// JSON lines, an update and an unknown field (a warning).
	req, _ := http.NewRequest("POST", ts.url+"/v1/documents", strings.NewReader(`{"id": "bread", "title": "Sourdough", "text": "Bread leavened by wild yeast.", "tags": "x"}`+"\n"))
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ar AddResponse
	json.NewDecoder(resp.Body).Decode(&ar)
	resp.Body.Close()
	if resp.StatusCode != 200 || ar.Updated != 1 || len(ar.Warnings) != 1 || !strings.Contains(ar.Warnings[0], `unknown field "tags"`) {
		t.Fatalf("ndjson add: %d %+v", resp.StatusCode, ar)
	}

	code, m = ts.do(t, "GET", "/v1/documents/hnsw", "")
	if code != 200 || m["title"] != "HNSW" || m["metadata"].(map[string]any)["year"] != 2016.0 {
		t.Fatalf("get: %d %v", code, m)
	}

	code, m = ts.do(t, "POST", "/v1/search", `{"query": "nearest neighbour graphs", "k": 2, "mode": "hybrid", "filter": {"topic": "search"}, "snippets": true, "explain": true}`)
	if code != 200 {
		t.Fatalf("search: %d %v", code, m)
	}
	hits := m["hits"].([]any)
	if len(hits) != 2 || hits[0].(map[string]any)["id"] != "hnsw" {
		t.Fatalf("search hits: %v", hits)
	}
	h0 := hits[0].(map[string]any)
	if len(h0["explain"].([]any)) != 2 || h0["snippet"].(map[string]any)["highlights"] == nil {
		t.Fatalf("hit without explain or snippet: %v", h0)
	}
	// A filter on numbers, another mode, fusion, weights.
	code, m = ts.do(t, "POST", "/v1/search", `{"query": "ranking", "mode": "lexical", "filter": {"range": {"year": {"gte": 1990, "lt": 2000}}}}`)
	if code != 200 || len(m["hits"].([]any)) != 1 || m["hits"].([]any)[0].(map[string]any)["id"] != "bm25" {
		t.Fatalf("lexical filtered search: %d %v", code, m)
	}
	code, m = ts.do(t, "POST", "/v1/search", `{"query": "yeast", "fusion": "dbsf", "weights": {"dense": 2}, "filter": {"colour": "red"}}`)
	if code != 200 || len(m["hits"].([]any)) != 0 || !strings.Contains(fmt.Sprint(m["warnings"]), `"colour"`) {
		t.Fatalf("search on an unknown key: %d %v", code, m)
	}

	code, m = ts.do(t, "GET", "/v1/stats", "")
	if code != 200 || m["documents"] != 3.0 || m["fingerprint"] != "test-fp-0123456789" {
		t.Fatalf("stats: %d %v", code, m)
	}
	if code, m = ts.do(t, "DELETE", "/v1/documents/bread", ""); code != 200 || m["deleted"] != 1.0 {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, m = ts.do(t, "DELETE", "/v1/documents/bread", ""); code != 404 || errCode(m) != "not_found" {
		t.Fatalf("delete again: %d %v", code, m)
	}
	if code, m = ts.do(t, "GET", "/v1/documents/bread", ""); code != 404 || errCode(m) != "not_found" {
		t.Fatalf("get deleted: %d %v", code, m)
	}
	// An ID that looks like a path is only a key.
	if code, m = ts.do(t, "GET", "/v1/documents/..%2F..%2Fetc%2Fpasswd", ""); code != 404 || errCode(m) != "not_found" {
		t.Fatalf("get path-like id: %d %v", code, m)
	}
	if code, _ := ts.do(t, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
}

func TestErrors(t *testing.T) {
	ts := newTestServer(t, Options{Limits: Limits{MaxBodyBytes: 4096, MaxBatch: 2, MaxK: 50, MaxQueryBytes: 100, MaxInputs: 3}})
	if code, m := ts.do(t, "POST", "/v1/documents", `{"documents": [{"id": "a", "text": "alpha"}]}`); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	big := `{"query": "` + strings.Repeat("x", 5000) + `"}`
	for _, c := range []struct {
		method, path, body string
		status             int
		code, message      string
	}{
		{"POST", "/v1/search", `{"query": "a"`, 400, "invalid_request", "invalid JSON"},
		{"POST", "/v1/search", ``, 400, "invalid_request", "empty request body"},
		{"POST", "/v1/search", `{"query": "a", "kk": 3}`, 400, "invalid_request", `unknown field "kk"`},
		{"POST", "/v1/search", `{"query": "a", "k": "3"}`, 400, "invalid_request", `field "k": want a number`},
		{"POST", "/v1/search", `{"query": "a"} {}`, 400, "invalid_request", "data after"},
		{"POST", "/v1/search", `{"query": "  "}`, 400, "invalid_request", "empty query"},
		{"POST", "/v1/search", `{"query": "a", "k": 51}`, 400, "limit_exceeded", "k: 51, over the limit of 50"},
		{"POST", "/v1/search", `{"query": "a", "k": -1}`, 400, "invalid_request", "negative"},
		{"POST", "/v1/search", `{"query": "` + strings.Repeat("y", 101) + `"}`, 400, "limit_exceeded", "query: 101 bytes"},
		{"POST", "/v1/search", big, 413, "too_large", "over 4096 bytes"},
		{"POST", "/v1/search", `{"query": "a", "mode": "fuzzy"}`, 400, "invalid_request", "mode"},
		{"POST", "/v1/search", `{"query": "a", "fusion": "max"}`, 400, "invalid_request", "fusion"},
		{"POST", "/v1/search", `{"query": "a", "weights": {"sparse": 1}}`, 400, "invalid_request", "sparse"},
		{"POST", "/v1/search", `{"query": "a", "filter": {"or": []}}`, 400, "invalid_request", "filter"},
		{"POST", "/v1/search", `{"query": "a", "mode": "rerank"}`, 400, "unsupported", "no reranker"}, // a 5xx would be retried by clients
		{"POST", "/v1/search", `{"query": "a", "k": 5, "depth": 2}`, 400, "invalid_request", "depth (2) must be at least k (5)"},
		{"GET", "/v1/search", ``, 405, "method_not_allowed", "allowed: POST"},
		{"PUT", "/v1/documents/a", `{}`, 405, "method_not_allowed", "allowed: GET, DELETE"},
		{"GET", "/v2/nothing", ``, 404, "not_found", "no route GET /v2/nothing"},
		{"POST", "/v1/documents", `{"documents": [{"id": "b", "title": "", "text": " "}]}`, 400, "invalid_request", `documents:1: document "b": empty title and text`},
		{"POST", "/v1/documents", `{"documents": [{"id": "b", "text": "x"}, {"text": "no id"}]}`, 400, "invalid_request", "documents:2"},
		{"POST", "/v1/documents", `{"documents": [{"id": "b", "text": 3}]}`, 400, "invalid_request", "text"},
		{"POST", "/v1/documents", `{"documents": [{"id": "1", "text": "x"}, {"id": "2", "text": "x"}, {"id": "3", "text": "x"}]}`, 400, "limit_exceeded", "3 in one request, over the limit of 2"},
		{"POST", "/v1/documents", `{"documents": []}`, 400, "invalid_request", "none given"},
		{"POST", "/v1/documents", `{}`, 400, "invalid_request", `"documents": missing`},
		{"POST", "/v1/embeddings", `{"input": ["a", "b", "c", "d"]}`, 400, "limit_exceeded", "4 texts"},
		{"POST", "/v1/embeddings", `{"input": [[1, 2, 3]]}`, 400, "invalid_request", "check_embedding_ctx_length=False"},
		{"POST", "/v1/embeddings", `{"input": [1, 2, 3]}`, 400, "invalid_request", "token IDs"},
		{"POST", "/v1/embeddings", `{"input": "a", "encoding_format": "int8"}`, 400, "invalid_request", "encoding_format"},
		{"POST", "/v1/embeddings", `{"input": "a", "dimensions": 8}`, 400, "invalid_request", "dimensions 8"},
		{"POST", "/v1/embeddings", `{"input": ""}`, 400, "invalid_request", "input[0]: empty"},
		{"POST", "/v1/embeddings", `{}`, 400, "invalid_request", `"input": missing`},
		{"POST", "/v1/rerank", `{"query": "a", "documents": ["x"]}`, 400, "unsupported", "no reranker"},
	} {
		code, m := ts.do(t, c.method, c.path, c.body)
		if code != c.status || errCode(m) != c.code || !strings.Contains(errMessage(m), c.message) {
			t.Errorf("%s %s %.60s: got %d %q %q, want %d %q containing %q", c.method, c.path, c.body, code, errCode(m), errMessage(m), c.status, c.code, c.message)
		}
	}
	// The engine's own message, as the CLI prints it.
	_, m := ts.do(t, "POST", "/v1/search", `{"query": "a", "weights": {"dense": -1}}`)
	if !strings.Contains(errMessage(m), "SearchOptions.Weights") {
		t.Errorf("weights error %q does not carry the engine's message", errMessage(m))
	}
}

func TestAuthAndReadOnly(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "s3cret", ReadOnly: true})
	if code, m := ts.do(t, "GET", "/v1/stats", ""); code != 401 || errCode(m) != "unauthorized" {
		t.Fatalf("no key: %d %v", code, m)
	}
	if code, m := ts.do(t, "GET", "/v1/stats", "", "Authorization", "Bearer s3creT"); code != 401 || errCode(m) != "unauthorized" {
		t.Fatalf("wrong key: %d %v", code, m)
	}
	if code, m := ts.do(t, "GET", "/v1/stats", "", "Authorization", "Basic s3cret"); code != 401 {
		t.Fatalf("basic auth: %d %v", code, m)
	}
	if code, m := ts.do(t, "GET", "/v1/stats", "", "Authorization", "Bearer s3cret"); code != 200 {
		t.Fatalf("bearer: %d %v", code, m)
	}
	if code, m := ts.do(t, "GET", "/metrics", "", "X-API-Key", "s3cret"); code != 200 {
		t.Fatalf("x-api-key: %d %v", code, m)
	}
	for _, p := range []string{"/healthz", "/openapi.json", "/"} {
		if code, _ := ts.do(t, "GET", p, ""); code != 200 {
			t.Errorf("public %s: %d", p, code)
		}
	}
	if code, m := ts.do(t, "POST", "/v1/documents", `{"documents": [{"id": "a", "text": "x"}]}`, "Authorization", "Bearer s3cret"); code != 403 || errCode(m) != "read_only" {
		t.Fatalf("write on a read-only server: %d %v", code, m)
	}
	if code, m := ts.do(t, "DELETE", "/v1/documents/a", "", "Authorization", "Bearer s3cret"); code != 403 || errCode(m) != "read_only" {
		t.Fatalf("delete on a read-only server: %d %v", code, m)
	}
	if code, m := ts.do(t, "GET", "/v1/documents/a", "", "Authorization", "Bearer s3cret"); code != 404 {
		t.Fatalf("get on a read-only server: %d %v", code, m)
	}
}

// vecOf decodes one data[].embedding, float or base64.
func vecOf(t *testing.T, v any) []float32 {
	t.Helper()
	switch e := v.(type) {
	case []any:
		out := make([]float32, len(e))
		for i, x := range e {
			out[i] = float32(x.(float64))
		}
		return out
	case string:
		b, err := base64.StdEncoding.DecodeString(e)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	t.Fatalf("embedding of type %T", v)
	return nil
}

func TestEmbeddings(t *testing.T) {
	ts := newTestServer(t, Options{})
	want, _ := (&encodertest.Hashing{D: 32, FP: "x"}).EmbedDocuments(context.Background(), []string{"graphs of vectors", "bread"})
	for _, format := range []string{"float", "base64"} {
		code, m := ts.do(t, "POST", "/v1/embeddings", `{"input": ["graphs of vectors", "bread"], "model": "test-fp-0123", "encoding_format": "`+format+`", "dimensions": 32}`)
		if code != 200 || m["object"] != "list" {
			t.Fatalf("%s: %d %v", format, code, m)
		}
		data := m["data"].([]any)
		for i, d := range data {
			d := d.(map[string]any)
			if d["index"] != float64(i) || d["object"] != "embedding" || !slices.Equal(vecOf(t, d["embedding"]), want[i]) {
				t.Errorf("%s: data[%d] = %v, want %v", format, i, d, want[i])
			}
		}
		if _, ok := m["usage"].(map[string]any)["prompt_tokens"]; !ok {
			t.Errorf("no usage: %v", m)
		}
	}
	if code, m := ts.do(t, "POST", "/v1/embeddings", `{"input": "one text"}`); code != 200 || len(m["data"].([]any)) != 1 {
		t.Fatalf("a string input: %d %v", code, m)
	}
	if code, m := ts.do(t, "GET", "/v1/models", ""); code != 200 || m["data"].([]any)[0].(map[string]any)["id"] != "test-fp-0123456789" {
		t.Fatalf("models: %d %v", code, m)
	}
}

// TestEmbeddingsBatched: concurrent requests are answered by fewer model
// calls than requests, each with its own texts' vectors.
func TestEmbeddingsBatched(t *testing.T) {
	ts := newTestServer(t, Options{BatchWait: 20 * time.Millisecond})
	ts.enc.block = make(chan struct{})
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("text number %d", i)
			body, _ := json.Marshal(map[string]any{"input": []string{text, text + " again"}})
			resp, err := http.Post(ts.url+"/v1/embeddings", "application/json", bytes.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var out EmbeddingsResponse
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Data) != 2 {
				errs <- fmt.Errorf("request %d: %d %v %+v", i, resp.StatusCode, err, out)
				return
			}
			want, _ := ts.enc.Hashing.EmbedDocuments(context.Background(), []string{text, text + " again"})
			for k, d := range out.Data {
				var got []float32
				b, _ := json.Marshal(d.Embedding)
				json.Unmarshal(b, &got)
				if !slices.Equal(got, want[k]) {
					errs <- fmt.Errorf("request %d got another text's vector at %d", i, k)
				}
			}
		}()
	}
	// Let the requests queue behind the first (blocked) batch, then go.
	time.Sleep(200 * time.Millisecond)
	close(ts.enc.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	calls := ts.enc.calls.Load()
	if calls >= n || ts.enc.maxBatch.Load() < 4 {
		t.Errorf("%d requests took %d model calls (largest batch %d texts): not coalesced", n, calls, ts.enc.maxBatch.Load())
	}
	t.Logf("%d concurrent requests: %d model calls, largest batch %d texts", n, calls, ts.enc.maxBatch.Load())
}

// TestTimeoutCancelsModel: a request past Options.Timeout answers 504 and
// its batch's context is cancelled (the encoder sees it).
func TestTimeoutCancelsModel(t *testing.T) {
	ts := newTestServer(t, Options{Timeout: 150 * time.Millisecond})
	ts.enc.block = make(chan struct{}) // never closed: only the context ends the call
	start := time.Now()
	code, m := ts.do(t, "POST", "/v1/embeddings", `{"input": "slow"}`)
	if code != 504 || errCode(m) != "timeout" {
		t.Fatalf("got %d %v, want 504 timeout", code, m)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	// The search path: the engine gets the request's context.
	code, m = ts.do(t, "POST", "/v1/documents", `{"documents": [{"id": "a", "text": "blocked"}]}`)
	if code != 504 || errCode(m) != "timeout" {
		t.Fatalf("add past the timeout: got %d %v, want 504", code, m)
	}
}

// fakeReranker scores a document by the query words it holds.
type fakeReranker struct{ calls atomic.Int64 }

func (f *fakeReranker) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	f.calls.Add(1)
	out := make([]float32, len(docs))
	for i, d := range docs {
		for _, w := range strings.Fields(q) {
			if strings.Contains(d, w) {
				out[i]++
			}
		}
	}
	return out, nil
}

func TestRerank(t *testing.T) {
	rr := &fakeReranker{}
	ts := newTestServer(t, Options{Reranker: rr, RerankerName: "fake-reranker"})
	code, m := ts.do(t, "POST", "/v1/rerank", `{"query": "wild yeast bread", "documents": ["graphs", "bread with yeast", {"text": "wild yeast bread"}], "top_n": 2, "return_documents": true}`)
	if code != 200 {
		t.Fatalf("rerank: %d %v", code, m)
	}
	res := m["results"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["index"] != 2.0 || res[1].(map[string]any)["index"] != 1.0 {
		t.Fatalf("results: %v", res)
	}
	s0 := res[0].(map[string]any)["relevance_score"].(float64)
	if s0 <= 0 || s0 >= 1 || res[0].(map[string]any)["document"].(map[string]any)["text"] != "wild yeast bread" {
		t.Fatalf("result 0: %v", res[0])
	}
	for _, c := range []struct{ body, code string }{
		{`{"query": "", "documents": ["x"]}`, "invalid_request"},
		{`{"query": "q", "documents": []}`, "invalid_request"},
		{`{"query": "q", "documents": [3]}`, "invalid_request"},
		{`{"query": "q", "documents": ["x"], "top_n": 0}`, "invalid_request"},
	} {
		if code, m := ts.do(t, "POST", "/v1/rerank", c.body); errCode(m) != c.code {
			t.Errorf("%s: %d %v, want %s", c.body, code, m, c.code)
		}
	}
	// Mode rerank goes through the engine's reranker (the caller sets it).
	if code, m := ts.do(t, "POST", "/v1/search", `{"query": "q", "rerank": true, "mode": "lexical"}`); code != 400 {
		t.Errorf("rerank with mode lexical: %d %v", code, m)
	}
}

func TestMetrics(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.do(t, "POST", "/v1/documents", testDocs)
	ts.do(t, "POST", "/v1/search", `{"query": "bread"}`)
	ts.do(t, "POST", "/v1/search", `{"query": ""}`)
	ts.do(t, "POST", "/v1/embeddings", `{"input": "bread"}`)
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`anna_http_requests_total{code="200",method="POST",route="search"} 1`,
		`anna_http_requests_total{code="400",method="POST",route="search"} 1`,
		`anna_http_request_duration_seconds_count{route="documents"} 1`,
		`anna_batch_requests_count{kind="embeddings"} 1`,
		`anna_documents 3`,
		`anna_documents_written_total 3`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestOpenAPIMatchesRoutes: openapi.json describes exactly the routes
// served, with their methods.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ts := newTestServer(t, Options{})
	var spec struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	resp, err := http.Get(ts.url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&spec); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.HasPrefix(spec.OpenAPI, "3.") {
		t.Fatalf("openapi %q", spec.OpenAPI)
	}
	described := map[string]bool{}
	for p, ops := range spec.Paths {
		for method := range ops {
			if method != "parameters" {
				described[strings.ToUpper(method)+" "+p] = true
			}
		}
	}
	served := map[string]bool{}
	for _, rt := range ts.srv.routes() {
		p := strings.TrimSuffix(rt.pattern, "{$}")
		for method := range rt.methods {
			served[method+" "+p] = true
		}
	}
	for k := range served {
		if !described[k] {
			t.Errorf("%s is served but not in openapi.json", k)
		}
	}
	for k := range described {
		if !served[k] {
			t.Errorf("openapi.json describes %s, which is not served", k)
		}
	}
	// Each described route answers (not the catch-all 404 nor a 405).
	for k := range described {
		method, p, _ := strings.Cut(k, " ")
		code, m := ts.do(t, method, strings.ReplaceAll(p, "{id}", "x"), "")
		if code == 405 || (code == 404 && strings.Contains(errMessage(m), "no route")) {
			t.Errorf("%s: %d %v", k, code, m)
		}
	}
}

func TestPage(t *testing.T) {
	ts := newTestServer(t, Options{})
	resp, err := http.Get(ts.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `api("v1/search"`) || strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
		t.Fatalf("page: %d, %d bytes (wants no external URL)", resp.StatusCode, len(b))
	}
}

// TestErrorHint: an error that carries a hint (package hint) answers it in
// the JSON error, every shape, its text rendered by Options.HintText (the
// action's words without one); an error without one has no "hint".
func TestErrorHint(t *testing.T) {
	hintOf := func(m map[string]any, plain bool) map[string]any {
		e := m
		if !plain {
			e, _ = m["error"].(map[string]any)
		}
		hs, _ := e["hint"].([]any)
		if len(hs) != 1 {
			return nil
		}
		h, _ := hs[0].(map[string]any)
		return h
	}
	words := newTestServer(t, Options{})
	_, m := words.do(t, "POST", "/v1/rerank", `{"query": "a", "documents": ["x"]}`)
	if h := hintOf(m, false); h["kind"] != "set-option" || h["option"] != "server.Options.Reranker" || h["text"] != "set server.Options.Reranker" {
		t.Errorf("rerank without a reranker: %v", m)
	}
	if msg := errMessage(m); !strings.Contains(msg, "Options.Reranker") {
		t.Errorf("message %q", msg)
	}
	cli := newTestServer(t, Options{HintText: func(a hint.Action) string { return "run: " + a.Option }})
	_, m = cli.do(t, "POST", "/v1/search", `{"query": "a", "mode": "rerank"}`)
	if h := hintOf(m, false); h["text"] != "run: server.Options.Reranker" {
		t.Errorf("search mode rerank without a reranker: %v", m)
	}
	_, v := cli.doAny(t, "POST", "/rerank", `{"query": "a", "texts": ["x"]}`)
	if m, _ := v.(map[string]any); hintOf(m, true)["option"] != "server.Options.Reranker" {
		t.Errorf("TEI's rerank without a reranker: %v", v)
	}
	if _, m := cli.do(t, "GET", "/v2/nothing", ""); hintOf(m, false) != nil || strings.Contains(fmt.Sprint(m), "hint") {
		t.Errorf("an error without a hint: %v", m)
	}
}
