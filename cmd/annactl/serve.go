package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/server"
)

// serveKeyEnv names the environment variable serve reads its API key from.
const serveKeyEnv = "ANNA_API_KEY"

func (a *app) serveCommand() *cobra.Command {
	var (
		dir, listen, unixPath, keyFile, reranker string
		readOnly, strictModel, mcpWrites         bool
		timeout, grace, batchWait                time.Duration
		maxBody                                  int64
		maxBatch, maxK, maxTokens                int
		maxText                                  int
		cors, allowHosts                         []string
		watch                                    string
		ff                                       folderFlags
	)
	cmd := &cobra.Command{
		Use:   "serve --index DIR [--listen 127.0.0.1:8080] [--unix PATH]",
		Short: "answer HTTP for an anna directory: search, documents, a search page, MCP, the OpenAI/Cohere/TEI/Ollama APIs",
		Long: `Serves the anna directory over HTTP (package server): POST /v1/search,
POST /v1/documents, GET and DELETE /v1/documents/{id}, GET /v1/stats,
GET /v1/metadata, /healthz, /metrics (Prometheus), /openapi.json and a search
page at /; the Model Context Protocol at /mcp (streamable HTTP, the tools of
annactl mcp; --mcp-allow-writes adds add and delete); and the embedding and
rerank APIs of other servers, so that their official clients work by changing
the base URL: OpenAI's (/v1/embeddings, /v1/models), Cohere's v1 and v2
(/v1/embed, /v2/embed, /v1/rerank, /v2/rerank), Jina's rerank (/v1/rerank),
text-embeddings-inference's (/embed, /rerank, /info) and Ollama's (/api/embed,
/api/embeddings). A request naming another model than the one served is
answered by it and the name logged (the clients' examples name their vendors'
models); --strict-model refuses it instead. Concurrent embedding requests are
batched into one model call. docs/http.md shows every route with curl.

It opens DIR for writing (--read-only: it writes nothing and refuses
document writes), so other processes' read-only opens (annactl search) read
through it. A write is answered once its batch has committed: a server
killed afterwards loses nothing it acknowledged.

It binds loopback by default. Any other --listen address needs an API key,
read from $` + serveKeyEnv + ` or --api-key-file FILE (never from a flag value);
clients send "Authorization: Bearer KEY". --unix PATH serves on a Unix socket
too (mode 0600; not DIR/anna.sock, which the engine's sharing owns).

--watch FOLDER keeps DIR in step with a folder of files while serving (as
annactl index --watch does): a file saved is searchable within seconds.

No web page the user opens can use it: a request must name the server by a
loopback name, an IP address, the --listen host or an --allow-host NAME (DNS
rebinding); a request that may write from a page of another origin is refused
unless --cors ORIGIN allows that origin (CORS headers go to those origins
only); a body is read only with Content-Type: application/json (or
application/x-ndjson for /v1/documents), and must arrive within --timeout.
Each request may cost at most --max-tokens model tokens and each text
--max-text bytes, counted before the model runs.

SIGINT or SIGTERM stops accepting, lets requests in flight finish (up to
--grace), saves and closes the directory, and exits 0.`,
		Example: `  annactl serve --index my-index
  curl -s localhost:8080/v1/search --json '{"query": "nearest neighbour graphs", "k": 3}'
  ANNA_API_KEY=$(cat key) annactl serve --index my-index --listen 0.0.0.0:8080 --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			for name, v := range map[string]int{"max-batch": maxBatch, "max-k": maxK} {
				if err := atLeast(name, v, 1); err != nil {
					return err
				}
			}
			if maxBody < 1 || maxText < 1 || maxTokens < 1 {
				return usageErrorf("--max-body, --max-text and --max-tokens must be at least 1")
			}
			for _, o := range cors {
				if u, err := url.Parse(o); o != "*" && (err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" && u.Path != "/") {
					return usageErrorf("--cors %q: want an origin, scheme://host[:port] (or *)", o)
				}
			}
			if maxBody < 1 {
				return usageErrorf("--max-body must be at least 1, got %d", maxBody)
			}
			if timeout <= 0 || grace < 0 || batchWait < 0 {
				return usageErrorf("--timeout must be positive, --grace and --batch-wait not negative")
			}
			if watch != "" && readOnly {
				return usageErrorf("--watch writes the folder's changes: not with --read-only")
			}
			if listen == "" && unixPath == "" {
				return usageErrorf("nothing to listen on: give --listen ADDR or --unix PATH")
			}
			if listen != "" {
				if _, _, err := net.SplitHostPort(listen); err != nil {
					return usageErrorf("--listen %q: want HOST:PORT (%v)", listen, err)
				}
			}
			if unixPath != "" {
				if p, d := filepath.Clean(unixPath), filepath.Clean(dir); p == filepath.Join(d, "anna.sock") {
					return usageErrorf("--unix %s: the engine's own socket (readers of DIR use it); pick another path", unixPath)
				}
			}
			key, err := readAPIKey(keyFile)
			if err != nil {
				return err
			}
			if listen != "" && !server.IsLoopback(listen) && key == "" {
				return usageErrorf("--listen %s is not loopback: set an API key in $%s or --api-key-file FILE", listen, serveKeyEnv)
			}
			eopts := engine.Options{ReadOnly: readOnly, Logf: a.logf}
			sopts := server.Options{APIKey: key, ReadOnly: readOnly, StrictModel: strictModel, MCPWrites: mcpWrites, Version: version(), Timeout: timeout, BatchWait: batchWait, Logf: a.logf,
				Limits:       server.Limits{MaxBodyBytes: maxBody, MaxBatch: maxBatch, MaxK: maxK, MaxTextBytes: maxText, MaxRequestTokens: maxTokens},
				CORS:         cors,
				AllowedHosts: append(listenHost(listen), allowHosts...)}
			rr, fusion, err := loadReranker(cmd.Context(), reranker, func(f string, a2 ...any) { a.logf("serve: "+f, a2...) })
			if err != nil {
				return err
			}
			if rr != nil {
				defer rr.Close()
				eopts.Reranker, sopts.Reranker = rr, rr
				sopts.RerankerName, sopts.RerankFusion = rr.Manifest().Name, fusion
			}
			eng, err := engine.Open(cmd.Context(), dir, eopts)
			if err != nil {
				return err
			}
			defer eng.Close()
			srv, err := server.New(eng, sopts)
			if err != nil {
				return err
			}
			defer srv.Close()
			var lns []net.Listener
			defer func() {
				for _, ln := range lns {
					ln.Close()
				}
			}()
			if listen != "" {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return err
				}
				lns = append(lns, ln)
				a.logf("serve: listening on http://%s (index %s)", ln.Addr(), dir)
			}
			if unixPath != "" {
				ln, err := listenUnix(unixPath)
				if err != nil {
					return err
				}
				lns = append(lns, ln)
				a.logf("serve: listening on unix:%s", unixPath)
			}
			var watched chan error
			if watch != "" {
				wctx, stop := context.WithCancel(cmd.Context())
				defer stop()
				watched = make(chan error, 1)
				go func() {
					defer close(watched)
					err := safe.Call(func() error { return a.watchFolder(wctx, eng, watch, ff, 256, nil) })
					if err != nil {
						a.logf("serve: --watch %s stopped: %v", watch, err)
					}
					watched <- err
				}()
				defer func() { stop(); <-watched }()
			}
			if err := server.Serve(cmd.Context(), srv, lns, grace); err != nil {
				return err
			}
			a.logf("serve: stopped; closing %s", dir)
			srv.Close()
			if err := eng.Close(); err != nil {
				return fmt.Errorf("close %s: %w", dir, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	indexFlag(cmd, &dir, "anna directory `DIR` to serve")
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "TCP `HOST:PORT` to serve on (\"\": none); not loopback needs an API key")
	f.StringVar(&unixPath, "unix", "", "also serve on a Unix socket at `PATH` (mode 0600)")
	f.StringVar(&keyFile, "api-key-file", "", "read the API key from `FILE` (default: $"+serveKeyEnv+")")
	f.BoolVar(&readOnly, "read-only", false, "open DIR read-only and refuse document writes")
	f.BoolVar(&mcpWrites, "mcp-allow-writes", false, "offer the add and delete tools at /mcp (not with --read-only)")
	f.BoolVar(&strictModel, "strict-model", false, "refuse requests naming another model than the one served (default: answer them with it, logging each name once)")
	modelVar(f, &reranker, "reranker", "", "cross-encoder `NAME|DIR` for /v1/rerank and mode rerank (default: the installed one measured to help, if any)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "longest a request may run")
	f.DurationVar(&grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, how long requests in flight may finish")
	f.DurationVar(&batchWait, "batch-wait", 2*time.Millisecond, "how long an embedding request waits for others to share its model batch")
	f.Int64Var(&maxBody, "max-body", 16<<20, "largest request body in bytes")
	f.IntVar(&maxBatch, "max-batch", 1024, "most documents per POST /v1/documents")
	f.IntVar(&maxK, "max-k", 1000, "largest k (and top_n)")
	f.IntVar(&maxText, "max-text", 1<<20, "longest text in bytes (an embeddings input, a rerank document, a document)")
	f.IntVar(&maxTokens, "max-tokens", 300_000, "most model tokens one request may cost")
	f.StringArrayVar(&cors, "cors", nil, "let web pages of `ORIGIN` (scheme://host[:port], * for any) call the server from a browser (repeatable)")
	f.StringArrayVar(&allowHosts, "allow-host", nil, "a `NAME` requests may give as their Host, besides loopback names, IP addresses and the --listen host (repeatable)")
	f.StringVar(&watch, "watch", "", "keep DIR in step with the files of `FOLDER` while serving (see index --watch)")
	ff.register(cmd, false)
	return cmd
}

// listenHost is the --listen host when it is a name (an address needs no
// allowing; see server.Options.AllowedHosts).
func listenHost(listen string) []string {
	h, _, err := net.SplitHostPort(listen)
	if err != nil || h == "" || net.ParseIP(h) != nil {
		return nil
	}
	return []string{h}
}

// readAPIKey reads the key from file, else $ANNA_API_KEY; "" when
// neither gives one.
func readAPIKey(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(serveKeyEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", usageErrorf("--api-key-file %s: empty", file)
	}
	return key, nil
}

// listenUnix listens on a Unix socket at path, owner-only, replacing a
// stale socket (not any other file).
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("--unix %s: exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("--unix %s: another server answers there", path)
		}
		os.Remove(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
