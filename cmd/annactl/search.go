package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/rerank"
)

func init() {
	register(command{name: "search", summary: "search an anna directory (lexical, dense, hybrid, rerank)", run: runSearch})
}

func runSearch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	dir := fs.String("index", "", "anna directory")
	mode := fs.String("mode", "hybrid", "lexical | dense | hybrid | rerank")
	k := fs.Int("k", 10, "results")
	depth := fs.Int("depth", 0, "candidates per list before fusion (default max(100, k))")
	ef := fs.Int("ef", 0, "HNSW search beam (default: index setting)")
	reranker := fs.String("reranker", "", "cross-encoder model directory (enables --mode rerank)")
	instruction := fs.String("instruction", "", "task instruction for instruction-tuned models (query side)")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	explain := fs.Bool("explain", false, "show each hit's rank and score in every list")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: annactl search --index DIR [flags] QUERY...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	query := strings.Join(fs.Args(), " ")
	if *dir == "" || strings.TrimSpace(query) == "" {
		fs.Usage()
		return errUsage
	}
	m, err := engine.ParseMode(*mode)
	if err != nil {
		return err
	}
	opts := engine.Options{Logf: logf}
	if *reranker != "" {
		rr, err := rerank.Load(ctx, *reranker, rerank.Options{})
		if err != nil {
			return err
		}
		defer rr.Close()
		opts.Reranker = rr
	} else if m == engine.ModeRerank {
		return fmt.Errorf("--mode rerank needs --reranker MODEL_DIR")
	}
	eng, err := openExisting(ctx, *dir, opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	res, err := eng.Search(ctx, query, engine.SearchOptions{Mode: m, K: *k, Depth: *depth, EfSearch: *ef, Prompt: engine.Prompt{Instruction: *instruction}})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		for i, r := range res {
			if err := enc.Encode(map[string]any{"rank": i + 1, "id": r.ID, "score": r.Score, "title": r.Title, "text": r.Text, "explain": r.Explain}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tSCORE\tID\tTITLE / TEXT")
	for i, r := range res {
		fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\n", i+1, r.Score, r.ID, snippet(r.Title, r.Text, 90))
		if *explain {
			for _, c := range r.Explain {
				fmt.Fprintf(tw, "\t\t\t  %s: rank %d, score %.4f\n", c.List, c.Rank, c.Score)
			}
		}
	}
	return tw.Flush()
}

// openExisting opens an engine directory that must already exist, so a typo
// in --index does not silently create an empty one.
func openExisting(ctx context.Context, dir string, opts engine.Options) (*engine.Engine, error) {
	if _, err := os.Stat(dir + "/anna.db"); err != nil {
		return nil, fmt.Errorf("%s is not an anna directory (no anna.db): create it with `annactl index --index %s FILE`", dir, dir)
	}
	return engine.Open(ctx, dir, opts)
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
