package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
)

func (a *app) indexCommand() *cobra.Command {
	var (
		dir, model, input string
		batch             int
		skipBad, cache    bool
		chunks            chunkFlags
		be                backendFlags
	)
	cmd := &cobra.Command{
		Use:   "index --index DIR [--input] FILE",
		Short: "add documents (BEIR corpus.jsonl or JSON lines) to an anna directory",
		Long: `Reads JSON lines {"_id" or "id", "title", "text", "metadata"} (a BEIR corpus.jsonl
works as is) from FILE, or from stdin when FILE is "-" or absent and stdin is not
a terminal, and adds them to the anna directory, creating it if needed.

Documents already stored unchanged are skipped, so an interrupted run (Ctrl-C,
or a crash) is resumed by running the same command again. A malformed line stops
the run with FILE:LINE after committing the lines before it (--skip-bad skips and
counts it); documents with neither title nor text are skipped and counted.

A document longer than the model's window (256 tokens for the default model) is
embedded as overlapping windows, each with the title in front, and the dense
list ranks it by its best window; --chunk-tokens and --chunk-stride shape the
windows, --no-chunking embeds it once, truncated. The choice is recorded with
the first documents; reindex changes it.`,
		Example: `  annactl index --index my-index corpus.jsonl
  cat docs.jsonl | annactl index --index my-index`,
		Args: maxInputArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			if err := atLeast("batch", batch, 1); err != nil {
				return err
			}
			in, name, closeIn, err := a.openInput(input, args)
			if err != nil {
				return err
			}
			defer closeIn()
			opts := engine.Options{Model: model, Logf: a.logf}
			ch, err := chunks.chunking(cmd)
			if err != nil {
				return err
			}
			if ch != nil {
				opts.Chunking = *ch
			}
			if cache {
				opts.EmbeddingCache = home.EmbeddingCacheDir()
			}
			if err := be.apply(cmd, &opts); err != nil {
				return err
			}
			eng, err := engine.Open(cmd.Context(), dir, opts)
			if err != nil {
				return err
			}
			st, err := a.indexStream(cmd.Context(), eng, in, name, batch, skipBad)
			cerr := eng.Close()
			fmt.Fprintf(a.stderr, "indexed %s: %d lines read, %d added, %d updated, %d unchanged, %d duplicate IDs in the input (the last kept), %d empty documents and %d bad lines skipped\n",
				name, st.lines, st.added, st.updated, st.unchanged, st.dups, st.empty, st.bad)
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(a.stderr, "interrupted: every batch counted above is committed; run the same command again to resume")
			}
			return errors.Join(err, cerr)
		},
	}
	f := cmd.Flags()
	indexFlag(cmd, &dir, "anna directory `DIR` (created if missing)")
	f.StringVar(&input, "input", "", "documents to add: JSON lines `FILE` (- for stdin); or give FILE as the argument")
	modelVar(f, &model, "model", "", "model directory `DIR` (default: the one recorded in the index, else the installed default)")
	f.IntVar(&batch, "batch", 256, "documents embedded and committed together")
	f.BoolVar(&skipBad, "skip-bad", false, "skip malformed lines (counted) instead of stopping")
	f.BoolVar(&cache, "cache", false, "reuse and fill the embedding cache under $ANNA_HOME/cache (by model fingerprint and text)")
	chunks.register(cmd)
	be.register(cmd)
	return cmd
}

// maxInputArgs allows the input file as the one optional argument.
func maxInputArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageErrorf("one input file at most, got %d arguments: %q", len(args), args)
	}
	return nil
}

// openInput resolves --input or the FILE argument: a file, or stdin for "-"
// or nothing (refused when stdin is a terminal: it would wait silently).
func (a *app) openInput(flag string, args []string) (io.Reader, string, func(), error) {
	path := flag
	if len(args) == 1 {
		if flag != "" {
			return nil, "", nil, usageErrorf("the input is given twice (--input %s and %s)", flag, args[0])
		}
		path = args[0]
	}
	if path == "" || path == "-" {
		if path == "" && isTerminal(a.stdin) {
			return nil, "", nil, usageErrorf("no input: give FILE (or --input FILE), or pipe JSON lines into stdin")
		}
		return a.stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", nil, err
	}
	return f, path, func() { f.Close() }, nil
}

type indexStats struct{ lines, added, updated, unchanged, dups, bad, empty int }

// indexStream reads documents and adds them in committed batches. On a
// malformed line it commits what came before, then stops (or skips it). An
// interrupt stops at the next line; the batch being read is not committed
// (the next run reads it again).
func (a *app) indexStream(ctx context.Context, eng *engine.Engine, in io.Reader, name string, batch int, skipBad bool) (indexStats, error) {
	var st indexStats
	p := a.progress("indexing "+name, 0)
	defer p.done()
	pending := make([]engine.Document, 0, batch)
	seen := map[string]bool{}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		res, err := eng.Add(ctx, pending)
		if res.Committed || err == nil {
			st.added += res.Added
			st.updated += res.Updated
			st.unchanged += res.Unchanged
		}
		pending = pending[:0]
		p.update(st.lines, fmt.Sprintf("docs (%d new, %d unchanged)", st.added, st.unchanged))
		return err
	}
	var onBad func(int, error) error
	if skipBad {
		onBad = func(line int, err error) error {
			st.bad++
			fmt.Fprintf(a.stderr, "skipping %v\n", err)
			return nil
		}
	}
	err := beir.ReadCorpusSkipping(in, name, onBad, func(line int, d beir.Doc) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		st.lines = line
		if engine.IsEmpty(engine.Document(d)) {
			st.empty++
			return nil
		}
		if seen[d.ID] {
			st.dups++
		}
		seen[d.ID] = true
		pending = append(pending, engine.Document(d))
		if len(pending) >= batch {
			return flush()
		}
		return nil
	})
	if err == nil || (!errors.Is(err, context.Canceled) && ctx.Err() == nil) {
		// A bad line: commit what came before it.
		if ferr := flush(); err == nil {
			err = ferr
		} else if ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return st, err
}
