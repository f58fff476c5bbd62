package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/rerank"
)

func (a *app) searchCommand() *cobra.Command {
	var (
		dir, mode, rerankOf, reranker, instruction string
		k, depth, rerankDepth, ef                  int
		asJSON, explain                            bool
	)
	cmd := &cobra.Command{
		Use:   "search --index DIR [flags] QUERY...",
		Short: "search an anna directory (lexical, dense, hybrid, rerank)",
		Long: `Searches the anna directory for QUERY (the arguments joined by spaces; put
"--" before a query that starts with "-"). It opens the directory read-only.`,
		Example: `  annactl search --index my-index "nearest neighbour graphs"
  annactl search --index my-index --mode lexical -k 5 --json hnsw recall`,
		Args: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(strings.Join(args, " ")) == "" {
				return usageErrorf("no query given")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			m, err := parseMode("mode", mode)
			if err != nil {
				return err
			}
			opts := engine.SearchOptions{Mode: m, K: k, Depth: depth, RerankDepth: rerankDepth, EfSearch: ef, Prompt: engine.Prompt{Instruction: instruction}}
			if err := atLeast("k", k, 1); err != nil {
				return err
			}
			for name, v := range map[string]int{"depth": depth, "rerank-depth": rerankDepth, "ef": ef} {
				if err := atLeast(name, v, 0); err != nil {
					return err
				}
			}
			if depth != 0 && depth < k {
				return usageErrorf("--depth (%d) must be at least -k (%d)", depth, k)
			}
			if rerankOf != "" {
				if opts.RerankOf, err = parseMode("rerank-of", rerankOf); err != nil || opts.RerankOf == engine.ModeRerank {
					return usageErrorf("--rerank-of %q: want lexical, dense or hybrid", rerankOf)
				}
			}
			eopts := engine.Options{ReadOnly: true, Logf: a.logf}
			if reranker != "" {
				rr, err := rerank.Load(cmd.Context(), reranker, rerank.Options{})
				if err != nil {
					return err
				}
				defer rr.Close()
				eopts.Reranker = rr
			} else if m == engine.ModeRerank {
				return usageErrorf("--mode rerank needs --reranker DIR")
			}
			eng, err := engine.Open(cmd.Context(), dir, eopts)
			if err != nil {
				return err
			}
			defer eng.Close()
			res, err := eng.Search(cmd.Context(), strings.Join(args, " "), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printResultsJSON(res, explain)
			}
			return a.printResults(res, explain)
		},
	}
	f := cmd.Flags()
	indexFlag(cmd, &dir, "anna directory `DIR` (opened read-only)")
	f.StringVar(&mode, "mode", "hybrid", "lexical | dense | hybrid | rerank")
	f.IntVarP(&k, "k", "k", 10, "results to return")
	f.IntVar(&depth, "depth", 0, "candidates per list before fusion (0: max(100, k))")
	f.IntVar(&rerankDepth, "rerank-depth", 0, "candidates the reranker rescores (0: max(50, k))")
	f.StringVar(&rerankOf, "rerank-of", "", "the list --mode rerank rescores: lexical, dense or hybrid (default hybrid)")
	f.IntVar(&ef, "ef", 0, "HNSW search beam (0: the index's setting)")
	f.StringVar(&reranker, "reranker", "", "cross-encoder model directory `DIR` (enables --mode rerank)")
	f.StringVar(&instruction, "instruction", "", "task instruction for instruction-tuned models (query side)")
	f.BoolVar(&asJSON, "json", false, "print JSON lines instead of a table")
	f.BoolVar(&explain, "explain", false, "show each hit's rank and score in every list")
	return cmd
}

// jsonResult is one line of `search --json`.
type jsonResult struct {
	Rank    int               `json:"rank"`
	ID      string            `json:"id"`
	Score   float64           `json:"score"`
	Title   string            `json:"title,omitempty"`
	Text    string            `json:"text"`
	Meta    map[string]string `json:"meta,omitempty"`
	Explain []jsonContrib     `json:"explain,omitempty"`
}

type jsonContrib struct {
	List  string  `json:"list"`
	Rank  int     `json:"rank"`
	Score float64 `json:"score"`
}

func (a *app) printResultsJSON(res []engine.Result, explain bool) error {
	enc := json.NewEncoder(a.stdout)
	for i, r := range res {
		jr := jsonResult{Rank: i + 1, ID: r.ID, Score: r.Score, Title: r.Title, Text: r.Text, Meta: r.Meta}
		if explain {
			for _, c := range r.Explain {
				jr.Explain = append(jr.Explain, jsonContrib{List: c.List, Rank: c.Rank, Score: c.Score})
			}
		}
		if err := enc.Encode(jr); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) printResults(res []engine.Result, explain bool) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tSCORE\tID\tTITLE / TEXT")
	for i, r := range res {
		fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\n", i+1, r.Score, r.ID, snippet(r.Title, r.Text, 90))
		if explain {
			for _, c := range r.Explain {
				fmt.Fprintf(tw, "\t\t\t  %s: rank %d, score %.4f\n", c.List, c.Rank, c.Score)
			}
		}
	}
	return tw.Flush()
}

// snippet joins title and text on one line, cut to n runes.
func snippet(title, text string, n int) string {
	s := strings.Join(strings.Fields(strings.TrimSpace(title+" — "+text)), " ")
	if title == "" {
		s = strings.Join(strings.Fields(text), " ")
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
