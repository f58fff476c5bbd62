package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/rerank"
)

func (a *app) searchCommand() *cobra.Command {
	var (
		dir, mode, rerankOf, reranker, instruction, filterJSON string
		where                                                  []string
		k, depth, rerankDepth, ef, snippetSize                 int
		asJSON, explain, snippets, rerankFusion                bool
		be                                                     backendFlags
		fu                                                     fusionFlags
	)
	cmd := &cobra.Command{
		Use:   "search --index DIR [flags] QUERY...",
		Short: "search an anna directory (lexical, dense, hybrid, rerank)",
		Long: `Searches the anna directory for QUERY (the arguments joined by spaces; put
"--" before a query that starts with "-"). It opens the directory read-only.

Filters restrict the results to documents whose metadata ("meta" in the
input) match, before ranking: -k results come back whenever -k matching
documents are found. --where takes KEY=VALUE, KEY!=VALUE (the key absent
or another value) or KEY^=PREFIX; repeated, its conditions are all required,
except that several KEY=VALUE on one key accept any of the values.
--where-json takes the JSON filter language (or @FILE holding it):
  {"lang": "en", "year": "2024"}      {"in": {"lang": ["en", "de"]}}
  {"prefix": {"path": "docs/"}}       {"or": [F, ...]}  {"and": [F, ...]}  {"not": F}
Both together are combined with "and".

Each hit shows the fragment of its text that matched (--snippets, on in the
table): around the query's terms as BM25 reads them, or the passage of a
long document that the dense list matched, the terms in bold on a terminal.
With --json, --snippets adds "snippet": {text, start, end, highlights,
source}, byte offsets into "text".`,
		Example: `  annactl search --index my-index "nearest neighbour graphs"
  annactl search --index my-index --mode lexical -k 5 --json hnsw recall
  annactl search --index my-index --where lang=en --where year=2024 "tides"
  annactl search --index my-index --where-json '{"or": [{"lang": "en"}, {"prefix": {"path": "docs/"}}]}' tides
  annactl search --index my-index --json --snippets "gravity of the moon"`,
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
			opts := engine.SearchOptions{Mode: m, K: k, Depth: depth, RerankDepth: rerankDepth, RerankFusion: rerankFusion, EfSearch: ef, Prompt: engine.Prompt{Instruction: instruction}}
			if err := fu.apply(&opts); err != nil {
				return err
			}
			if opts.Filter, err = parseWhere(where, filterJSON); err != nil {
				return err
			}
			if !cmd.Flags().Changed("snippets") {
				snippets = !asJSON
			}
			opts.Snippets, opts.SnippetSize = snippets, snippetSize
			if !asJSON && snippetSize == 0 {
				opts.SnippetSize = tableSnippet
			}
			if err := atLeast("snippet-size", snippetSize, 0); err != nil {
				return err
			}
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
			if err := be.apply(cmd, &eopts); err != nil {
				return err
			}
			if reranker == "" && m == engine.ModeRerank {
				// Unnamed, a reranker is used only where it was measured to help.
				dir, others, err := helpfulReranker(false)
				if err != nil {
					return err
				}
				if dir == "" {
					why := "no reranker is installed under " + home.ModelsDir() + " (make reranker trains and installs one)"
					if len(others) > 0 {
						why = "no installed reranker is measured to help: " + strings.Join(others, "; ")
					}
					return usageErrorf("--mode rerank without --reranker: %s; name one with --reranker NAME|DIR to use it anyway", why)
				}
				a.logf("search: reranking with %s (measured to help: annactl models list)", dir)
				reranker = dir
			}
			if reranker != "" {
				rr, err := rerank.Load(cmd.Context(), reranker, rerank.Options{})
				if err != nil {
					return err
				}
				// A reranker is used the way it was measured to help.
				if h, f := rr.Manifest().Helps(); h && !cmd.Flags().Changed("rerank-fusion") {
					opts.RerankFusion = f
				}
				defer rr.Close()
				eopts.Reranker = rr
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
			if explain && opts.Fusion == "" && m != engine.ModeLexical && m != engine.ModeDense {
				if st, err := eng.Stats(); err == nil && st.Fusion != engine.FusionRRF {
					a.logf("search: fused by %s, the index's choice (%s)", st.Fusion, st.FusionChoice.Why)
				}
			}
			if asJSON {
				return a.printResultsJSON(res, explain)
			}
			return a.printResults(res, explain, isTerminal(a.stdout) && os.Getenv("NO_COLOR") == "")
		},
	}
	f := cmd.Flags()
	indexFlag(cmd, &dir, "anna directory `DIR` (opened read-only)")
	f.StringVar(&mode, "mode", "hybrid", "lexical | dense | hybrid | rerank")
	f.IntVarP(&k, "k", "k", 10, "results to return")
	f.IntVar(&depth, "depth", 0, "candidates per list before fusion (0: max(100, k))")
	f.IntVar(&rerankDepth, "rerank-depth", 0, "candidates the reranker rescores (0: max(50, k))")
	f.BoolVar(&rerankFusion, "rerank-fusion", false, "fuse the reranked list with the retrieval lists (by --fusion; the ANNA pipeline) instead of replacing their order (default: the way the reranker was measured to help)")
	f.StringVar(&rerankOf, "rerank-of", "", "the list --mode rerank rescores: lexical, dense or hybrid (default hybrid)")
	f.IntVar(&ef, "ef", 0, "HNSW search beam (0: the index's setting)")
	fu.register(cmd)
	modelVar(f, &reranker, "reranker", "", "cross-encoder model `NAME|DIR` for --mode rerank (default: the installed reranker measured to help, if any)")
	f.StringVar(&instruction, "instruction", "", "task instruction for instruction-tuned models (query side)")
	f.StringArrayVar(&where, "where", nil, "metadata condition `KEY=VALUE`, KEY!=VALUE or KEY^=PREFIX (repeatable)")
	f.StringVar(&filterJSON, "where-json", "", "metadata filter in JSON, or @FILE holding it")
	f.BoolVar(&snippets, "snippets", false, "show the fragment of each hit that matched (default: on in the table, off with --json)")
	f.IntVar(&snippetSize, "snippet-size", 0, "snippet length in bytes (0: 200, or the table's width)")
	f.BoolVar(&asJSON, "json", false, "print JSON lines instead of a table")
	f.BoolVar(&explain, "explain", false, "show each hit's rank and score in every list, and what each added to the fused score")
	be.register(cmd)
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
	Snippet *jsonSnippet      `json:"snippet,omitempty"`
}

