package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/rerank"
)

// searchLong is search's help.
const searchLong = `Searches the anna directory for QUERY (the arguments joined by spaces; put
"--" before a query that starts with "-"), or for the whole of --query-file FILE
("-": stdin; a query too long for a command line). It opens the directory
read-only.

Filters restrict the results to documents whose metadata ("metadata" in the
input) match, before ranking: -k results come back whenever -k matching
documents are found. --where takes KEY=VALUE, KEY!=VALUE (the key absent
or no value equal), KEY^=PREFIX, or a range KEY>=VALUE, KEY>VALUE,
KEY<=VALUE, KEY<VALUE; spaces around KEY and VALUE are dropped. Repeated,
its conditions are all required, except that several KEY=VALUE on one key
accept any of the values. A key with several values (a JSON array) matches
when any value does (tags=a); a number compares as a number with a VALUE
that reads as one (year>=1960), a string byte-wise (date<2024-06).
--where-json takes the JSON filter language (or @FILE holding it):
  {"lang": "en", "year": 2024}        {"in": {"lang": ["en", "de"]}}
  {"prefix": {"path": "docs/"}}       {"gte": {"year": 1960}}  (gt, lt, lte)
  {"range": {"year": {"gte": 1960, "lt": 1970}}}
  {"or": [F, ...]}  {"and": [F, ...]}  {"not": F}
Both together are combined with "and". A filter naming a key that no
document has is searched anyway, with a warning on stderr.

Each hit shows the fragment of its text that matched (--snippets, on in the
table): around the query's terms as BM25 reads them, or the passage of a
long document that the dense list matched, the terms in bold on a terminal.
With --json, --snippets adds "snippet": {text, start, end, highlights,
source}, byte offsets into "text".`

// searchOptions are search's flags, and the search and engine options
// check makes of them.
type searchOptions struct {
	dir, mode, rerankOf, reranker, instruction, filterJSON string
	where                                                  []string
	k, depth, rerankDepth, ef, snippetSize                 int
	asJSON, explain, snippets, rerankFusion                bool
	be                                                     backendFlags
	fu                                                     fusionFlags
	queryFile                                              string

	search      engine.SearchOptions
	engine      engine.Options
	fusionGiven bool // --rerank-fusion given: not the reranker's measured use
}

