package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// send sends a request with a client that gives up after limit, and
// returns the status, the error code, the body's length and the time it
// took (status 0: no answer within limit).
func (ts *testServer) send(t *testing.T, method, path, body string, limit time.Duration) (int, string, int, time.Duration) {
	t.Helper()
	code, _, b, took, err := ts.exchange(t, method, path, body, map[string]string{"Content-Type": "application/json"}, limit)
	if err != nil {
		return 0, err.Error(), 0, took
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return code, errCode(m), len(b), took
}

// exchange sends one request with the given headers (Host among them, as
// a client that is not net/http may write it; an empty value removes the
// header) and returns the answer, with a client that gives up after limit.
func (ts *testServer) exchange(t *testing.T, method, path, body string, header map[string]string, limit time.Duration) (int, http.Header, []byte, time.Duration, error) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "" || body == "" && k == "Content-Type":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: limit}).Do(req)
	if err != nil {
		return 0, nil, nil, time.Since(start), err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, time.Since(start), nil
}

// TestClientMistakesAre4xx: issue 59's third finding. Metadata with an
// empty key was answered 500 internal, a 40 KiB ID 500 "key too large"
// (echoing the ID whole), and a 1 MB ID in a URL came back in a 1 MB 404.
// Each is now a 4xx whose body is short.
func TestClientMistakesAre4xx(t *testing.T) {
	ts := newTestServer(t, Options{})
	longID := strings.Repeat("i", 40<<10)
	hugeID := strings.Repeat("j", 1<<20-4096) // the URL within net/http's 1 MB of headers
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"metadata with an empty key", "POST", "/v1/documents", `{"documents": [{"id": "a", "text": "x", "metadata": {"": "v"}}]}`, 400, "invalid_request"},
		{"a list under an empty key", "POST", "/v1/documents", `{"documents": [{"id": "a", "text": "x", "metadata": {"": ["v", "w"]}}]}`, 400, "invalid_request"},
		{"a 40 KiB ID", "POST", "/v1/documents", `{"documents": [{"id": "` + longID + `", "text": "x"}]}`, 400, "invalid_request"},
		{"a 1 MB ID to get", "GET", "/v1/documents/" + hugeID, "", 404, "not_found"},
		{"a 1 MB ID to delete", "DELETE", "/v1/documents/" + hugeID, "", 404, "not_found"},
		{"a 1 MB unknown mode", "POST", "/v1/search", `{"query": "a", "mode": "` + hugeID + `"}`, 400, "invalid_request"},
		{"a 1 MB unknown field", "POST", "/v1/search", `{"query": "a", "` + hugeID + `": 1}`, 400, "invalid_request"},
		{"a 1 MB model name", "POST", "/v1/embeddings", `{"input": "a", "model": "` + hugeID + `"}`, 400, "invalid_request"},
		{"a 1 MB filter key", "POST", "/v1/search", `{"query": "a", "filter": {"in": {"` + hugeID + `": []}}}`, 400, "invalid_request"},
	} {
		code, ecode, n, _ := ts.send(t, c.method, c.path, c.body, 60*time.Second)
		if code != c.status || ecode != c.code {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, ecode, c.status, c.code)
		}
		if n > 3000 {
			t.Errorf("%s: a %d-byte answer", c.name, n)
		}
	}
}

// TestTextBudgets: issue 59's second finding. One 15 MB /v1/embeddings
// input raised the server's RSS by 1.9 GB and ran 51-54 s past the 30 s
// timeout (every input was tokenized whole, before the batcher, without
// looking at the deadline); a 15 MB document timed out. A text over
// Limits.MaxTextBytes and a request over Limits.MaxRequestTokens are now
// refused before the model is called, and the counting stops at the
// request's deadline.
func TestTextBudgets(t *testing.T) {
	ts := newTestServer(t, Options{Limits: Limits{MaxBodyBytes: 64 << 20}})
	big := strings.Repeat("tidal words ", 4<<20/12) // over MaxTextBytes, like the 15 MB of the finding
	many := make([]string, 2048)
	for i := range many {
		many[i] = strings.Repeat("wave ", 300) // 300 tokens each: 2048 × 256 kept, over 300,000
	}
	manyJSON, _ := json.Marshal(map[string]any{"input": many})
	docs := make([]map[string]string, 200)
	for i := range docs {
		docs[i] = map[string]string{"id": strings.Repeat("d", i+1), "text": strings.Repeat("shore ", 3000)}
	}
	docsJSON, _ := json.Marshal(map[string]any{"documents": docs})
	for _, c := range []struct {
		name, path, body string
	}{
		{"a 4 MB input", "/v1/embeddings", `{"input": "` + big + `"}`},
		{"2048 inputs of 300 tokens", "/v1/embeddings", string(manyJSON)},
		{"a 4 MB document", "/v1/documents", `{"documents": [{"id": "big", "text": "` + big + `"}]}`},
		{"200 documents of 3,000 tokens", "/v1/documents", string(docsJSON)},
	} {
		calls := ts.enc.calls.Load()
		code, ecode, _, took := ts.send(t, "POST", c.path, c.body, 20*time.Second)
		if code != 400 || ecode != "limit_exceeded" {
			t.Errorf("%s: %d %q after %v, want 400 limit_exceeded", c.name, code, ecode, took)
		}
		if n := ts.enc.calls.Load() - calls; n != 0 {
			t.Errorf("%s: the model was called %d times", c.name, n)
		}
	}
	// Within the budgets, a long input is read up to the model's window.
	if code, ecode, _, took := ts.send(t, "POST", "/v1/embeddings", `{"input": "`+strings.Repeat("tidal words ", 80000)+`"}`, 20*time.Second); code != 200 {
		t.Errorf("a 960 KB input: %d %q after %v", code, ecode, took)
	}
}

// TestCountingHonoursDeadline: texts that are slow to count (words of
// 20,000 letters, which the tokenizer reads by their first 64 bytes per
// token kept) stop being counted at the request's deadline.
func TestCountingHonoursDeadline(t *testing.T) {
	ts := newTestServer(t, Options{Timeout: time.Second,
		Limits: Limits{MaxBodyBytes: 128 << 20, MaxTextBytes: 1 << 30, MaxRequestTokens: 1 << 30}})
	in := make([]string, 1000)
	for i := range in {
		in[i] = strings.Repeat("a", 30000)
	}
	body, _ := json.Marshal(map[string]any{"input": in})
	code, ecode, _, took := ts.send(t, "POST", "/v1/embeddings", string(body), 60*time.Second)
	// 504 when the counting meets the deadline; on a loaded machine the
	// 30 MB body itself may not arrive within the second (408, the body's
	// read deadline). Either way the request ends soon after its deadline:
	// before the budgets it ran 49 s past it.
	if !(code == 504 && ecode == "timeout" || code == 408) || took > 10*time.Second {
		t.Errorf("got %d %q after %v, want 504 timeout (or 408) soon after 1 s", code, ecode, took)
	}
}
