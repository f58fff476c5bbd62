package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// indexLong is index's help.
const indexLong = `Reads JSON lines {"_id" or "id", "title", "text", "metadata"} (a BEIR corpus.jsonl
works as is) from FILE, or from stdin when FILE is "-" or absent and stdin is not
a terminal, and adds them to the anna directory, creating it if needed.
"metadata" (or "meta", as older search --json printed it) is an object of
strings, numbers (compared as numbers by search --where) and arrays (a key
with several values); "language" (or "lang") is the language the document is
written in (an ISO 639-1 code: en, de, zh...); other top-level fields are
ignored, with a warning.

Each document is analysed for BM25 (and its snippets) as its language is
written: its own "language", else --language, else the language detected in
its text (English where detection cannot tell). One directory may hold many
languages; a query is read in each of them (docs/languages.md).

Documents already stored unchanged are skipped, so an interrupted run (Ctrl-C,
or a crash) is resumed by running the same command again. A malformed line stops
the run with FILE:LINE after committing the lines before it (--skip-bad skips and
counts it); documents with neither title nor text are skipped and counted, and
lines holding invalid UTF-8 are stored with U+FFFD in its place, counted and named.

A FOLDER is read file by file: PDF, HTML, Word, PowerPoint, Excel,
OpenDocument, EPUB, Jupyter notebooks, e-mail (.eml, .mbox), Markdown,
reStructuredText, plain text and source code (docs/formats.md). Each file is
one document per part — a PDF's page, a section under a heading, a slide, a
sheet, a function — whose ID is the file's path relative to FOLDER (with "#N"
for part N of several), its title the format's own (PDF info, <title>, core
properties, first heading, a .txt's first line) else the file name, and its
metadata where it lies (path, page, lines, section, symbol) with the file's
ext, format, size, mtime and sha256 (search --where 'ext=pdf'). Hidden files,
what .gitignore and .annaignore leave out, and --exclude are not read; every
file not read is counted by reason in the summary, and one that fails to
read is named (the others go on; --strict exits 1). Indexing the folder again
reads only files whose size or time changed (a file that failed and has not
changed is named again, not read again), embeds only changed text, and
keeps the vectors of a renamed file; with --sync the documents of files gone
leave too. --watch FOLDER does that, then keeps the directory in step as
files change until Ctrl-C.

With --sync the directory ends up holding exactly FILE's documents: once every
line is in, the documents FILE does not hold are removed, --batch per commit
(after a malformed line or an interrupt nothing is removed; run it again).

A document longer than the model's window (256 tokens for the default model) is
embedded as overlapping windows, each with the title in front, and the dense
list ranks it by its best window; --chunk-tokens and --chunk-stride shape the
windows, --no-chunking embeds it once, truncated. The choice is recorded with
the first documents; reindex changes it. A document of more than --max-passages
passages (512) is embedded by its first ones and named on stderr; BM25 indexes
all of its text.

--model URL#NAME embeds with a model another server runs, through its
OpenAI-compatible /v1/embeddings (text-embeddings-inference, Ollama, llama.cpp's
server, another annactl serve): batched, retried, its API key from
$ANNA_MODEL_API_KEY. The index records it by name and dimension, so it reopens
with it (wherever the server moves: give --model again) and refuses another.

Beside a process that has DIR open for writing (annactl serve, another
annactl index), the documents go through it: it embeds them with its model and
commits each batch, which its searches see at once. --model or --precision
naming another model than that process's is refused; --sync works through it.`

// indexOptions are index's flags.
type indexOptions struct {
	dir, model, input string
	precision         string
	language          string
	batch             int
	skipBad, cache    bool
	syncInput         bool
	chunks            chunkFlags
	be                backendFlags
	ff                folderFlags
	watch             string

	folder string         // the folder indexed (--watch's, or the argument's), else ""
	engine engine.Options // but the model, which runIndex resolves
}

func (a *app) indexCommand() *cobra.Command {
	var o indexOptions
	cmd := &cobra.Command{
		Use:   "index --index DIR [--input] FILE|FOLDER | --watch FOLDER",
		Short: "add documents (JSON lines, a BEIR corpus.jsonl, or a folder of your files: PDF, web pages, Office, e-books, notebooks, mail, notes, code) to an anna directory",
		Long:  indexLong,
		Example: `  annactl index --index my-index corpus.jsonl
  annactl index --index notes-index ~/notes --sync
  annactl index --index papers-index --watch ~/papers --exclude 'drafts/**'
  cat docs.jsonl | annactl index --index my-index`,
		Args: maxInputArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd, args); err != nil {
				return err
			}
			return a.runIndex(cmd.Context(), o, args)
		},
	}
	o.register(cmd)
	return cmd
}

func (o *indexOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	indexFlag(cmd, &o.dir, "anna directory `DIR` (created if missing)")
	f.StringVar(&o.input, "input", "", "documents to add: JSON lines `FILE` (- for stdin); or give FILE as the argument")
	modelVar(f, &o.model, "model", "", "model directory `DIR` (default: the one recorded in the index, else the installed default); or URL#NAME, a model another server runs behind an OpenAI-compatible /v1/embeddings (TEI, Ollama, llama.cpp, another annactl serve; key in $ANNA_MODEL_API_KEY)")
	f.StringVar(&o.precision, "precision", "", "the model's weights for a new index: int8 (the default for "+int8DefaultNames()+", measured within 0.005 SciFact nDCG@10 of float32 at about 2x the speed; NAME-int8 is installed beside NAME when missing) or float32 (the default for every other model); the index records the model, and reindex changes it")
	f.StringVar(&o.language, "language", "", "the language of the documents that name none (an ISO 639-1 `CODE`: en, de, zh...; default: detected in each document)")
	f.IntVar(&o.batch, "batch", 256, "documents embedded and committed together")
	f.BoolVar(&o.skipBad, "skip-bad", false, "skip malformed lines (counted) instead of stopping")
	f.BoolVar(&o.cache, "cache", true, cacheUsage)
	f.BoolVar(&o.syncInput, "sync", false, "make the directory hold exactly FILE's documents: once all are in, remove the others (--batch per commit; not after a bad line or an interrupt)")
	f.StringVar(&o.watch, "watch", "", "index `FOLDER`, then keep the directory in step as its files change (created, edited, renamed, deleted) until Ctrl-C")
	o.ff.register(cmd, true)
	o.chunks.register(cmd)
	o.be.register(cmd)
}

