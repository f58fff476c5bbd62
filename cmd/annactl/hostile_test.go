package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The hostile-input suite (issue 59): what a hostile or careless client
// sends a running `annactl serve` (the default model, --timeout 10s), each
// case timed and its peak resident memory taken (/proc: VmHWM, reset
// before each case), against the server's idle memory after a warm-up.
// It asserts that no case costs more than twice the idle memory or runs
// past its deadline (the timeout and a second), and that no client mistake
// is answered 5xx. scripts/hostile.sh runs it and writes the table
// (docs/results/durability.md holds one).

// hostileCase is one request (or a few at once).
type hostileCase struct {
	name    string
	class   string // "mistake": a 4xx is wanted; "valid": a 2xx; "attack": a 4xx, or the connection cut
	method  string
	path    string
	header  map[string]string
	body    func() []byte
	times   int           // sent this many at once (0: 1)
	slow    time.Duration // the body is sent a byte at a time, this far apart
	special func(url string) (int, error)
}

// hostileRow is a case's outcome.
type hostileRow struct {
	name, class   string
	status        string
	took          time.Duration
	peak, idle    int64 // kB
	ok            bool
	why           string
	statusNumbers []int
}

func repeatJSON(prefix, unit, suffix string, n int) func() []byte {
	return func() []byte { return []byte(prefix + strings.Repeat(unit, n) + suffix) }
}

func str(s string) func() []byte { return func() []byte { return []byte(s) } }

// deepFilter is /v1/search with a filter nested depth deep, the way
// issue 59 found: 9,990 nots in 80 KB.
func deepFilter(op string, depth int) func() []byte {
	return func() []byte {
		open, close := `{"not": `, `}`
		if op == "and" {
			open, close = `{"and": [`, `]}`
		}
		return []byte(`{"query": "graphs", "filter": ` + strings.Repeat(open, depth) + `{"topic": "search"}` + strings.Repeat(close, depth) + `}`)
	}
}

