package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/doc2query"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model/catalog"
)

// doc2queryOptions are doc2query's flags: the generation's options and
// what the command reads into them.
type doc2queryOptions struct {
	dataset, output, mdl, exSplit string
	examples                      int
	d                             doc2query.Options
}

func (a *app) doc2queryCommand() *cobra.Command {
	var o doc2queryOptions
	cmd := &cobra.Command{
		Use:   "doc2query --dataset BEIR_DIR --output DIR [flags]",
		Short: "write search queries for corpus documents with an instruct decoder (synthetic training pairs)",
		Long: `Writes search queries for the documents of BEIR_DIR's corpus with an instruct
decoder run in-process (the trainer's forward with a key/value cache), into
DIR as a BEIR folder: corpus.jsonl (the source's), queries.jsonl (a generated
query a line, with the document it was written for) and qrels/generated.tsv.
mine-negatives reads it like any BEIR set (--split generated), and with
--require-positive-top 1 keeps only the queries whose document its teacher
ranks first (the consistency filter of InPars and Promptagator).

--model is a llama GGUF file whose chat template is ChatML, or the catalogue's
smollm2-135m-instruct (downloaded once, pinned). Each document (title and
text, cut to --max-doc-tokens) goes into one user turn after --instruction;
--examples N puts N judged (query, document) pairs of the dataset's
--examples-split before it as earlier turns, to show what a query of the
collection looks like (a small decoder needs them).
Documents are taken in a seeded order (--docs N: the first N of it) and each
is sampled with its own seed, so a rerun, or a run resumed after Ctrl-C or
kill -9 (the same command again), writes the same queries.`,
		Example: `  annactl doc2query --dataset ../shared/datasets/scifact --output gen --docs 500 --examples 3 --examples-split train
  annactl mine-negatives --dataset gen --split generated --index IDX --output gen-mined.jsonl --require-positive-top 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runDoc2query(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataset, "dataset", "", "BEIR folder `DIR` whose corpus.jsonl gets queries")
	f.StringVar(&o.output, "output", "", "BEIR folder `DIR` to write (resumed when it holds an earlier run's queries)")
	f.StringVar(&o.mdl, "model", "smollm2-135m-instruct", "instruct decoder: a llama GGUF `FILE` with a ChatML chat template, or a catalogue NAME")
	f.StringVar(&o.d.Instruction, "instruction", doc2query.DefaultInstruction, "what the decoder is asked, before each document")
	f.IntVar(&o.d.Docs, "docs", 0, "documents to write queries for, `N` in a seeded order (0: all)")
	f.IntVar(&o.d.PerDoc, "per-doc", 1, "queries per document (more than 1 needs --temperature)")
	f.IntVar(&o.d.MaxNew, "max-new", 40, "tokens per query at most")
	f.IntVar(&o.d.MaxDocTokens, "max-doc-tokens", 256, "the document is cut to this many tokens")
	f.Float64Var(&o.d.Temperature, "temperature", 0.7, "sampling temperature (0: greedy)")
	f.Float64Var(&o.d.TopP, "top-p", 0.9, "nucleus sampling: the smallest set of tokens reaching this probability")
	f.Uint64Var(&o.d.Seed, "seed", 1, "seed of the document order and of the sampling")
	f.IntVar(&o.d.Batch, "batch", 8, "documents decoded together")
	f.IntVar(&o.examples, "examples", 0, "few-shot demonstrations: `N` judged (query, document) pairs of --examples-split shown before each document")
	f.StringVar(&o.exSplit, "examples-split", "train", "the qrels split the --examples come from")
	f.IntVar(&o.d.ExampleDocTokens, "example-doc-tokens", 96, "each demonstration's document is cut to this many tokens")
	return cmd
}

// check validates the flags.
func (o *doc2queryOptions) check(cmd *cobra.Command) error {
	if err := requireFlags(cmd, "dataset", "output"); err != nil {
		return err
	}
	for name, v := range map[string]int{"docs": o.d.Docs, "per-doc": o.d.PerDoc, "max-new": o.d.MaxNew, "max-doc-tokens": o.d.MaxDocTokens, "batch": o.d.Batch} {
		if err := atLeast(name, v, 0); err != nil {
			return err
		}
	}
	if o.d.Temperature < 0 || o.d.TopP < 0 || o.d.TopP > 1 {
		return usageErrorf("--temperature %g, --top-p %g: want a temperature ≥ 0 and 0 ≤ top-p ≤ 1", o.d.Temperature, o.d.TopP)
	}
	if o.d.Temperature == 0 && o.d.PerDoc > 1 {
		return usageErrorf("--per-doc %d needs --temperature > 0 (greedy decoding writes one query per document)", o.d.PerDoc)
	}
	if err := atLeast("examples", o.examples, 0); err != nil {
		return err
	}
	return nil
}

// runDoc2query writes the queries (doc2query.Run), its progress on a's
// stderr.
func (a *app) runDoc2query(ctx context.Context, o doc2queryOptions) error {
	if o.examples > 0 {
		var err error
		if o.d.Examples, err = doc2query.ExamplesFrom(o.dataset, o.exSplit, o.examples, o.d.Seed); err != nil {
			return err
		}
	}
	path, err := a.generatorFile(ctx, o.mdl)
	if err != nil {
		return err
	}
	g, err := doc2query.Load(path)
	if err != nil {
		return err
	}
	defer g.Close()
	p := a.progress("doc2query", 0)
	o.d.Progress = func(done, total int) {
		p.total = total
		p.update(done, "docs")
	}
	err = doc2query.Run(ctx, g, o.dataset, o.output, o.d)
	p.done()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("run the same command again to resume (%w)", ctx.Err())
		}
		return err
	}
	fmt.Fprintf(a.stderr, "queries in %s (split %s)\n", o.output, doc2query.Split)
	return nil
}

// generatorFile is the GGUF file --model names: a path, or a catalogue
// decoder's (its pinned download, unpacked once).
func (a *app) generatorFile(ctx context.Context, name string) (string, error) {
	if strings.HasSuffix(strings.ToLower(name), ".gguf") {
		return filepath.Clean(name), nil
	}
	e, err := catalog.Lookup(name)
	if err != nil {
		return "", usageErrorf("--model %q: want a llama GGUF file or a catalogue decoder (smollm2-135m-instruct): %v", name, err)
	}
	path, ok, err := catalog.TrainingSource(ctx, e, catalog.Options{ModelsDir: home.ModelsDir(), DownloadsDir: home.DownloadsDir()})
	if err != nil {
		return "", err
	}
	if !ok || !strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return "", usageErrorf("--model %s is not a decoder with a GGUF file (want smollm2-135m-instruct, or a GGUF FILE)", name)
	}
	return path, nil
}
