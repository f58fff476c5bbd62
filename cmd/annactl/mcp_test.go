package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/anna-search/anna/internal/pyref"
)

// mcpCorpus is indexed for the MCP tests.
const mcpCorpus = `{"_id": "sourdough", "title": "Sourdough", "text": "Wild yeast bread.\nFeed the starter daily.\nBake hot.", "metadata": {"shelf": "baking"}}
{"_id": "graphs", "title": "Graphs", "text": "Nearest neighbour graphs for vector search.", "metadata": {"shelf": "computing"}}
{"_id": "rye", "title": "Rye", "text": "Rye bread with a sour starter.", "metadata": {"shelf": "baking"}}
`

func mcpIndex(t *testing.T) string {
	t.Helper()
	needModel(t)
	dir := filepath.Join(t.TempDir(), "idx")
	if r := annactl(t, mcpCorpus, "index", "--index", dir); r.code != 0 {
		t.Fatalf("index: %s", r)
	}
	return dir
}

// TestMCPStdio: annactl mcp speaks MCP on its stdin and stdout (the Go
// SDK's client here), opens the directory for each burst of calls and
// closes it between them (annactl index gets in), and exits 0 when its
// client closes stdin.
func TestMCPStdio(t *testing.T) {
	dir := mcpIndex(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"mcp", "--index", dir, "--hold", "50ms"}, inR, outW, &stderr)
		outW.Close()
	}()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	search := func(q string) []string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": q, "k": 2}})
		if err != nil || res.IsError {
			t.Fatalf("search: %v %+v", err, res)
		}
		var out struct{ Hits []struct{ ID string } }
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		var ids []string
		for _, h := range out.Hits {
			ids = append(ids, h.ID)
		}
		return ids
	}
	if ids := search("nearest neighbour graphs"); len(ids) == 0 || ids[0] != "graphs" {
		t.Fatalf("search: %v", ids)
	}
	// Between calls the directory is closed: a writer opens it.
	time.Sleep(300 * time.Millisecond)
	if r := annactl(t, `{"_id": "tides", "text": "Tides follow the moon."}`+"\n", "index", "--index", dir); r.code != 0 {
		t.Fatalf("index beside annactl mcp: %s", r)
	}
	if ids := search("tides and the moon"); len(ids) == 0 || ids[0] != "tides" {
		t.Fatalf("search after the index: %v", ids)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"documents": []any{}}})
	if err == nil && !res.IsError {
		t.Errorf("add offered without --allow-writes")
	}
	cs.Close()
	inW.Close()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("annactl mcp exited %d\n%s", c, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("annactl mcp did not exit when its stdin closed")
	}
	if !strings.Contains(stderr.String(), "mcp: serving") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if r := annactl(t, "", "mcp", "--index", filepath.Join(t.TempDir(), "none")); r.code != 1 || !strings.Contains(r.stderr, "annactl index") {
		t.Errorf("mcp of a directory that is not an index: %s", r)
	}
}

// mcpPythonScript drives annactl with the official mcp Python SDK: over
// stdio (annactl mcp) and streamable HTTP (annactl serve's /mcp, with the
// API key).
const mcpPythonScript = `
import asyncio, json, os, sys
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

how, target = sys.argv[1], sys.argv[2]

async def session(client):
    async with client as c:
        tools = sorted(t.name for t in (await c.list_tools()).tools)
        search = await c.call_tool("search", {"query": "wild yeast starter", "k": 2, "filter": {"shelf": "baking"}})
        get = await c.call_tool("get", {"id": "sourdough", "start_line": 2, "end_line": 2})
        status = await c.call_tool("status", {})
        bad = await c.call_tool("search", {"query": " "})
        out = {"tools": tools, "search": search.structured_content, "get": get.structured_content,
               "status": status.structured_content, "bad": [bad.is_error, bad.content[0].text]}
        if "add" in tools:
            add = await c.call_tool("add", {"documents": [{"id": "tides", "text": "Tides follow the moon."}]})
            out["add"] = add.structured_content
            out["after_add"] = (await c.call_tool("search", {"query": "tides and the moon", "k": 1})).structured_content
        return out

if how == "stdio":
    env = {k: os.environ[k] for k in ("ANNA_HOME", "ANNA_ORT_LIB", "HOME", "PATH") if k in os.environ}
    env["ANNACTL_AS_MAIN"] = "1"
    client = Client(StdioServerParameters(command=target, args=sys.argv[3:], env=env))
else:
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + sys.argv[3]})
    client = Client(streamable_http_client(target, http_client=http))
print(json.dumps(asyncio.run(session(client))))
`

// TestMCPPythonClient: the mcp Python SDK (pinned in
// tools/requirements-clients.txt) over stdio to annactl mcp and over
// streamable HTTP to annactl serve's /mcp: tools listed, search with a
// filter, get of a line, status, an error the model can read, and (with
// --mcp-allow-writes) add, found by the next search.
func TestMCPPythonClient(t *testing.T) {
	python := pyref.Clients(t, "mcp", "httpx2")
	dir := mcpIndex(t)
	check := func(t *testing.T, out []byte, writes bool) {
		t.Helper()
		var got struct {
			Tools  []string
			Search struct{ Hits []struct{ ID string } }
			Get    struct{ Text string }
			Status struct{ Documents int }
			Bad    []any
			Add    struct{ Added int }
			After  struct{ Hits []struct{ ID string } } `json:"after_add"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		want := "get multi_get search status"
		if writes {
			want = "add delete get multi_get search status"
		}
		if strings.Join(got.Tools, " ") != want {
			t.Errorf("tools %v, want %s", got.Tools, want)
		}
		if len(got.Search.Hits) != 2 || got.Search.Hits[0].ID != "sourdough" || got.Search.Hits[1].ID != "rye" {
			t.Errorf("search: %+v", got.Search)
		}
		if got.Get.Text != "Feed the starter daily." || got.Status.Documents != 3 {
			t.Errorf("get %+v, status %+v", got.Get, got.Status)
		}
		if len(got.Bad) != 2 || got.Bad[0] != true || !strings.Contains(got.Bad[1].(string), "empty query") {
			t.Errorf("an empty query: %v", got.Bad)
		}
		if writes && (got.Add.Added != 1 || len(got.After.Hits) != 1 || got.After.Hits[0].ID != "tides") {
			t.Errorf("add %+v, then search %+v", got.Add, got.After)
		}
	}
	pyRun := func(t *testing.T, args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, append([]string{"-c", mcpPythonScript}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mcp client: %v\n%s", err, stderr.String())
		}
		return out
	}
	t.Run("stdio", func(t *testing.T) {
		check(t, pyRun(t, "stdio", os.Args[0], "mcp", "--index", dir), false)
	})
	t.Run("http", func(t *testing.T) {
		t.Setenv(serveKeyEnv, "the-key")
		sv, url, log := serveChild(t, "--index", dir, "--mcp-allow-writes")
		defer func() {
			sv.cmd.Process.Signal(syscall.SIGTERM)
			if code := waitExit(t, sv); code != 0 {
				t.Errorf("serve exited %d\n%s", code, log)
			}
		}()
		check(t, pyRun(t, "http", url+"/mcp", "the-key"), true)
	})
}