// check validates the flags and makes the engine options.
func (o *indexOptions) check(cmd *cobra.Command, args []string) error {
	if err := requireFlags(cmd, "index"); err != nil {
		return err
	}
	if err := atLeast("batch", o.batch, 1); err != nil {
		return err
	}
	o.folder = inputFolder(o.input, args)
	if o.watch != "" {
		if o.folder != "" || o.input != "" || len(args) > 0 {
			return usageErrorf("--watch FOLDER is the input: give no other")
		}
		o.folder = o.watch
	}
	if err := catalog.CheckPrecision(o.precision); err != nil {
		return usageErrorf("--precision: %v", err)
	}
	// Beside a process that has DIR open for writing (annactl
	// serve), the documents go through it, embedded with its model.
	o.engine = engine.Options{KeepModel: true, Language: o.language, WriteThrough: true, MaxPassages: o.chunks.maxPassages}
	ch, err := o.chunks.chunking(cmd)
	if err != nil {
		return err
	}
	if ch != nil {
		o.engine.Chunking = *ch
	}
	if o.cache {
		o.engine.EmbeddingCache = home.EmbeddingCacheDir()
	}
	return o.be.apply(cmd, &o.engine)
}

// runIndex indexes the input (a folder, or JSON lines from a file or
// stdin) into o.dir and reports what it did on a's stderr.
func (a *app) runIndex(ctx context.Context, o indexOptions, args []string) error {
	var in io.Reader
	name := o.folder
	if o.folder == "" {
		r, n, closeIn, err := a.openInput(o.input, args)
		if err != nil {
			return err
		}
		defer closeIn()
		in, name = r, n
	}
	model, err := indexModel(ctx, o.dir, o.model, o.precision)
	if err != nil {
		return err
	}
	opts := o.engine
	passages := &passageProgress{print: a.logf} // counted on the progress line
	opts.Model, opts.EmbedProgress, opts.Logf = model, passages.report, passages.logf
	eng, err := engine.Open(ctx, o.dir, opts)
	if err != nil {
		return err
	}
	if o.folder != "" {
		err = a.runFolder(ctx, eng, o.folder, o.ff, o.batch, o.syncInput, o.watch != "", passages)
		return errors.Join(err, eng.Close())
	}
	st, err := a.indexStream(ctx, eng, in, name, o.batch, o.skipBad, passages)
	if o.syncInput {
		err = a.syncIndex(ctx, eng, &st, o.batch, err)
	}
	cerr := eng.Close()
	fmt.Fprintf(a.stderr, "indexed %s: %d lines read, %d added, %d updated, %d unchanged, %d duplicate IDs in the input (the last kept), %d empty documents and %d bad lines skipped\n",
		name, st.lines, st.added, st.updated, st.unchanged, st.dups, st.empty, st.bad)
	a.indexReport(st, name, o.dir, o.syncInput, err)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "interrupted: every batch counted above is committed; run the same command again to resume")
	}
	return errors.Join(err, cerr)
}

// runFolder indexes a folder once (--sync: the documents of files gone
// leave) or watches it (--watch), and says what it did.
func (a *app) runFolder(ctx context.Context, eng *engine.Engine, folder string, ff folderFlags, batch int, sync, watch bool, passages *passageProgress) error {
	if watch {
		return a.watchFolder(ctx, eng, folder, ff, batch, nil)
	}
	fs, rep, err := a.indexFolder(ctx, eng, folder, ff, batch, sync, passages)
	if rep == nil {
		return err
	}
	rep.summary(folder, fs)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "interrupted: every file counted above is committed; run the same command again to resume")
	}
	if err == nil && ff.strict && rep.failed > 0 {
		fmt.Fprintf(a.stderr, "--strict: %s failed to read\n", plural(rep.failed, "file"))
		return exitError{1}
	}
	return err
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
// to) is the engine's error, which names reindex. Beside a process that
// has dir open for writing, and neither a model nor a precision asked
// for, it is "": that process's model.
func indexModel(ctx context.Context, dir, modelDir, precision string) (string, error) {
	if modelDir == "" && precision == catalog.PrecisionAuto {
		if pid, _, err := engine.Writer(ctx, dir); err == nil && pid != 0 {
			return "", nil // written through that process, with its model
		}
	}
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
	if encoder.IsRemote(modelDir) {
		if precision != catalog.PrecisionAuto {
			return "", usageErrorf("--precision %s: the model, %s, runs on another server, which decides its precision", precision, modelDir)
		}
		return modelDir, nil
	}
	if _, err := model.LoadManifest(modelDir); err != nil {
		if precision != catalog.PrecisionAuto {
			return "", fmt.Errorf("--precision %s: %w", precision, err)
		}
		return modelDir, nil // the engine names what is wrong with it
	}
	return catalog.WithPrecision(ctx, modelDir, precision, home.SourceDir(), catalog.Options{DownloadsDir: home.DownloadsDir()})
}