// jsonSnippet is a hit's snippet; offsets are bytes of the hit's text.
type jsonSnippet struct {
	Text       string   `json:"text"`
	Start      int      `json:"start"`
	End        int      `json:"end"`
	Highlights [][2]int `json:"highlights"`
	Source     string   `json:"source"`
}

type jsonContrib struct {
	List  string  `json:"list"`
	Rank  int     `json:"rank"`
	Score float64 `json:"score"`
	Fused float64 `json:"fused,omitempty"` // what the list added to the fused score (absent: nothing, or no fusion)
}

func (a *app) printResultsJSON(res []engine.Result, explain bool) error {
	enc := json.NewEncoder(a.stdout)
	for i, r := range res {
		jr := jsonResult{Rank: i + 1, ID: r.ID, Score: r.Score, Title: r.Title, Text: r.Text, Meta: r.Meta}
		if explain {
			for _, c := range r.Explain {
				jr.Explain = append(jr.Explain, jsonContrib{List: c.List, Rank: c.Rank, Score: c.Score, Fused: c.Fused})
			}
		}
		if s := r.Snippet; s != nil {
			jr.Snippet = &jsonSnippet{Text: s.Text, Start: s.Start, End: s.End, Highlights: [][2]int{}, Source: s.Source}
			for _, h := range s.Highlights {
				jr.Snippet.Highlights = append(jr.Snippet.Highlights, [2]int{h.Start, h.End})
			}
		}
		if err := enc.Encode(jr); err != nil {
			return err
		}
	}
	return nil
}

