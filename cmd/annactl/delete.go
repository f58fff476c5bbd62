package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
)

func (a *app) deleteCommand() *cobra.Command {
	var (
		dir, idsFile string
		batch        int
		be           backendFlags
	)
	cmd := &cobra.Command{
		Use:   "delete --index DIR (ID... | --ids-file FILE)",
		Short: "remove documents from an anna directory by ID",
		Long: `Removes the documents with the given IDs (arguments, and one ID per line of
--ids-file FILE, "-" for stdin) from the store and both indexes. IDs are taken
exactly as written (a trailing carriage return dropped, blank lines skipped);
IDs the directory does not hold are counted, and the first few named, not an
error.

Deletions are committed in batches of --batch IDs, each with its index updates:
killed or interrupted (Ctrl-C stops between batches), a run loses nothing else,
and running it again removes the rest. To make a directory hold exactly the
documents of a file, see annactl index --sync. Beside a process that has DIR
open for writing (annactl serve), the deletions go through it.`,
		Example: `  annactl delete --index my-index doc-17 doc-42
  grep -o '"_id": *"[^"]*"' stale.jsonl | cut -d'"' -f4 | annactl delete --index my-index --ids-file -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			if err := atLeast("batch", batch, 1); err != nil {
				return err
			}
			if len(args) == 0 && idsFile == "" {
				return usageErrorf("no IDs given: give them as arguments or in --ids-file FILE (- for stdin)")
			}
			for i, id := range args {
				if id == "" {
					return usageErrorf("argument %d is an empty ID", i+1)
				}
			}
			if idsFile == "-" && isTerminal(a.stdin) {
				return usageErrorf("--ids-file -: stdin is a terminal; pipe the IDs in, one per line")
			}
			// Beside a process that has DIR open for writing (annactl
			// serve), the deletions go through it.
			opts := engine.Options{Logf: a.logf, WriteThrough: true}
			if err := be.apply(cmd, &opts); err != nil {
				return err
			}
			ids, err := a.readIDs(args, idsFile)
			if err != nil {
				return err
			}
			// A directory that does not exist is not created to delete from.
			if _, err := os.Stat(filepath.Join(dir, "anna.db")); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s is %w (no anna.db): nothing to delete from", dir, engine.ErrNotIndex)
			}
			eng, err := engine.Open(cmd.Context(), dir, opts)
			if err != nil {
				return err
			}
			st, err := a.deleteIDs(cmd.Context(), eng, ids, batch)
			cerr := eng.Close()
			fmt.Fprintf(a.stderr, "deleted %s from %s; %d of the %s given %s not in it%s\n",
				plural(st.deleted, "document"), dir, st.unknown, plural(len(ids), "ID"), isAre(st.unknown), named(st.unknownFirst, st.unknown))
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(a.stderr, "interrupted: every deletion counted above is committed; run the same command again to finish")
			}
			return errors.Join(err, cerr)
		},
	}
	indexFlag(cmd, &dir, "anna directory `DIR`")
	cmd.Flags().StringVar(&idsFile, "ids-file", "", "more IDs, one per line, from `FILE` (- for stdin)")
	cmd.Flags().IntVar(&batch, "batch", engine.DeleteBatch, "IDs deleted and committed together")
	be.register(cmd)
	return cmd
}

// readIDs gathers the IDs of args and file, each once, in the order given.
func (a *app) readIDs(args []string, file string) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, id := range args {
		add(id)
	}
	if file == "" {
		return ids, nil
	}
	var r io.Reader = a.stdin
	name := "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, name = f, file
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		id := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(id) == "" {
			continue
		}
		add(id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading IDs from %s: %w", name, err)
	}
	return ids, nil
}

type deleteStats struct {
	deleted, unknown int
	unknownFirst     []string
}

// namedMax is how many unknown IDs (or lines) a summary names.
const namedMax = 5

// deleteIDs deletes ids in committed batches, counting those the directory
// does not hold. An interrupt stops it between batches.
func (a *app) deleteIDs(ctx context.Context, eng *engine.Engine, ids []string, batch int) (deleteStats, error) {
	var st deleteStats
	p := a.progress("deleting", len(ids))
	defer p.done()
	for done := 0; done < len(ids); {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		b := ids[done:min(done+batch, len(ids))]
		have, err := eng.Get(ctx, b...)
		if err != nil {
			return st, err
		}
		held := make(map[string]bool, len(have))
		for _, d := range have {
			held[d.ID] = true
		}
		for _, id := range b {
			if !held[id] {
				st.unknown++
				if len(st.unknownFirst) < namedMax {
					st.unknownFirst = append(st.unknownFirst, id)
				}
			}
		}
		n, err := eng.Delete(ctx, b)
		st.deleted += n
		if err != nil {
			return st, err
		}
		done += len(b)
		p.update(done, "IDs")
	}
	return st, nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// named lists the first items of a count for a summary: " (first: "a", "b")".
func named(first []string, n int) string {
	if n == 0 {
		return ""
	}
	q := make([]string, len(first))
	for i, s := range first {
		q[i] = fmt.Sprintf("%q", s)
	}
	return " (" + strings.Join(q, ", ") + more(n, len(first)) + ")"
}