func (a *app) searchCommand() *cobra.Command {
	var o searchOptions
	cmd := &cobra.Command{
		Use:   "search --index DIR [flags] (QUERY... | --query-file FILE)",
		Short: "search an anna directory (lexical, dense, hybrid, rerank)",
		Long:  searchLong,
		Example: `  annactl search --index my-index "nearest neighbour graphs"
  annactl search --index my-index --mode lexical -k 5 --json hnsw recall
  annactl search --index my-index --where lang=en --where 'year>=2020' "tides"
  annactl search --index my-index --where-json '{"or": [{"lang": "en"}, {"prefix": {"path": "docs/"}}]}' tides
  annactl search --index my-index --json --snippets "gravity of the moon"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("query-file") {
				if len(args) > 0 {
					return usageErrorf("the query is given twice: as arguments and in --query-file")
				}
				return nil
			}
			if strings.TrimSpace(strings.Join(args, " ")) == "" {
				return usageErrorf("no query given")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runSearch(cmd.Context(), o, args)
		},
	}
	o.register(cmd)
	return cmd
}

func (o *searchOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	indexFlag(cmd, &o.dir, "anna directory `DIR` (opened read-only)")
	f.StringVar(&o.mode, "mode", "hybrid", "lexical | dense | hybrid | rerank")
	f.IntVarP(&o.k, "k", "k", 10, "results to return")
	f.IntVar(&o.depth, "depth", 0, "candidates per list before fusion (0: max(100, k))")
	f.IntVar(&o.rerankDepth, "rerank-depth", 0, "candidates the reranker rescores (0: max(50, k))")
	f.BoolVar(&o.rerankFusion, "rerank-fusion", false, "fuse the reranked list with the retrieval lists (by --fusion; the ANNA pipeline) instead of replacing their order (default: the way the reranker was measured to help)")
	f.StringVar(&o.rerankOf, "rerank-of", "", "the list --mode rerank rescores: lexical, dense or hybrid (default hybrid)")
	f.IntVar(&o.ef, "ef", 0, "HNSW search beam (0: the index's setting)")
	o.fu.register(cmd)
	modelVar(f, &o.reranker, "reranker", "", "cross-encoder model `NAME|DIR` for --mode rerank (default: the installed reranker measured to help, if any)")
	f.StringVar(&o.queryFile, "query-file", "", "read the query from `FILE` (- for stdin) instead of the arguments: for a query too long for a command line")
	f.StringVar(&o.instruction, "instruction", "", "task instruction for instruction-tuned models (query side)")
	f.StringArrayVar(&o.where, "where", nil, "metadata condition `KEY=VALUE`, KEY!=VALUE, KEY^=PREFIX, KEY>=VALUE, KEY>VALUE, KEY<=VALUE or KEY<VALUE (repeatable)")
	f.StringVar(&o.filterJSON, "where-json", "", "metadata filter in JSON, or @FILE holding it")
	f.BoolVar(&o.snippets, "snippets", false, "show the fragment of each hit that matched (default: on in the table, off with --json)")
	f.IntVar(&o.snippetSize, "snippet-size", 0, "snippet length in bytes (0: 200, or the table's width)")
	f.BoolVar(&o.asJSON, "json", false, "print JSON lines instead of a table")
	f.BoolVar(&o.explain, "explain", false, "show each hit's rank and score in every list, and what each added to the fused score")
	o.be.register(cmd)
}

// check validates the flags and makes the search and engine options.
func (o *searchOptions) check(cmd *cobra.Command) error {
	if err := requireFlags(cmd, "index"); err != nil {
		return err
	}
	m, err := parseMode("mode", o.mode)
	if err != nil {
		return err
	}
	opts := engine.SearchOptions{Mode: m, K: o.k, Depth: o.depth, RerankDepth: o.rerankDepth, RerankFusion: o.rerankFusion, EfSearch: o.ef, Prompt: engine.Prompt{Instruction: o.instruction}}
	if err := o.fu.apply(&opts); err != nil {
		return err
	}
	if opts.Filter, err = parseWhere(o.where, o.filterJSON); err != nil {
		return err
	}
	if !cmd.Flags().Changed("snippets") {
		o.snippets = !o.asJSON
	}
	opts.Snippets, opts.SnippetSize = o.snippets, o.snippetSize
	if !o.asJSON && o.snippetSize == 0 {
		opts.SnippetSize = tableSnippet
	}
	if err := atLeast("snippet-size", o.snippetSize, 0); err != nil {
		return err
	}
	if err := atLeast("k", o.k, 1); err != nil {
		return err
	}
	for name, v := range map[string]int{"depth": o.depth, "rerank-depth": o.rerankDepth, "ef": o.ef} {
		if err := atLeast(name, v, 0); err != nil {
			return err
		}
	}
	if o.depth != 0 && o.depth < o.k {
		return usageErrorf("--depth (%d) must be at least -k (%d)", o.depth, o.k)
	}
	if o.rerankOf != "" {
		if opts.RerankOf, err = parseMode("rerank-of", o.rerankOf); err != nil || opts.RerankOf == engine.ModeRerank {
			return usageErrorf("--rerank-of %q: want lexical, dense or hybrid", o.rerankOf)
		}
	}
	o.search, o.engine = opts, engine.Options{ReadOnly: true}
	o.fusionGiven = cmd.Flags().Changed("rerank-fusion")
	return o.be.apply(cmd, &o.engine)
}

// runSearch searches o.dir for the query (args, or --query-file) and
// prints the results on a's stdout.
func (a *app) runSearch(ctx context.Context, o searchOptions, args []string) error {
	opts, eopts := o.search, o.engine
	eopts.Logf = a.logf
	rr, err := a.searchReranker(ctx, o)
	if err != nil {
		return err
	}
	if rr != nil {
		// A reranker is used the way it was measured to help.
		if h, f := rr.Manifest().Helps(); h && !o.fusionGiven {
			opts.RerankFusion = f
		}
		defer rr.Close()
		eopts.Reranker = rr
	}
	query, err := a.searchQuery(args, o.queryFile)
	if err != nil {
		return err
	}
	eng, err := engine.Open(ctx, o.dir, eopts)
	if err != nil {
		return err
	}
	defer eng.Close()
	res, err := eng.Search(ctx, query, opts)
	if err != nil {
		return err
	}
	if unknown, err := eng.UnknownKeys(opts.Filter); err == nil && len(unknown) > 0 {
		a.logf("search: warning: no document has the metadata key %s: the filter %s cannot match on it", quoteAll(unknown), opts.Filter)
	}
	if m := opts.Mode; o.explain && opts.Fusion == "" && m != engine.ModeLexical && m != engine.ModeDense {
		if st, err := eng.Stats(); err == nil && st.FusionChoice.Active(st.Model.Fingerprint) {
			a.logf("search: fused by %s, the index's choice (%s)", st.Fusion, st.FusionChoice.Why)
		}
	}
	if o.asJSON {
		return a.printResultsJSON(res, o.explain)
	}
	return a.printResults(res, o.explain, isTerminal(a.stdout) && os.Getenv("NO_COLOR") == "")
}

// searchReranker loads --reranker, or for --mode rerank without one the
// installed reranker measured to help (an error saying why when none is);
// nil when the search reranks nothing.
func (a *app) searchReranker(ctx context.Context, o searchOptions) (*rerank.Model, error) {
	reranker := o.reranker
	if reranker == "" && o.search.Mode == engine.ModeRerank {
		// Unnamed, a reranker is used only where it was measured to help.
		dir, others, err := installed.HelpfulReranker(home.ModelsDir(), false)
		if err != nil {
			return nil, err
		}
		if dir == "" {
			why := "no reranker is installed under " + home.ModelsDir() + " (" + buildHint + ")"
			if len(others) > 0 {
				why = "no installed reranker is measured to help: " + strings.Join(others, "; ")
			}
			return nil, usageErrorf("--mode rerank without --reranker: %s; name one with --reranker NAME|DIR to use it anyway", why)
		}
		a.logf("search: reranking with %s (measured to help: annactl models list)", dir)
		reranker = dir
	}
	if reranker == "" {
		return nil, nil
	}
	dir, err := modelDir(reranker)
	if err != nil {
		return nil, err
	}
	return rerank.Load(ctx, dir, rerank.Options{})
}

// whereOps are the operators of --where, each before any that is a prefix
// of it.
var whereOps = []string{"!=", "^=", ">=", "<=", ">", "<", "="}

// splitWhere cuts a --where condition at its first operator into the key
// before it and the value after it, spaces around both dropped.
func splitWhere(w string) (key, op, value string, ok bool) {
	for i := range len(w) {
		for _, o := range whereOps {
			if strings.HasPrefix(w[i:], o) {
				return strings.TrimSpace(w[:i]), o, strings.TrimSpace(w[i+len(o):]), true
			}
		}
	}
	return "", "", "", false
}

// parseWhere builds the search filter from --where conditions and a
// --where-json JSON (or @FILE), all of them required.
func parseWhere(where []string, filterJSON string) (engine.Filter, error) {
	var all []engine.Filter
	eq := map[string][]string{} // KEY=VALUE conditions by key: any of the values
	var keys []string
	for _, w := range where {
		k, op, v, ok := splitWhere(w)
		if !ok {
			return engine.Filter{}, usageErrorf("--where %q: want KEY=VALUE, KEY!=VALUE, KEY^=PREFIX, KEY>=VALUE, KEY>VALUE, KEY<=VALUE or KEY<VALUE", w)
		}
		if k == "" {
			return engine.Filter{}, usageErrorf("--where %q: empty key", w)
		}
		var f engine.Filter
		switch op {
		case "!=":
			f = engine.Not(engine.Eq(k, v))
		case "^=":
			f = engine.Prefix(k, v)
		case ">=":
			f = engine.Gte(k, v)
		case ">":
			f = engine.Gt(k, v)
		case "<=":
			f = engine.Lte(k, v)
		case "<":
			f = engine.Lt(k, v)
		default: // "="
			if _, seen := eq[k]; !seen {
				keys = append(keys, k)
			}
			eq[k] = append(eq[k], v)
			continue
		}
		if err := f.Validate(); err != nil {
			return engine.Filter{}, usageErrorf("--where %q: %v", w, err)
		}
		all = append(all, f)
	}
	for _, k := range keys {
		f := engine.Eq(k, eq[k][0])
		if vs := eq[k]; len(vs) > 1 {
			f = engine.In(k, vs...)
		}
		if err := f.Validate(); err != nil {
			return engine.Filter{}, usageErrorf("--where %s=...: %v", k, err)
		}
		all = append(all, f)
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
