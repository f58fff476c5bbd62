package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/beir"
	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

func init() {
	register(command{name: "index", summary: "add documents (BEIR corpus.jsonl or JSON lines) to an anna directory", run: runIndex})
}

func runIndex(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	dir := fs.String("index", "", "anna directory (created if missing)")
	model := fs.String("model", "", "model directory (default: the one recorded in the index, else the installed default)")
	batch := fs.Int("batch", 256, "documents per committed batch")
	skipBad := fs.Bool("skip-bad", false, "skip malformed lines (counted) instead of stopping")
	cache := fs.Bool("cache", false, "reuse and fill the embedding cache under $ANNA_HOME/cache (keyed by model fingerprint and text)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: annactl index --index DIR [flags] [FILE|-]\n\nReads JSON lines {\"_id\"|\"id\", \"title\", \"text\", \"metadata\"} (a BEIR corpus.jsonl works as is) from FILE or stdin.\nDocuments already stored unchanged are skipped, so an interrupted run is resumed by running it again.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *dir == "" || fs.NArg() > 1 {
		fs.Usage()
		return errUsage
	}
	in, name := io.Reader(os.Stdin), "stdin"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	opts := engine.Options{Model: *model, Logf: logf}
	if *cache {
		md := *model
		if md == "" {
			var err error
			if md, err = recordedModelDir(*dir); err != nil {
				return err
			}
		}
		enc, closeEnc, err := loadEncoder(ctx, md, true)
		if err != nil {
			return err
		}
		defer closeEnc()
		opts.Encoder, opts.Model = enc, md
	}
	eng, err := engine.Open(ctx, *dir, opts)
	if err != nil {
		return err
	}
	st, err := indexStream(ctx, eng, in, name, *batch, *skipBad)
	cerr := eng.Close()
	fmt.Fprintf(os.Stderr, "indexed %s: %d lines read, %d added, %d updated, %d unchanged, %d duplicate ids in input (last kept), %d empty documents and %d bad lines skipped\n",
		name, st.lines, st.added, st.updated, st.unchanged, st.dups, st.empty, st.bad)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "interrupted: every batch reported above is committed; run the same command again to resume")
		}
		return err
	}
	return cerr
}

type indexStats struct{ lines, added, updated, unchanged, dups, bad, empty int }

// indexStream reads documents and adds them in committed batches. On a
// malformed line it commits what came before, then stops (or skips it).
func indexStream(ctx context.Context, eng *engine.Engine, in io.Reader, name string, batch int, skipBad bool) (indexStats, error) {
	var st indexStats
	p := newProgress("indexing "+name, 0)
	defer p.done()
	pending := make([]engine.Document, 0, batch)
	seen := map[string]bool{}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		res, err := eng.Add(ctx, pending)
		if err != nil {
			return err
		}
		st.added += res.Added
		st.updated += res.Updated
		st.unchanged += res.Unchanged
		pending = pending[:0]
		p.update(st.lines, fmt.Sprintf("docs (%d new, %d unchanged)", st.added, st.unchanged))
		return nil
	}
	var onBad func(int, error) error
	if skipBad {
		onBad = func(line int, err error) error {
			st.bad++
			fmt.Fprintf(os.Stderr, "skipping %v\n", err)
			return nil
		}
	}
	err := beir.ReadCorpusSkipping(in, name, onBad, func(line int, d beir.Doc) error {
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
		return ctx.Err()
	})
	if ferr := flush(); err == nil {
		err = ferr
	} else if ferr != nil {
		err = errors.Join(err, ferr)
	}
	return st, err
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// loadEncoder loads model (the default model when "") and, with cache,
// puts it behind the embedding cache under $ANNA_HOME/cache.
func loadEncoder(ctx context.Context, model string, cache bool) (encoder.Encoder, func(), error) {
	var base *encoder.ORTEncoder
	var err error
	if model != "" {
		base, err = encoder.Load(ctx, model, encoder.Options{})
	} else {
		base, err = encoder.Default(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	closeBase := func() { base.Close() }
	if !cache {
		return base, closeBase, nil
	}
	c, err := encoder.NewCache(base, filepath.Join(home.CacheDir(), "embeddings"))
	if err != nil {
		base.Close()
		return nil, nil, err
	}
	return c, closeBase, nil
}

// recordedModelDir is the model directory recorded in an anna directory.
func recordedModelDir(dir string) (string, error) {
	m, err := engine.RecordedModel(dir)
	return m.Dir, err
}
