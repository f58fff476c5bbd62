package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
)

// guideLines are the commands of docs/http.md's sh blocks, in order, a
// line ending in a backslash joined with the next; the line that sets
// $ANNA is left to the test.
func guideLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "http.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in, cont := false, ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```sh":
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			line = cont + line
			if strings.HasSuffix(line, `\`) {
				cont = strings.TrimSuffix(line, `\`)
				continue
			}
			cont = ""
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") && !strings.HasPrefix(s, "export ANNA=") {
				out = append(out, s)
			}
		}
	}
	return out
}

// routeOf is the route (method, pattern) a guide line calls.
func routeOf(mux *http.ServeMux, line string) (string, bool) {
	i := strings.Index(line, "$ANNA")
	if i < 0 {
		return "", false
	}
	path := strings.Trim(strings.Fields(line[i+len("$ANNA"):] + " ")[0], `"'`)
	if path == "" {
		path = "/"
	}
	path, _, _ = strings.Cut(path, "?")
	method := "GET"
	switch {
	case strings.Contains(line, "-X DELETE"):
		method = "DELETE"
	case strings.Contains(line, "--json"), strings.Contains(line, "--data-binary"):
		method = "POST"
	}
	req, _ := http.NewRequest(method, "http://anna"+path, nil)
	_, pattern := mux.Handler(req)
	return method + " " + pattern, pattern != ""
}

// TestHTTPGuide: every line of docs/http.md's shell blocks works as
// written (curl, with $ANNA the server's URL) against a server with the
// default model and a reranker, in order: it exits 0 and answers no error;
// and together they call every route the server has (but the parts of an
// MCP session only an agent drives).
func TestHTTPGuide(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	_, srv, base := modelServer(t, engine.Options{Reranker: &fakeReranker{}}, Options{Reranker: &fakeReranker{}, RerankerName: "fake-reranker"})
	mux := http.NewServeMux()
	for _, rt := range srv.routes() {
		mux.HandleFunc(rt.pattern, func(http.ResponseWriter, *http.Request) {})
	}
	called := map[string]bool{}
	lines := guideLines(t)
	for _, line := range lines {
		if r, ok := routeOf(mux, line); ok {
			called[r] = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Env = append(os.Environ(), "ANNA="+base)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s\n  failed: %v\n%s", line, err, out)
			continue
		}
		if msg := answerError(out); msg != "" {
			t.Errorf("%s\n  answered an error: %s", line, msg)
		}
	}
	for _, rt := range srv.routes() {
		for method := range rt.methods {
			r := method + " " + rt.pattern
			if !called[r] && r != "GET /mcp" && r != "DELETE /mcp" {
				t.Errorf("docs/http.md calls no %s", r)
			}
		}
	}
	t.Logf("%d lines of docs/http.md run, %d routes called", len(lines), len(called))
}

// answerError is the error an answer holds, "" when none: a JSON object
// with an "error" member, whole or as a server-sent event's data.
func answerError(out []byte) string {
	var bodies []string
	s := strings.TrimSpace(string(out))
	if strings.HasPrefix(s, "{") {
		bodies = append(bodies, s)
	}
	for _, line := range strings.Split(s, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			bodies = append(bodies, d)
		}
	}
	for _, b := range bodies {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(b), &m) == nil && m["error"] != nil {
			return b
		}
	}
	if strings.HasPrefix(s, "{") && len(bodies) == 1 && !json.Valid([]byte(s)) {
		return "not JSON: " + s
	}
	return ""
}
