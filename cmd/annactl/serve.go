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

// serveLong is serve's help.
const serveLong = `Serves the anna directory over HTTP (package server): POST /v1/search,
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
--grace), saves and closes the directory, and exits 0.`

// serveOptions are serve's flags.
type serveOptions struct {
	dir, listen, unixPath, keyFile, reranker string
	readOnly, strictModel, mcpWrites         bool
	timeout, grace, batchWait                time.Duration
	maxBody                                  int64
	maxBatch, maxK, maxTokens                int
	maxText                                  int
	cors, allowHosts                         []string
	watch                                    string
	ff                                       folderFlags
	key                                      string // the API key read (check)
}

func (a *app) serveCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve --index DIR [--listen 127.0.0.1:8080] [--unix PATH]",
		Short: "answer HTTP for an anna directory: search, documents, a search page, MCP, the OpenAI/Cohere/TEI/Ollama APIs",
		Long:  serveLong,
		Example: `  annactl serve --index my-index
  curl -s localhost:8080/v1/search --json '{"query": "nearest neighbour graphs", "k": 3}'
  ANNA_API_KEY=$(cat key) annactl serve --index my-index --listen 0.0.0.0:8080 --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runServe(cmd.Context(), o)
		},
	}
	o.register(cmd)
	return cmd
}

func (o *serveOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	indexFlag(cmd, &o.dir, "anna directory `DIR` to serve")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "TCP `HOST:PORT` to serve on (\"\": none); not loopback needs an API key")
	f.StringVar(&o.unixPath, "unix", "", "also serve on a Unix socket at `PATH` (mode 0600)")
	f.StringVar(&o.keyFile, "api-key-file", "", "read the API key from `FILE` (default: $"+serveKeyEnv+")")
	f.BoolVar(&o.readOnly, "read-only", false, "open DIR read-only and refuse document writes")
	f.BoolVar(&o.mcpWrites, "mcp-allow-writes", false, "offer the add and delete tools at /mcp (not with --read-only)")
	f.BoolVar(&o.strictModel, "strict-model", false, "refuse requests naming another model than the one served (default: answer them with it, logging each name once)")
	modelVar(f, &o.reranker, "reranker", "", "cross-encoder `NAME|DIR` for /v1/rerank and mode rerank (default: the installed one measured to help, if any)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "longest a request may run")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, how long requests in flight may finish")
	f.DurationVar(&o.batchWait, "batch-wait", 2*time.Millisecond, "how long an embedding request waits for others to share its model batch")
	f.Int64Var(&o.maxBody, "max-body", 16<<20, "largest request body in bytes")
	f.IntVar(&o.maxBatch, "max-batch", 1024, "most documents per POST /v1/documents")
	f.IntVar(&o.maxK, "max-k", 1000, "largest k (and top_n)")
	f.IntVar(&o.maxText, "max-text", 1<<20, "longest text in bytes (an embeddings input, a rerank document, a document)")
	f.IntVar(&o.maxTokens, "max-tokens", 300_000, "most model tokens one request may cost")
	f.StringArrayVar(&o.cors, "cors", nil, "let web pages of `ORIGIN` (scheme://host[:port], * for any) call the server from a browser (repeatable)")
	f.StringArrayVar(&o.allowHosts, "allow-host", nil, "a `NAME` requests may give as their Host, besides loopback names, IP addresses and the --listen host (repeatable)")
	f.StringVar(&o.watch, "watch", "", "keep DIR in step with the files of `FOLDER` while serving (see index --watch)")
	o.ff.register(cmd, false)
}

// check validates the flags and reads the API key.
func (o *serveOptions) check(cmd *cobra.Command) error {
	if err := requireFlags(cmd, "index"); err != nil {
		return err
	}
	for name, v := range map[string]int{"max-batch": o.maxBatch, "max-k": o.maxK} {
		if err := atLeast(name, v, 1); err != nil {
			return err
		}
	}
	if o.maxBody < 1 || o.maxText < 1 || o.maxTokens < 1 {
		return usageErrorf("--max-body, --max-text and --max-tokens must be at least 1")
	}
	for _, c := range o.cors {
		if u, err := url.Parse(c); c != "*" && (err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" && u.Path != "/") {
			return usageErrorf("--cors %q: want an origin, scheme://host[:port] (or *)", c)
		}
	}
	if o.timeout <= 0 || o.grace < 0 || o.batchWait < 0 {
		return usageErrorf("--timeout must be positive, --grace and --batch-wait not negative")
	}
	if o.watch != "" && o.readOnly {
		return usageErrorf("--watch writes the folder's changes: not with --read-only")
	}
	if o.listen == "" && o.unixPath == "" {
		return usageErrorf("nothing to listen on: give --listen ADDR or --unix PATH")
	}
	if o.listen != "" {
		if _, _, err := net.SplitHostPort(o.listen); err != nil {
			return usageErrorf("--listen %q: want HOST:PORT (%v)", o.listen, err)
		}
	}
	if o.unixPath != "" {
		if p, d := filepath.Clean(o.unixPath), filepath.Clean(o.dir); p == filepath.Join(d, "anna.sock") {
			return usageErrorf("--unix %s: the engine's own socket (readers of DIR use it); pick another path", o.unixPath)
		}
	}
	var err error
	if o.key, err = readAPIKey(o.keyFile); err != nil {
		return err
	}
	if o.listen != "" && !server.IsLoopback(o.listen) && o.key == "" {
		return usageErrorf("--listen %s is not loopback: set an API key in $%s or --api-key-file FILE", o.listen, serveKeyEnv)
	}
	return nil
}

// runServe serves o.dir until ctx is done, then saves and closes it.
func (a *app) runServe(ctx context.Context, o serveOptions) error {
	eopts := engine.Options{ReadOnly: o.readOnly, Logf: a.logf}
	sopts := server.Options{APIKey: o.key, ReadOnly: o.readOnly, StrictModel: o.strictModel, MCPWrites: o.mcpWrites, Version: version(), Timeout: o.timeout, BatchWait: o.batchWait, Logf: a.logf,
		Limits:       server.Limits{MaxBodyBytes: o.maxBody, MaxBatch: o.maxBatch, MaxK: o.maxK, MaxTextBytes: o.maxText, MaxRequestTokens: o.maxTokens},
		CORS:         o.cors,
		AllowedHosts: append(listenHost(o.listen), o.allowHosts...),
		HintText:     hintCommand}
	rr, fusion, err := loadReranker(ctx, o.reranker, func(f string, a2 ...any) { a.logf("serve: "+f, a2...) })
	if err != nil {
		return err
	}
	if rr != nil {
		defer rr.Close()
		eopts.Reranker, sopts.Reranker = rr, rr
		sopts.RerankerName, sopts.RerankFusion = rr.Manifest().Name, fusion
	}
	eng, err := engine.Open(ctx, o.dir, eopts)
	if err != nil {
		return err
	}
	defer eng.Close()
	srv, err := server.New(eng, sopts)
	if err != nil {
		return err
	}
	defer srv.Close()
	lns, err := a.serveListeners(o)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	if err != nil {
		return err
	}
	if o.watch != "" {
		defer a.serveWatch(ctx, eng, o)()
	}
	if err := server.Serve(ctx, srv, lns, o.grace); err != nil {
		return err
	}
	a.logf("serve: stopped; closing %s", o.dir)
	srv.Close()
	if err := eng.Close(); err != nil {
		return fmt.Errorf("close %s: %w", o.dir, err)
	}
	return nil
}

// serveListeners listens on --listen and --unix; those opened are
// returned with an error too.
func (a *app) serveListeners(o serveOptions) ([]net.Listener, error) {
	var lns []net.Listener
	if o.listen != "" {
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return lns, err
		}
		lns = append(lns, ln)
		a.logf("serve: listening on http://%s (index %s)", ln.Addr(), o.dir)
	}
	if o.unixPath != "" {
		ln, err := listenUnix(o.unixPath)
		if err != nil {
			return lns, err
		}
		lns = append(lns, ln)
		a.logf("serve: listening on unix:%s", o.unixPath)
	}
	return lns, nil
}

// serveWatch keeps eng in step with --watch's folder until the function
// it returns is called, which stops the watch and waits for it.
func (a *app) serveWatch(ctx context.Context, eng *engine.Engine, o serveOptions) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		defer close(watched)
		err := safe.Call(func() error { return a.watchFolder(wctx, eng, o.watch, o.ff, 256, nil) })
		if err != nil {
			a.logf("serve: --watch %s stopped: %v", o.watch, err)
		}
		watched <- err
	}()
	return func() { cancel(); <-watched }
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
