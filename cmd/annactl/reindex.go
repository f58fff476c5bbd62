package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/engine"
)

func init() {
	register(command{name: "reindex", summary: "re-encode every document with a new model and swap the dense index", run: runReindex})
}

func runReindex(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	dir := fs.String("index", "", "anna directory")
	model := fs.String("model", "", "the new model directory (e.g. the output of `annactl train`)")
	batch := fs.Int("batch", 256, "documents embedded per batch")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: annactl reindex --index DIR --model NEW_MODEL_DIR\n\nSearches keep working on the old model until the new graph is built; BM25 is untouched.\nInterrupted runs resume: vectors already computed for the new model are kept.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *dir == "" || *model == "" {
		fs.Usage()
		return errUsage
	}
	abs, err := filepath.Abs(*model)
	if err != nil {
		return err
	}
	eng, err := openExisting(ctx, *dir, engine.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer eng.Close()
	old := eng.Model().Fingerprint
	p := newProgress("re-encoding", 0)
	err = eng.Reindex(ctx, engine.ReindexOptions{Model: abs, BatchSize: *batch, Progress: func(done, total int) {
		p.total = total
		p.update(done, "docs")
	}})
	p.done()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "reindexed %s: model %s -> %s\n", *dir, old, eng.Model().Fingerprint)
	return nil
}