// tableSnippet is the snippet length the table asks for, in bytes.
const tableSnippet = 120

func (a *app) printResults(res []engine.Result, explain, color bool) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tSCORE\tID\tTITLE / TEXT")
	for i, r := range res {
		line := oneLine(r.Title, r.Text, 90)
		if r.Snippet != nil {
			line = snippetLine(r, color)
		}
		fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\n", i+1, r.Score, r.ID, line)
		if explain {
			for _, c := range r.Explain {
				fmt.Fprintf(tw, "\t\t\t  %s: rank %d, score %.4f", c.List, c.Rank, c.Score)
				if c.Fused != 0 {
					fmt.Fprintf(tw, ", adds %.4g", c.Fused)
				}
				fmt.Fprintln(tw)
			}
		}
	}
	return tw.Flush()
}

// oneLine joins title and text on one line, cut to n runes.
func oneLine(title, text string, n int) string {
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

// snippetLine is a hit's title and snippet on one line, "…" where the
// text goes on, the query's terms in bold when color is set.
func snippetLine(r engine.Result, color bool) string {
	s := r.Snippet
	var b strings.Builder
	if r.Title != "" {
		b.WriteString(r.Title + " — ")
	}
	if s.Start > 0 {
		b.WriteString("…")
	}
	at := s.Start
	for _, h := range s.Highlights {
		b.WriteString(r.Text[at:h.Start])
		if color {
			b.WriteString("\x1b[1m" + r.Text[h.Start:h.End] + "\x1b[0m")
		} else {
			b.WriteString(r.Text[h.Start:h.End])
		}
		at = h.End
	}
	b.WriteString(r.Text[at:s.End])
	if s.End < len(r.Text) {
		b.WriteString("…")
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// parseWhere builds the search filter from --where conditions and a
// --where-json JSON (or @FILE), all of them required.
func parseWhere(where []string, filterJSON string) (engine.Filter, error) {
	var all []engine.Filter
	eq := map[string][]string{} // KEY=VALUE conditions by key: any of the values
	var keys []string
	for _, w := range where {
		var f engine.Filter
		switch {
		case strings.Contains(w, "!="):
			k, v, _ := strings.Cut(w, "!=")
			f = engine.Not(engine.Eq(k, v))
		case strings.Contains(w, "^="):
			k, v, _ := strings.Cut(w, "^=")
			f = engine.Prefix(k, v)
		case strings.Contains(w, "="):
			k, v, _ := strings.Cut(w, "=")
			if k == "" {
				return engine.Filter{}, usageErrorf("--where %q: empty key", w)
			}
			if _, seen := eq[k]; !seen {
				keys = append(keys, k)
			}
			eq[k] = append(eq[k], v)
			continue
		default:
			return engine.Filter{}, usageErrorf("--where %q: want KEY=VALUE, KEY!=VALUE or KEY^=PREFIX", w)
		}
		if err := f.Validate(); err != nil {
			return engine.Filter{}, usageErrorf("--where %q: %v", w, err)
		}
		all = append(all, f)
	}
	for _, k := range keys {
		if vs := eq[k]; len(vs) == 1 {
			all = append(all, engine.Eq(k, vs[0]))
		} else {
			all = append(all, engine.In(k, vs...))
		}
	}
	if filterJSON != "" {
		src, data := "--where-json", []byte(filterJSON)
		if path, ok := strings.CutPrefix(filterJSON, "@"); ok {
			var err error
			if data, err = os.ReadFile(path); err != nil {
				return engine.Filter{}, fmt.Errorf("--where-json: %w", err)
			}
			src = path
		}
		f, err := engine.ParseFilter(data)
		if err != nil {
			return engine.Filter{}, usageErrorf("%s: %v", src, err)
		}
		if err := f.Validate(); err != nil {
			return engine.Filter{}, usageErrorf("%s: %v", src, err)
		}
		all = append(all, f)
	}
	return engine.And(all...), nil
}
