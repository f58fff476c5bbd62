package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/beir"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/mining"
)

func init() {
	register(command{name: "convert", summary: "prepare training pairs: one per (query, positive), deduplicated; NLI → similarity data", run: runConvert})
}

func runConvert(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	input := fs.String("input", "", `JSON lines {"query", "pos": [...] | "pos_ids": [...], "prompt"}`)
	dataset := fs.String("dataset", "", "BEIR folder (qrels split + corpus) instead of --input")
	split := fs.String("split", "train", "qrels split of --dataset")
	nli := fs.String("nli", "", "NLI JSON lines (premise/hypothesis or sentence1/sentence2, label) to turn into similarity data")
	output := fs.String("output", "", "output file (- for stdout)")
	instruction := fs.String("instruction", "", `default "prompt" for pairs without one`)
	nliFormat := fs.String("format", "pairs", `NLI output: pairs ({"sentence1", "sentence2", "score"}) | flag (grouped by premise)`)
	posScore := fs.Float64("pos-score", 1, "score given to entailment pairs")
	negScore := fs.Float64("neg-score", 0, "score given to contradiction pairs")
	skipBad := fs.Bool("skip-bad", false, "skip bad lines (counted) instead of stopping")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: annactl convert (--input PAIRS.jsonl | --dataset BEIR_DIR [--split S] | --nli FILE) --output FILE [flags]

Pairs: one example per (query, positive) when a query has several positives, duplicate
(query, positive) pairs removed. NLI: entailment → positive (--pos-score), contradiction →
negative (--neg-score), neutral dropped, duplicate pairs removed.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	given := 0
	for _, s := range []string{*input, *dataset, *nli} {
		if s != "" {
			given++
		}
	}
	if given != 1 || *output == "" {
		fmt.Fprintln(fs.Output(), "need --output and exactly one of --input, --dataset, --nli")
		fs.Usage()
		return errUsage
	}
	w, commit, err := createOutput(*output)
	if err != nil {
		return err
	}
	if *nli != "" {
		f, err := os.Open(*nli)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := mining.ConvertNLI(ctx, f, *nli, w, mining.NLIOptions{PosScore: *posScore, NegScore: *negScore, Format: *nliFormat, SkipBad: *skipBad})
		fmt.Fprintf(os.Stderr, "%s: %d lines: %d entailment, %d contradiction kept; %d neutral dropped, %d duplicates (%d with conflicting labels), %d bad; %d lines written\n",
			*nli, st.Lines, st.Entailment, st.Contradiction, st.NeutralDropped, st.Duplicates, st.Conflicts, st.Bad, st.Written)
		return commit(err)
	}
	defaults := mining.PromptDefaults{Instruction: *instruction}
	var src mining.Source
	var corpus mining.Corpus
	if *input != "" {
		src, err = mining.OpenPairs(ctx, *input, defaults)
	} else {
		src, err = mining.OpenBEIR(ctx, *dataset, *split, defaults)
		if err == nil {
			corpus, err = loadCorpusMap(filepath.Join(*dataset, "corpus.jsonl"))
		}
	}
	if err != nil {
		return commit(err)
	}
	defer src.Close()
	st, err := mining.ConvertPairs(ctx, src, corpus, w, *skipBad)
	fmt.Fprintf(os.Stderr, "%s: %d units, %d pairs written, %d duplicate pairs removed, %d bad skipped\n", src.Name(), st.Units, st.Written, st.DuplicatePairs, st.BadUnits)
	return commit(err)
}

// createOutput opens the output; commit closes it and reports the first error.
func createOutput(path string) (io.Writer, func(error) error, error) {
	if path == "-" {
		bw := bufio.NewWriter(os.Stdout)
		return bw, func(err error) error {
			if ferr := bw.Flush(); err == nil {
				err = ferr
			}
			return err
		}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, func(err error) error {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// mapCorpus is a BEIR corpus in memory, texts as the engine embeds them.
type mapCorpus map[string]string

func (m mapCorpus) Text(_ context.Context, id string) (string, bool, error) {
	t, ok := m[id]
	return t, ok, nil
}

func loadCorpusMap(path string) (mapCorpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open corpus: %w", err)
	}
	defer f.Close()
	m := mapCorpus{}
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
		m[d.ID] = engine.EmbedText(engine.Document(d))
		return nil
	})
	return m, err
}
