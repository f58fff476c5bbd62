package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// raw sends one request with the given headers (see exchange) and
// returns its status, headers and body.
func (ts *testServer) raw(t *testing.T, method, path, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	code, h, b, _, err := ts.exchange(t, method, path, body, header, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return code, h, string(b)
}

const oneDoc = `{"documents": [{"id": "planted", "text": "written by a web page"}]}`

// TestDesktopSafety: issue 61's fourth item, with curl's requests. The
// confirmed attack: `curl -H 'Content-Type:' -H 'Host: attacker.example'
// 127.0.0.1:PORT/v1/documents --data-binary '{"documents":[…]}'` committed
// a document (a missing Content-Type was read as JSON; Host was not
// looked at).
func TestDesktopSafety(t *testing.T) {
	ts := newTestServer(t, Options{CORS: []string{"http://app.example:3000"}, AllowedHosts: []string{"search.internal"}})
	u, _ := url.Parse(ts.url)
	self := "http://" + u.Host
	for _, c := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
	}{
		{"the confirmed attack", "POST", "/v1/documents", oneDoc, map[string]string{"Content-Type": "", "Host": "attacker.example"}, 403},
		{"a rebound name", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Host": "attacker.example:" + u.Port()}, 403},
		{"a rebound name reading", "GET", "/v1/stats", "", map[string]string{"Host": "rebind.attacker.example"}, 403},
		{"no Content-Type", "POST", "/v1/documents", oneDoc, map[string]string{"Content-Type": ""}, 415},
		{"text/plain (fetch no-cors)", "POST", "/v1/documents", oneDoc, map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, 415},
		{"a form (curl -d)", "POST", "/v1/documents", oneDoc, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"multipart", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 415},
		{"another origin", "POST", "/v1/documents", oneDoc, map[string]string{"Content-Type": "application/json", "Origin": "http://attacker.example"}, 403},
		{"another port of the same host", "POST", "/v1/documents", oneDoc, map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403},
		{"a sandboxed page", "DELETE", "/v1/documents/a", "", map[string]string{"Origin": "null"}, 403},
		{"a preflight from another origin", "OPTIONS", "/v1/documents", "", map[string]string{"Origin": "http://attacker.example", "Access-Control-Request-Method": "POST"}, 403},
		// Allowed.
		{"loopback by name", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Host": "localhost:" + u.Port()}, 200},
		{"a *.localhost name", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Host": "anna.localhost"}, 200},
		{"IPv6 loopback", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Host": "[::1]:" + u.Port()}, 200},
		{"an allowed host", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Host": "Search.Internal:8080"}, 200},
		{"the page's own origin", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Origin": self}, 200},
		{"a CORS origin", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json", "Origin": "http://app.example:3000"}, 200},
		{"JSON with a charset", "POST", "/v1/search", `{"query": "x"}`, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200},
		{"JSON lines", "POST", "/v1/documents", `{"id": "ok", "text": "fine"}`, map[string]string{"Content-Type": "application/x-ndjson"}, 200},
		{"a read from another origin (CORS keeps its answer from the page)", "GET", "/v1/stats", "", map[string]string{"Origin": "http://attacker.example"}, 200},
		{"a delete without a body or Origin (curl -X DELETE)", "DELETE", "/v1/documents/ok", "", nil, 200},
	} {
		code, h, body := ts.raw(t, c.method, c.path, c.body, c.header)
		if code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.status)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no X-Content-Type-Options: nosniff", c.name)
		}
		if acao := h.Get("Access-Control-Allow-Origin"); acao != "" && acao != "http://app.example:3000" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", c.name, acao)
		}
	}
	if got, _ := ts.eng.Get(t.Context(), "planted"); len(got) != 0 {
		t.Fatal("a refused request planted a document")
	}
	// A preflight from the CORS origin is answered with what it may send.
	code, h, _ := ts.raw(t, "OPTIONS", "/v1/documents", "", map[string]string{"Origin": "http://app.example:3000", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
	if code != 204 || h.Get("Access-Control-Allow-Origin") != "http://app.example:3000" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("CORS preflight: %d %v", code, h)
	}
	// No CORS headers for anyone else.
	if _, h, _ := ts.raw(t, "GET", "/v1/stats", "", map[string]string{"Origin": "http://attacker.example"}); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS headers sent to another origin: %v", h)
	}
}

// TestBodyReadDeadline: a body trickled a byte at a time held a connection
// past 100 s, also when the answer was a 401 without reading it. The body
// must now arrive within the request's timeout, and a 401 closes the
// connection at once.
func TestBodyReadDeadline(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"a search", Options{Timeout: time.Second}},
		{"before a 401", Options{Timeout: time.Second, APIKey: "k"}},
	} {
		ts := newTestServer(t, c.opts)
		u, _ := url.Parse(ts.url)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "POST /v1/search HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		start := time.Now()
		closed := make(chan time.Duration, 1)
		go func() {
			br := bufio.NewReader(conn)
			for {
				if _, err := br.ReadByte(); err != nil {
					closed <- time.Since(start)
					return
				}
			}
		}()
		tick := time.NewTicker(200 * time.Millisecond)
	trickle:
		for {
			select {
			case d := <-closed:
				if d > 5*time.Second {
					t.Errorf("%s: the connection closed after %v", c.name, d)
				}
				break trickle
			case <-tick.C:
				if time.Since(start) > 10*time.Second {
					t.Errorf("%s: a body sent at 5 bytes a second still holds the connection after 10 s", c.name)
					break trickle
				}
				conn.Write([]byte(" "))
			}
		}
		tick.Stop()
	}
}