func hostileCases() []hostileCase {
	big := strings.Repeat("tidal words ", 15<<20/12) // 15 MB
	ndjson := strings.Repeat(`{"id": "n", "text": "x"}`+"\n", 2000)
	many := make([]string, 2048)
	for i := range many {
		many[i] = strings.Repeat("wave ", 300)
	}
	manyJSON, _ := json.Marshal(map[string]any{"input": many})
	var docs []map[string]string
	for i := range 600 {
		docs = append(docs, map[string]string{"id": fmt.Sprint("bulk", i), "text": strings.Repeat("shore ", 3000)})
	}
	docsJSON, _ := json.Marshal(map[string]any{"documents": docs})
	hugeID := strings.Repeat("i", 1<<20-8192)
	return []hostileCase{
		// Issue 59's findings.
		{name: "filter: not nested 9,990 deep (80 KB)", class: "mistake", method: "POST", path: "/v1/search", body: deepFilter("not", 9990)},
		{name: "filter: not nested 9,990 deep, 8 at once", class: "mistake", method: "POST", path: "/v1/search", body: deepFilter("not", 9990), times: 8},
		{name: "filter: and nested 9,990 deep", class: "mistake", method: "POST", path: "/v1/search", body: deepFilter("and", 9990)},
		{name: "filter: not nested 65 deep (one past the limit)", class: "mistake", method: "POST", path: "/v1/search", body: deepFilter("not", 65)},
		{name: "filter: not nested 64 deep (the limit)", class: "valid", method: "POST", path: "/v1/search", body: deepFilter("not", 64)},
		{name: "embeddings: one 15 MB input", class: "mistake", method: "POST", path: "/v1/embeddings", body: func() []byte { return []byte(`{"input": "` + big + `"}`) }},
		{name: "embeddings: one 15 MB input, 4 at once", class: "mistake", method: "POST", path: "/v1/embeddings", body: func() []byte { return []byte(`{"input": "` + big + `"}`) }, times: 4},
		{name: "embeddings: 2,048 inputs of 300 tokens (over 300,000)", class: "mistake", method: "POST", path: "/v1/embeddings", body: func() []byte { return manyJSON }},
		{name: "embeddings: one 900 KB input (read up to the window)", class: "valid", method: "POST", path: "/v1/embeddings", body: repeatJSON(`{"input": "`, "tidal words ", `"}`, 75000)},
		{name: "embeddings: 256 short inputs", class: "valid", method: "POST", path: "/v1/embeddings", body: func() []byte {
			in := make([]string, 256)
			for i := range in {
				in[i] = fmt.Sprint("a short sentence about graphs number ", i)
			}
			b, _ := json.Marshal(map[string]any{"input": in})
			return b
		}},
		{name: "documents: one 15 MB document", class: "mistake", method: "POST", path: "/v1/documents", body: func() []byte { return []byte(`{"documents": [{"id": "big", "text": "` + big + `"}]}`) }},
		{name: "documents: 600 documents of 3,000 tokens (11 MB)", class: "mistake", method: "POST", path: "/v1/documents", body: func() []byte { return docsJSON }},
		{name: `documents: metadata {"": "v"}`, class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "a", "text": "x", "metadata": {"": "v"}}]}`)},
		{name: "documents: a 40 KiB ID", class: "mistake", method: "POST", path: "/v1/documents", body: func() []byte {
			return []byte(`{"documents": [{"id": "` + strings.Repeat("i", 40<<10) + `", "text": "x"}]}`)
		}},
		{name: "GET a 1 MB ID", class: "mistake", method: "GET", path: "/v1/documents/" + hugeID},
		{name: "DELETE a 1 MB ID", class: "mistake", method: "DELETE", path: "/v1/documents/" + hugeID},
		{name: "check beside the server", class: "valid", special: func(string) (int, error) { return -1, nil }},
		// Malformed bodies.
		{name: "search: empty body", class: "mistake", method: "POST", path: "/v1/search", body: str("")},
		{name: "search: truncated JSON", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a"`)},
		{name: "search: not an object", class: "mistake", method: "POST", path: "/v1/search", body: str(`["query"]`)},
		{name: "search: JSON nested 100,000 deep", class: "mistake", method: "POST", path: "/v1/search", body: repeatJSON(`{"query": "a", "x": `, "[", "", 100000)},
		{name: "search: unknown field", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "kk": 1}`)},
		{name: "search: a 1 MB unknown field name", class: "mistake", method: "POST", path: "/v1/search", body: func() []byte { return []byte(`{"query": "a", "` + hugeID + `": 1}`) }},
		{name: "search: k as a string", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "k": "10"}`)},
		{name: "search: k = 10^30", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "k": 1000000000000000000000000000000}`)},
		{name: "search: k = -1", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "k": -1}`)},
		{name: "search: k = 1,001", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "k": 1001}`)},
		{name: "search: depth = 10^9", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "depth": 1000000000}`)},
		{name: "search: a 17 KB query", class: "mistake", method: "POST", path: "/v1/search", body: repeatJSON(`{"query": "`, "q", `"}`, 17000)},
		{name: "search: a blank query", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": " \t\n"}`)},
		{name: "search: unknown mode", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "mode": "fuzzy"}`)},
		{name: "search: a 1 MB mode", class: "mistake", method: "POST", path: "/v1/search", body: func() []byte { return []byte(`{"query": "a", "mode": "` + hugeID + `"}`) }},
		{name: "search: unknown fusion", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "fusion": "max"}`)},
		{name: "search: negative weight", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "weights": {"dense": -1}}`)},
		{name: "search: 100,000 weights", class: "mistake", method: "POST", path: "/v1/search", body: func() []byte {
			var b strings.Builder
			b.WriteString(`{"query": "a", "weights": {`)
			for i := range 100000 {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"w%d": 1`, i)
			}
			b.WriteString(`}}`)
			return []byte(b.String())
		}},
		{name: "search: snippet_size 10^6", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "snippets": true, "snippet_size": 1000000}`)},
		{name: "search: filter with an empty key", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "filter": {"": "v"}}`)},
		{name: "search: filter or []", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "filter": {"or": []}}`)},
		{name: "search: filter key with NUL", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "filter": {"k\u0000x": "v"}}`)},
		{name: "search: filter of 100,000 members", class: "valid", method: "POST", path: "/v1/search", body: func() []byte {
			var b strings.Builder
			b.WriteString(`{"query": "a", "filter": {"or": [`)
			for i := range 100000 {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `{"k%d": "v"}`, i)
			}
			b.WriteString(`]}}`)
			return []byte(b.String())
		}},
		{name: "search: filter: in with 200,000 values", class: "valid", method: "POST", path: "/v1/search", body: func() []byte {
			vals := make([]string, 200000)
			for i := range vals {
				vals[i] = strconv.Itoa(i)
			}
			b, _ := json.Marshal(map[string]any{"query": "a", "filter": map[string]any{"in": map[string]any{"topic": vals}}})
			return b
		}},
		{name: "search: invalid UTF-8 and NUL in the query", class: "valid", method: "POST", path: "/v1/search", body: str("{\"query\": \"gr\xffaphs \\u0000 search\"}")},
		{name: "search: script in the query (XSS)", class: "valid", method: "POST", path: "/v1/search", body: str(`{"query": "<script>alert(1)</script>", "snippets": true}`)},
		{name: "search: data after the object", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a"} {"query": "b"}`)},
		{name: "search: 16 MiB + 1 byte body", class: "mistake", method: "POST", path: "/v1/search", body: repeatJSON(`{"query": "`, "a", `"}`, 16<<20)},
		{name: "search: rerank without a reranker", class: "mistake", method: "POST", path: "/v1/search", body: str(`{"query": "a", "mode": "rerank"}`)},
		{name: "documents: not JSON", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "a", "text": "x"}`)},
		{name: "documents: none", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": []}`)},
		{name: "documents: missing", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{}`)},
		{name: "documents: no ID", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"text": "x"}]}`)},
		{name: "documents: blank title and text", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "a", "title": " ", "text": "\n"}]}`)},
		{name: "documents: text as a number", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "a", "text": 3}]}`)},
		{name: "documents: metadata as a list", class: "mistake", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "a", "text": "x", "metadata": [1]}]}`)},
		{name: "documents: metadata nested 10,000 deep", class: "mistake", method: "POST", path: "/v1/documents", body: repeatJSON(`{"documents": [{"id": "a", "text": "x", "metadata": {"k": `, "[", "", 10000)},
		{name: "documents: metadata number 1e999 (kept as its text)", class: "valid", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "a", "text": "x", "metadata": {"k": 1e999}}]}`)},
		{name: "documents: 1,025 documents", class: "mistake", method: "POST", path: "/v1/documents", body: func() []byte {
			var d []map[string]string
			for i := range 1025 {
				d = append(d, map[string]string{"id": fmt.Sprint(i), "text": "x"})
			}
			b, _ := json.Marshal(map[string]any{"documents": d})
			return b
		}},
		{name: "documents: 2,000 JSON lines (over 1,024)", class: "mistake", method: "POST", path: "/v1/documents", header: map[string]string{"Content-Type": "application/x-ndjson"}, body: str(ndjson)},
		{name: "documents: an ID of invalid UTF-8 (read as U+FFFD)", class: "valid", method: "POST", path: "/v1/documents", header: map[string]string{"Content-Type": "application/x-ndjson"}, body: str("{\"id\": \"\xff\xfe\", \"text\": \"x\"}\n")},
		{name: "documents: 8 valid documents", class: "valid", method: "POST", path: "/v1/documents", body: func() []byte {
			var d []map[string]any
			for i := range 8 {
				d = append(d, map[string]any{"id": fmt.Sprint("ok", i), "text": fmt.Sprint("graph search vector ", i), "metadata": map[string]any{"topic": "search", "n": i, "tags": []string{"a", "b"}}})
			}
			b, _ := json.Marshal(map[string]any{"documents": d})
			return b
		}},
		{name: "documents: a path as an ID (../../etc/passwd)", class: "valid", method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "../../etc/passwd", "text": "not a file"}]}`)},
		{name: "GET ../../etc/passwd as an ID (the document above)", class: "valid", method: "GET", path: "/v1/documents/..%2f..%2fetc%2fpasswd"},
		{name: "embeddings: token arrays", class: "mistake", method: "POST", path: "/v1/embeddings", body: str(`{"input": [[1, 2, 3]]}`)},
		{name: "embeddings: an empty input", class: "mistake", method: "POST", path: "/v1/embeddings", body: str(`{"input": ""}`)},
		{name: "embeddings: 2,049 inputs", class: "mistake", method: "POST", path: "/v1/embeddings", body: func() []byte {
			in := make([]string, 2049)
			for i := range in {
				in[i] = "x"
			}
			b, _ := json.Marshal(map[string]any{"input": in})
			return b
		}},
		{name: "embeddings: unknown encoding_format", class: "mistake", method: "POST", path: "/v1/embeddings", body: str(`{"input": "a", "encoding_format": "int8"}`)},
		{name: "embeddings: dimensions 8", class: "mistake", method: "POST", path: "/v1/embeddings", body: str(`{"input": "a", "dimensions": 8}`)},
		{name: "embeddings: input as an object", class: "mistake", method: "POST", path: "/v1/embeddings", body: str(`{"input": {"text": "a"}}`)},
		{name: "rerank: without a reranker", class: "mistake", method: "POST", path: "/v1/rerank", body: str(`{"query": "a", "documents": ["b"]}`)},
		// The protocol and the desktop.
		{name: "a write with no Content-Type", class: "attack", method: "POST", path: "/v1/documents", header: map[string]string{"Content-Type": ""}, body: str(`{"documents": [{"id": "planted", "text": "x"}]}`)},
		{name: "a write as text/plain (fetch no-cors)", class: "attack", method: "POST", path: "/v1/documents", header: map[string]string{"Content-Type": "text/plain"}, body: str(`{"documents": [{"id": "planted", "text": "x"}]}`)},
		{name: "a write as a form (curl -d)", class: "attack", method: "POST", path: "/v1/search", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: str(`{"query": "a"}`)},
		{name: "Host: attacker.example (DNS rebinding)", class: "attack", method: "POST", path: "/v1/documents", header: map[string]string{"Host": "attacker.example"}, body: str(`{"documents": [{"id": "planted", "text": "x"}]}`)},
		{name: "a read with Host: attacker.example", class: "attack", method: "GET", path: "/v1/stats", header: map[string]string{"Host": "attacker.example"}},
		{name: "a write from Origin: http://evil.example", class: "attack", method: "POST", path: "/v1/documents", header: map[string]string{"Origin": "http://evil.example"}, body: str(`{"documents": [{"id": "planted", "text": "x"}]}`)},
		{name: "a delete from Origin: null", class: "attack", method: "DELETE", path: "/v1/documents/ok1", header: map[string]string{"Origin": "null"}},
		{name: "a CORS preflight from another origin", class: "attack", method: "OPTIONS", path: "/v1/documents", header: map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}},
		{name: "a body at 1 byte / 0.5 s", class: "attack", method: "POST", path: "/v1/search", body: str(strings.Repeat(" ", 100) + `{"query": "a"}`), slow: 500 * time.Millisecond},
		{name: "headers at 1 byte / 0.5 s", class: "attack", special: slowHeaders},
		{name: "10,000 headers", class: "attack", special: manyHeaders},
		{name: "PUT /v1/search", class: "mistake", method: "PUT", path: "/v1/search", body: str(`{}`)},
		{name: "GET /v2/nothing", class: "mistake", method: "GET", path: "/v2/nothing"},
		{name: "GET /../../etc/passwd", class: "mistake", method: "GET", path: "/%2e%2e/%2e%2e/etc/passwd"},
		{name: "a 1 MB URL path", class: "mistake", method: "GET", path: "/" + hugeID},
		{name: "the search page", class: "valid", method: "GET", path: "/"},
		{name: "GET /v1/stats", class: "valid", method: "GET", path: "/v1/stats"},
		{name: "GET /metrics", class: "valid", method: "GET", path: "/metrics"},
	}
}

// procKB reads a field (VmRSS, VmHWM) of /proc/PID/status, in kB.
func procKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// settle waits (up to 5 s) for the server's RSS to come back within a
// tenth of idle, or to stop falling: memory a case freed and the server
// hands back is not the next case's.
func settle(pid int, idle int64) {
	last := procKB(pid, "VmRSS")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		rss := procKB(pid, "VmRSS")
		if rss <= idle+idle/10 || rss >= last-last/100 {
			return
		}
		last = rss
	}
}

// resetPeak resets VmHWM to the current VmRSS (Linux 4.0+).
func resetPeak(pid int) {
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// sendCase sends c to the server at base and returns the statuses (0: the
// connection was cut without an answer).
func sendCase(base string, c hostileCase) []int {
	n := max(c.times, 1)
	out := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.slow > 0 {
				out[i] = slowBody(base, c)
				return
			}
			var body io.Reader
			if c.body != nil {
				body = bytes.NewReader(c.body())
			}
			req, err := http.NewRequest(c.method, base+c.path, body)
			if err != nil {
				return
			}
			if c.body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range c.header {
				switch {
				case k == "Host":
					req.Host = v
				case v == "":
					req.Header.Del(k)
				default:
					req.Header.Set(k, v)
				}
			}
			resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			out[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	return out
}

// slowBody sends c's body a byte at a time and returns the status, or 0
// when the server cut the connection.
func slowBody(base string, c hostileCase) int {
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return 0
	}
	defer conn.Close()
	body := c.body()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", c.method, c.path, u.Host, len(body))
	done := make(chan int, 1)
	go func() { done <- readStatus(conn) }()
	for _, b := range body {
		select {
		case s := <-done:
			return s
		case <-time.After(c.slow):
		}
		if _, err := conn.Write([]byte{b}); err != nil {
			return <-done
		}
	}
	return <-done
}

// readStatus reads a response's status code off conn (0: closed first).
func readStatus(conn net.Conn) int {
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func slowHeaders(base string) (int, error) {
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	req := "GET /v1/stats HTTP/1.1\r\nHost: " + u.Host + "\r\nX-Slow: " + strings.Repeat("a", 60) + "\r\n\r\n"
	done := make(chan int, 1)
	go func() { done <- readStatus(conn) }()
	for i := range len(req) {
		select {
		case s := <-done:
			return s, nil
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{req[i]}); err != nil {
			return <-done, nil
		}
	}
	return <-done, nil
}

func manyHeaders(base string) (int, error) {
	req, _ := http.NewRequest("GET", base+"/v1/stats", nil)
	for i := range 10000 {
		req.Header.Set(fmt.Sprint("X-H", i), strings.Repeat("v", 100))
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestHostileServe runs the suite against `annactl serve` of a small
// index. ANNA_HOSTILE_TABLE=FILE writes the table there;
// ANNA_HOSTILE_ONLY=REGEXP runs the cases whose name matches.
func TestHostileServe(t *testing.T) {
	needModel(t)
	if testing.Short() {
		t.Skip("the hostile-input suite (-short)")
	}
	dir := filepath.Join(t.TempDir(), "idx")
	if r := annactl(t, "", "index", "--index", dir, filepath.Join("..", "..", "testdata", "demo", "corpus.jsonl")); r.code != 0 {
		t.Fatalf("index: %s", r)
	}
	const timeout = 10 * time.Second
	sv, base, log := serveChild(t, "--index", dir, "--timeout", timeout.String())
	defer func() {
		sv.cmd.Process.Signal(syscall.SIGTERM)
		waitExit(t, sv)
	}()
	pid := sv.cmd.Process.Pid
	// Warm up every route that loads something (the model, the tokenizer).
	for _, c := range []hostileCase{
		{method: "POST", path: "/v1/search", body: str(`{"query": "graph search", "snippets": true}`)},
		{method: "POST", path: "/v1/embeddings", body: str(`{"input": ["warm up", "the model"]}`)},
		{method: "POST", path: "/v1/documents", body: str(`{"documents": [{"id": "warm", "text": "warm up words"}]}`)},
	} {
		if st := sendCase(base, c); st[0] != 200 {
			t.Fatalf("warm-up %s: %d\n%s", c.path, st[0], log)
		}
	}
	time.Sleep(time.Second)
	idle := procKB(pid, "VmRSS")
	var rows []hostileRow
	only := regexp.MustCompile(os.Getenv("ANNA_HOSTILE_ONLY"))
	for _, c := range hostileCases() {
		if !only.MatchString(c.name) {
			continue
		}
		settle(pid, idle)
		resetPeak(pid)
		start := time.Now()
		var statuses []int
		if c.special != nil {
			if c.name == "check beside the server" {
				r := annactl(t, "", "check", "--index", dir)
				statuses = []int{map[bool]int{true: 200, false: 500}[r.code == 0]}
			} else {
				s, _ := c.special(base)
				statuses = []int{s}
			}
		} else {
			statuses = sendCase(base, c)
		}
		took := time.Since(start)
		row := hostileRow{name: c.name, class: c.class, took: took, peak: procKB(pid, "VmHWM"), idle: idle, ok: true, statusNumbers: statuses}
		var st []string
		for _, s := range statuses {
			st = append(st, map[bool]string{true: "cut", false: strconv.Itoa(s)}[s == 0])
			switch {
			case s >= 500:
				row.ok, row.why = false, "5xx"
			case c.class == "mistake" && (s < 400 || s == 0):
				row.ok, row.why = false, "a mistake not refused"
			case c.class == "valid" && (s < 200 || s >= 300):
				row.ok, row.why = false, "not served"
			case c.class == "attack" && s >= 200 && s < 300:
				row.ok, row.why = false, "an attack served"
			}
		}
		row.status = compact(st)
		if row.peak > 2*idle {
			row.ok, row.why = false, "over twice the idle memory"
		}
		if took > timeout+time.Second && c.slow == 0 && c.special == nil {
			row.ok, row.why = false, "past its deadline"
		}
		if (c.slow > 0 || c.special != nil) && took > timeout+5*time.Second {
			row.ok, row.why = false, "held past the timeout"
		}
		if !row.ok {
			t.Errorf("%s: %s (%s, %v, %d kB of %d kB idle)", c.name, row.why, row.status, took, row.peak, idle)
		}
		rows = append(rows, row)
	}
	if got := storeDocsThrough(t, base, "planted"); got {
		t.Error("an attack planted a document")
	}
	table := hostileTable(rows, idle, timeout)
	t.Logf("\n%s", table)
	if t.Failed() || os.Getenv("ANNA_HOSTILE_LOG") != "" {
		t.Logf("the server said:\n%s", log)
	}
	if path := os.Getenv("ANNA_HOSTILE_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// storeDocsThrough reports whether the server holds document id.
func storeDocsThrough(t *testing.T, base, id string) bool {
	resp, err := http.Get(base + "/v1/documents/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// compact writes statuses as "400" or "8 × 400".
func compact(st []string) string {
	if len(st) > 1 {
		same := true
		for _, s := range st {
			same = same && s == st[0]
		}
		if same {
			return fmt.Sprintf("%d × %s", len(st), st[0])
		}
	}
	return strings.Join(st, ", ")
}

func hostileTable(rows []hostileRow, idle int64, timeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Idle RSS after a warm-up: %.0f MB; timeout %v.\n\n", float64(idle)/1024, timeout)
	b.WriteString("| case | kind | answer | time | peak RSS | × idle |\n|---|---|---|---|---|---|\n")
	fails, mistakes, mistake5xx := 0, 0, 0
	for _, r := range rows {
		mark := ""
		if !r.ok {
			mark = " **" + r.why + "**"
			fails++
		}
		if r.class == "mistake" {
			mistakes++
			for _, s := range r.statusNumbers {
				if s >= 500 {
					mistake5xx++
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s%s | %.2f s | %.0f MB | %.2f |\n", strings.ReplaceAll(r.name, "|", `\|`), r.class, r.status, mark,
			r.took.Seconds(), float64(r.peak)/1024, float64(r.peak)/float64(idle))
	}
	fmt.Fprintf(&b, "\n%d cases, %d failing; %d client mistakes, %d answered 5xx.\n", len(rows), fails, mistakes, mistake5xx)
	return b.String()
}
