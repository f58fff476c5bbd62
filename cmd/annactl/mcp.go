package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/rerank"
	"github.com/anna-search/anna/server"
)

func (a *app) mcpCommand() *cobra.Command {
	var (
		dir, reranker string
		allowWrites   bool
		timeout, hold time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp --index DIR [--allow-writes]",
		Short: "answer the Model Context Protocol over stdio: search an anna directory from an agent",
		Long: `Serves the anna directory to an agent (Claude Code, Claude Desktop, Cursor, VS Code,
Codex CLI: docs/mcp.md gives each one's configuration) over the Model Context
Protocol on stdin and stdout, with the tools search, get, multi_get and status;
--allow-writes adds add and delete. annactl serve offers the same tools over HTTP
at /mcp.

The directory is opened read-only (with --allow-writes, for writing) when a tool
is called, and closed once no call has come for --hold, so that annactl index
and other writers can open it between an agent's searches; beside a process
that has it open for writing (annactl serve) the tools go through that process.
Logs go to stderr; stdout carries the protocol only. The process ends when its
client closes stdin, or on SIGINT or SIGTERM.`,
		Example: `  annactl mcp --index ~/notes-index
  claude mcp add anna -- annactl mcp --index ~/notes-index`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			if timeout <= 0 || hold <= 0 {
				return usageErrorf("--timeout and --hold must be positive")
			}
			if _, err := os.Stat(filepath.Join(dir, "anna.db")); errors.Is(err, os.ErrNotExist) && !allowWrites {
				return fmt.Errorf("%s is %w (no anna.db): create it with `annactl index --index %s FILE|FOLDER`, or give --allow-writes to let the agent add documents", dir, engine.ErrNotIndex, dir)
			}
			eopts := engine.Options{ReadOnly: !allowWrites, WriteThrough: allowWrites, KeepModel: allowWrites, Logf: a.logf}
			rr, fusion, err := loadReranker(cmd.Context(), reranker, a.logf)
			if err != nil {
				return err
			}
			if rr != nil {
				defer rr.Close()
				eopts.Reranker = rr
			}
			open := func(ctx context.Context) (*engine.Engine, error) { return engine.Open(ctx, dir, eopts) }
			// Open once now, so that a directory that cannot be served
			// says so before any client connects.
			e, err := open(cmd.Context())
			if err != nil {
				return err
			}
			st, err := e.Stats()
			e.Close()
			if err != nil {
				return err
			}
			how := "read-only"
			if allowWrites {
				how = "writes allowed"
			}
			a.logf("mcp: serving %s over stdio (%d documents, model %s; %s)", dir, st.Documents, st.Model.Label(), how)
			srv, held := server.NewMCPHeld(open, hold, server.MCPOptions{AllowWrites: allowWrites, Reranker: rr != nil, RerankFusion: fusion, Timeout: timeout, Version: version(), HintText: hintCommand})
			defer held.Close()
			err = srv.Run(cmd.Context(), &mcp.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}})
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	indexFlag(cmd, &dir, "anna directory `DIR` to serve")
	f.BoolVar(&allowWrites, "allow-writes", false, "offer the add and delete tools (the directory is opened for writing, created if missing)")
	modelVar(f, &reranker, "reranker", "", "cross-encoder `NAME|DIR` for search's mode rerank (default: the installed one measured to help, if any)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "longest a tool call may run")
	f.DurationVar(&hold, "hold", 2*time.Second, "how long the directory stays open after a tool call (writers in other processes wait for it)")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// loadReranker loads the reranker named (a name or a directory), or, when
// none is, the installed one measured to help, if any (rerank.Choose);
// fusion is how it was measured to help (fused with the retrieval lists,
// or alone).
func loadReranker(ctx context.Context, name string, logf func(string, ...any)) (rr *rerank.Model, fusion bool, err error) {
	if name != "" {
		if name, err = modelDir(name); err != nil { // an unknown name: what is installed
			return nil, false, err
		}
	}
	rr, name, fusion, err = rerank.Choose(ctx, name, rerank.Options{})
	if rr != nil {
		logf("reranking with %s", name)
	}
	return rr, fusion, err
}
