package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

func (a *app) indexCommand() *cobra.Command {
	var (
		dir, model, input string
		precision         string
		batch             int
		skipBad, cache    bool
		syncInput         bool
		chunks            chunkFlags
		be                backendFlags
	)
	cmd := &cobra.Command{
		Use:   "index --index DIR [--input] FILE|FOLDER",
		Short: "add documents (JSON lines, a BEIR corpus.jsonl, or a folder of text files) to an anna directory",
		Long: `Reads JSON lines {"_id" or "id", "title", "text", "metadata"} (a BEIR corpus.jsonl
works as is) from FILE, or from stdin when FILE is "-" or absent and stdin is not
a terminal, and adds them to the anna directory, creating it if needed.
"metadata" (or "meta", as older search --json printed it) is an object of
strings, numbers (compared as numbers by search --where) and arrays (a key
with several values); other top-level fields are ignored, with a warning.

Documents already stored unchanged are skipped, so an interrupted run (Ctrl-C,
or a crash) is resumed by running the same command again. A malformed line stops
the run with FILE:LINE after committing the lines before it (--skip-bad skips and
counts it); documents with neither title nor text are skipped and counted, and
lines holding invalid UTF-8 are stored with U+FFFD in its place, counted and named.

A FOLDER is read as text documents: every Markdown (.md, .markdown), plain text
(.txt, .text) and reStructuredText (.rst) file under it, hidden files and
folders and symbolic links left out; a document's ID is its path relative to
FOLDER, its title a Markdown file's front-matter title or first heading, else
the file name; metadata "path" and "ext" (search --where 'ext=md'). Files over
64 MiB or binary are skipped and named. Indexing the folder again updates
changed files; with --sync, deleted files leave the directory too.

With --sync the directory ends up holding exactly FILE's documents: once every
line is in, the documents FILE does not hold are removed, --batch per commit
(after a malformed line or an interrupt nothing is removed; run it again).

A document longer than the model's window (256 tokens for the default model) is
embedded as overlapping windows, each with the title in front, and the dense
list ranks it by its best window; --chunk-tokens and --chunk-stride shape the
windows, --no-chunking embeds it once, truncated. The choice is recorded with
the first documents; reindex changes it. A document of more than --max-passages
passages (512) is embedded by its first ones and named on stderr; BM25 indexes
all of its text.`,
		Example: `  annactl index --index my-index corpus.jsonl
  annactl index --index notes-index ~/notes --sync
  cat docs.jsonl | annactl index --index my-index`,
		Args: maxInputArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			if err := atLeast("batch", batch, 1); err != nil {
				return err
			}
			folder := inputFolder(input, args)
			var in io.Reader
			name := folder
			if folder == "" {
				r, n, closeIn, err := a.openInput(input, args)
				if err != nil {
					return err
				}
				defer closeIn()
				in, name = r, n
			}
			if err := catalog.CheckPrecision(precision); err != nil {
				return usageErrorf("--precision: %v", err)
			}
			model, err := indexModel(cmd.Context(), dir, model, precision)
			if err != nil {
				return err
			}
			opts := engine.Options{Model: model, Logf: a.logf, KeepModel: true}
			passages := &passageProgress{print: a.logf} // counted on the progress line
			opts.MaxPassages, opts.EmbedProgress, opts.Logf = chunks.maxPassages, passages.report, passages.logf
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
			var st indexStats
			if folder != "" {
				st, err = a.indexFolder(cmd.Context(), eng, folder, batch, passages)
			} else {
				st, err = a.indexStream(cmd.Context(), eng, in, name, batch, skipBad, passages)
			}
			if syncInput {
				err = a.syncIndex(cmd.Context(), eng, &st, batch, err)
			}
			cerr := eng.Close()
			if folder != "" {
				fmt.Fprintf(a.stderr, "indexed %s: %d files read, %d added, %d updated, %d unchanged, %d empty and %d skipped (too large, binary or unreadable)\n",
					name, st.lines-st.bad, st.added, st.updated, st.unchanged, st.empty, st.bad)
			} else {
				fmt.Fprintf(a.stderr, "indexed %s: %d lines read, %d added, %d updated, %d unchanged, %d duplicate IDs in the input (the last kept), %d empty documents and %d bad lines skipped\n",
					name, st.lines, st.added, st.updated, st.unchanged, st.dups, st.empty, st.bad)
			}
			a.indexReport(st, name, dir, syncInput, err)
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
	f.StringVar(&precision, "precision", "", "the model's weights for a new index: int8 (the default for all-MiniLM-L6-v2 and bge-small-en-v1.5, measured within 0.005 SciFact nDCG@10 of float32 at about 2x the speed; NAME-int8 is installed beside NAME when missing) or float32 (the default for every other model); the index records the model, and reindex changes it")
	f.IntVar(&batch, "batch", 256, "documents embedded and committed together")
	f.BoolVar(&skipBad, "skip-bad", false, "skip malformed lines (counted) instead of stopping")
	f.BoolVar(&cache, "cache", true, cacheUsage)
	f.BoolVar(&syncInput, "sync", false, "make the directory hold exactly FILE's documents: once all are in, remove the others (--batch per commit; not after a bad line or an interrupt)")
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

type indexStats struct {
	lines, added, updated, unchanged, dups, bad, empty int

	badUTF8      int             // stored documents whose line held invalid UTF-8
	badUTF8First []string        // the first few, FILE:LINE
	seen         map[string]bool // the IDs of the documents read (for --sync)
	removed      int             // --sync: documents removed
	synced       bool            // --sync: all removed
}

// indexStream reads documents and adds them in committed batches
// (ingest.Read). On a malformed line it commits what came before, then
// stops (or skips it). An interrupt stops at the next line; the batch being
// read is not committed (the next run reads it again).
func (a *app) indexStream(ctx context.Context, eng *engine.Engine, in io.Reader, name string, batch int, skipBad bool, passages *passageProgress) (indexStats, error) {
	var st indexStats
	p := a.progress("indexing "+name, 0)
	passages.show(p)
	defer p.done()
	countLinesAsync(ctx, in, p)
	chk := &utf8Lines{r: in}
	seen := map[string]bool{}
	st.seen = seen
	opt := ingest.Options{
		Batch: batch,
		Progress: func(pr ingest.Progress) {
			if pr.Read == 0 {
				p.update(0, fmt.Sprintf("reading and embedding the first %d documents…", batch))
				return
			}
			p.update(pr.Read, fmt.Sprintf("docs (%d new, %d unchanged)", pr.Added, pr.Unchanged))
		},
		Accept: func(line int, d engine.Document) {
			if chk.invalid(line) {
				st.noteUTF8(name, line)
			}
			if seen[d.ID] {
				st.dups++
			}
			seen[d.ID] = true
		},
		// A field the reader does not know is dropped: say so, once per name.
		OnUnknownField: func(_ int, _, warning string) { fmt.Fprintf(a.stderr, "warning: %s\n", warning) },
	}
	if skipBad {
		opt.OnBad = func(line int, err error) error {
			st.bad++
			fmt.Fprintf(a.stderr, "skipping %v\n", err)
			return nil
		}
	}
	is, err := ingest.Read(ctx, eng, chk, name, opt)
	st.lines, st.added, st.updated, st.unchanged, st.empty = is.Read, is.Added, is.Updated, is.Unchanged, is.Empty
	return st, err
}

// indexModel is the model directory `annactl index` opens the engine with:
// "" (the one the index records) for an index bound to a model when
// neither --model nor --precision is given; else the model (--model, the
// recorded one, or the installed default) at the precision asked for
// (catalog.WithPrecision: int8 by default for the catalogue encoders
// measured to keep their quality, installing NAME-int8 when missing).
// A model the engine refuses (another than the one the index is bound
// to) is the engine's error, which names reindex.
func indexModel(ctx context.Context, dir, modelDir, precision string) (string, error) {
	if modelDir == "" {
		rec, err := engine.RecordedModel(dir)
		if err != nil {
			return "", nil // engine.Open says what is wrong with the directory, and how to repair it
		}
		switch {
		case rec.Fingerprint != "" && precision == catalog.PrecisionAuto:
			return "", nil
		case rec.Fingerprint != "":
			if modelDir, err = engine.FindModel(rec); err != nil {
				return "", err
			}
		default:
			modelDir = filepath.Join(home.ModelsDir(), home.DefaultEmbedName) // at its default precision: home.DefaultEmbedModel
		}
	}
	if _, err := model.LoadManifest(modelDir); err != nil {
		if precision != catalog.PrecisionAuto {
			return "", fmt.Errorf("--precision %s: %w", precision, err)
		}
		return modelDir, nil // the engine names what is wrong with it
	}
	return catalog.WithPrecision(ctx, modelDir, precision, home.SourceDir(), catalog.Options{DownloadsDir: home.DownloadsDir()})
}
