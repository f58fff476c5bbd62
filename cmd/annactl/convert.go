package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/mining"
	"github.com/spf13/cobra"
)

type convertFlags struct {
	input, dataset, split, nli, output, instruction, nliFormat string
	posScore, negScore                                         float64
	skipBad                                                    bool
}

func (a *app) convertCommand() *cobra.Command {
	var fl convertFlags
	cmd := &cobra.Command{
		Use:   "convert (--input PAIRS.jsonl | --dataset BEIR_DIR | --nli FILE) --output FILE",
		Short: "prepare training pairs: one per (query, positive), deduplicated; NLI → similarity data",
		Long: `Pairs: one example per (query, positive) when a query has several positives,
duplicate (query, positive) pairs removed. NLI: entailment → positive (--pos-score),
contradiction → negative (--neg-score), neutral dropped, duplicate pairs removed.
The output is written whole or not at all (--output - writes to stdout as it goes).`,
		Example: "  annactl convert --nli ../shared/datasets/snli/dev.jsonl --output nli-pairs.jsonl",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "output"); err != nil {
				return err
			}
			given := 0
			for _, s := range []string{fl.input, fl.dataset, fl.nli} {
				if s != "" {
					given++
				}
			}
			if given != 1 {
				return usageErrorf("give exactly one of --input, --dataset, --nli (got %d)", given)
			}
			if err := oneOf("format", fl.nliFormat, "pairs", "flag"); err != nil {
				return err
			}
			if fl.output == "-" {
				bw := bufio.NewWriter(a.stdout)
				err := a.convert(cmd.Context(), bw, fl)
				if ferr := bw.Flush(); err == nil {
					err = ferr
				}
				return err
			}
			return atomicfile.Write(fl.output, func(w io.Writer) error { return a.convert(cmd.Context(), w, fl) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.input, "input", "", `JSON lines {"query", "pos": [...] | "pos_ids": [...], "prompt"}`)
	f.StringVar(&fl.dataset, "dataset", "", "BEIR folder (qrels split + corpus) instead of --input")
	f.StringVar(&fl.split, "split", "train", "qrels split of --dataset")
	f.StringVar(&fl.nli, "nli", "", "NLI JSON lines (premise/hypothesis or sentence1/sentence2, label) to turn into similarity data")
	f.StringVar(&fl.output, "output", "", "output `FILE` (- for stdout)")
	f.StringVar(&fl.instruction, "instruction", "", `default "prompt" for pairs without one`)
	f.StringVar(&fl.nliFormat, "format", "pairs", `NLI output: pairs ({"sentence1", "sentence2", "score"}) | flag (grouped by premise)`)
	f.Float64Var(&fl.posScore, "pos-score", 1, "score given to entailment pairs")
	f.Float64Var(&fl.negScore, "neg-score", 0, "score given to contradiction pairs")
	f.BoolVar(&fl.skipBad, "skip-bad", false, "skip bad lines (counted) instead of stopping")
	return cmd
}

// convert writes the converted data to w and, on success, its summary.
func (a *app) convert(ctx context.Context, w io.Writer, fl convertFlags) error {
	if fl.nli != "" {
		f, err := os.Open(fl.nli)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := mining.ConvertNLI(ctx, f, fl.nli, w, mining.NLIOptions{PosScore: fl.posScore, NegScore: fl.negScore, Format: fl.nliFormat, SkipBad: fl.skipBad})
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "%s: %d lines: %d entailment, %d contradiction kept; %d neutral dropped, %d duplicates (%d with conflicting labels), %d bad; %d lines written\n",
			fl.nli, st.Lines, st.Entailment, st.Contradiction, st.NeutralDropped, st.Duplicates, st.Conflicts, st.Bad, st.Written)
		return nil
	}
	defaults := mining.PromptDefaults{Instruction: fl.instruction}
	var src mining.Source
	var corpus mining.Corpus
	var err error
	if fl.input != "" {
		src, err = mining.OpenPairs(ctx, fl.input, defaults)
	} else {
		src, err = mining.OpenBEIR(ctx, fl.dataset, fl.split, defaults)
		if err == nil {
			corpus, err = loadCorpusMap(filepath.Join(fl.dataset, "corpus.jsonl"))
		}
	}
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := mining.ConvertPairs(ctx, src, corpus, w, fl.skipBad)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "%s: %d units, %d pairs written, %d duplicate pairs removed, %d bad skipped\n", src.Name(), st.Units, st.Written, st.DuplicatePairs, st.BadUnits)
	return nil
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
