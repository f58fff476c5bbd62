package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/lang"
	"github.com/anna-search/anna/model"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/clip"
	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// Mode selects the retrieval pipeline.
type Mode string

const (
	ModeLexical Mode = "lexical" // BM25 only
	ModeDense   Mode = "dense"   // HNSW over embeddings only
	ModeHybrid  Mode = "hybrid"  // BM25 and dense fused (DefaultFusion unless SearchOptions.Fusion or the index says otherwise)
	ModeRerank  Mode = "rerank"  // hybrid (or RerankOf), then the top candidates rescored by the cross-encoder
)

// Modes lists the modes in the order tools show them.
var Modes = []Mode{ModeLexical, ModeDense, ModeHybrid, ModeRerank}

// ParseMode accepts a mode's name (case-insensitive); "" is ModeHybrid.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(s)); m {
	case "":
		return ModeHybrid, nil
	case ModeLexical, ModeDense, ModeHybrid, ModeRerank:
		return m, nil
	}
	return "", optErr("Mode", clip.Quote(s), "must be lexical, dense, hybrid or rerank")
}

// SearchOptions configure one search. Zero values take the defaults;
// negative numbers are refused with an OptionError.
type SearchOptions struct {
	Mode  Mode // default ModeHybrid
	K     int  // results to return; default 10
	Depth int  // candidates taken from each list before fusion; default max(100, K), at least K
	// RerankDepth is how many candidates the cross-encoder rescores;
	// default max(50, K).
	RerankDepth int
	// RerankOf picks the candidate list ModeRerank rescores: ModeHybrid
	// (default), ModeLexical (the classic BM25 + cross-encoder setup) or
	// ModeDense.
	RerankOf Mode
	// RerankFusion makes the reranked top RerankDepth a list of its own,
	// fused (as Fusion says) with the retrieval lists it came from (lexical and
	// dense for hybrid candidates), as the ANNA pipeline of paper 003 does,
	// instead of replacing their order with the cross-encoder's.
	RerankFusion bool
	// EfSearch overrides the HNSW beam width for this search (0: the
	// index's).
	EfSearch int
	// Prompt is applied to the query on the dense side (instruction-tuned
	// models).
	Prompt Prompt
	// Fusion is how the lists are fused (hybrid, and the reranked list
	// with RerankFusion); "" is the index's own choice (see SetFusion),
	// DefaultFusion unless one was recorded (FusionRRF where RRFK is set).
	Fusion Fusion
	// RRFK is the RRF constant; default 60. Setting it with Fusion ""
	// fuses by RRF.
	RRFK int
	// Weights optionally weight the fused lists by name ("lexical",
	// "dense", and "rerank" with RerankFusion; others are refused); a
	// weight must be finite and positive. Absent lists weigh 1.
	Weights map[string]float64
	// Filter restricts the results to the documents whose Meta it matches
	// (the zero Filter: every document). Each list applies it before
	// ranking, so K results come back whenever K matching documents are
	// found. An invalid Filter (an empty key, In with no values) is an
	// OptionError.
	Filter Filter
	// Snippets attaches to each result the part of its text that matched
	// the query (Result.Snippet), of about SnippetSize bytes (default 200).
	Snippets    bool
	SnippetSize int
}

// Prompt instructs an embedding model how to read a query (documents never
// get one). With an Instruction the query becomes, with the model's
// template, "Instruct: {Instruction}\nQuery: {query}", after the few-shot
// Examples formatted the same way, each followed by "\nResponse: " and its
// response.
type Prompt struct {
	Instruction string
	Examples    []Example
}

// Example is one few-shot demonstration: a query and a relevant response.
type Example struct{ Query, Response string }

func (p Prompt) encoder() encoder.Prompt {
	out := encoder.Prompt{Instruction: p.Instruction}
	for _, ex := range p.Examples {
		out.Examples = append(out.Examples, encoder.Example{Query: ex.Query, Response: ex.Response})
	}
	return out
}

// Result is one hit. Explain lists the hit's rank and score in every list
// that contributed to it (lexical, dense, rerank), in pipeline order.
type Result struct {
	ID         string
	Score      float64 // the final list's score: BM25, cosine, fused (RRF, minmax, DBSF) or cross-encoder logit
	Title      string
	Text       string
	Meta       map[string]string
	MetaValues map[string]Value // the numbers and multi-valued keys (see Document)
	Language   string           // the document's language as given (Document.Language), "" when detected
	Explain    []Contribution
	Snippet    *Snippet // with SearchOptions.Snippets
	// Location says where in its file the result lies, for a document
	// read from a folder (its metadata names the file); nil otherwise.
	Location *Location
}

// Snippet is the part of a result's Text to show beside it, and the query's
// words in it. Offsets are bytes of Result.Text, on UTF-8 boundaries.
//
// The fragment comes from the list that ranked the result best: for BM25,
// the fragment holding the most distinct query terms (as BM25 reads them:
// stemmed, stop words dropped); for the dense list, the best-scoring
// passage of a document long enough to be split (see Chunking), where its
// query terms are highlighted the same way.
type Snippet struct {
	Text       string // Result.Text[Start:End]
	Start, End int
	Highlights []Span // the query's terms within [Start, End)
	// Source says where the fragment was found: "lexical" (around the
	// query's terms), "passage" (in the passage the dense list matched) or
	// "lead" (the text's beginning: no query term in the text).
	Source string
}

// Span is a byte range [Start, End) of a result's Text.
type Span struct{ Start, End int }

// Contribution explains one list's part in a result.
type Contribution struct {
	List  string  // "lexical", "dense" or "rerank"
	Rank  int     // 1-based position in that list
	Score float64 // the list's own score for the document
	// Fused is what the list added to the fused score: w/(k+rank) for RRF,
	// w times the normalised score for FusionMinMax and FusionDBSF. It is 0
	// where the list was not fused (a single list; the reranker's order
	// when it replaces the candidates', whose lists then keep what they
	// added to the fusion that chose them).
	Fused float64
}

// NamedFusion is the fusion o names: Fusion, else FusionRRF where RRFK is
// set (RRF's constant asks for RRF), else "" — the index's own choice,
// which Stats reports.
func (o SearchOptions) NamedFusion() Fusion {
	switch {
	case o.Fusion != "":
		return o.Fusion
	case o.RRFK != 0:
		return FusionRRF
	}
	return ""
}

// validate fills defaults and refuses values out of range.
func (o *SearchOptions) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"K", o.K}, {"Depth", o.Depth}, {"RerankDepth", o.RerankDepth}, {"EfSearch", o.EfSearch}, {"RRFK", o.RRFK}} {
		if f.v < 0 {
			return optErr("SearchOptions."+f.name, f.v, "must be 0 (the default) or positive")
		}
	}
	m, err := ParseMode(string(o.Mode))
	if err != nil {
		return optErr("SearchOptions.Mode", clip.Quote(string(o.Mode)), "must be lexical, dense, hybrid or rerank")
	}
	o.Mode = m
	if o.RerankOf != "" {
		if o.RerankOf, err = ParseMode(string(o.RerankOf)); err != nil || o.RerankOf == ModeRerank {
			return optErr("SearchOptions.RerankOf", clip.Quote(string(o.RerankOf)), "must be lexical, dense or hybrid")
		}
	}
	if o.SnippetSize < 0 {
		return optErr("SearchOptions.SnippetSize", o.SnippetSize, "must be 0 (the default) or positive")
	}
	if err := o.Filter.Validate(); err != nil {
		return optErr("SearchOptions.Filter", o.Filter, err.Error())
	}
	if o.Fusion != "" {
		f, err := ParseFusion(string(o.Fusion))
		if err != nil {
			return optErr("SearchOptions.Fusion", clip.Quote(string(o.Fusion)), "must be rrf, minmax, dbsf or \"\" (the index's choice)")
		}
		o.Fusion = f
	}
	for name, w := range o.Weights {
		if name != "lexical" && name != "dense" && name != "rerank" {
			return optErr("SearchOptions.Weights", clip.Quote(name), "names a list: lexical, dense or rerank")
		}
		if math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 {
			return optErr("SearchOptions.Weights["+name+"]", w, "must be finite and positive (Mode leaves a list out)")
		}
	}
	if o.K == 0 {
		o.K = 10
	}
	if o.Depth == 0 {
		o.Depth = max(100, o.K)
	} else if o.Depth < o.K {
		return optErr("SearchOptions.Depth", o.Depth, fmt.Sprintf("must be at least K (%d)", o.K))
	}
	if o.RerankDepth == 0 {
		o.RerankDepth = max(50, o.K)
	}
	return nil
}

// Search runs query through the pipeline chosen by opts.Mode. An empty
// query is refused with ErrEmptyQuery.
func (e *Engine) Search(ctx context.Context, query string, opts SearchOptions) (_ []Result, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if strings.TrimSpace(query) == "" {
		return nil, ErrEmptyQuery
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if e.via != nil && (opts.Mode != ModeRerank || e.opts.Reranker != nil) { // rerank without a Reranker: refused below
		res, err := e.via.search(ctx, e, query, opts)
		locate(res)
		return res, err
	}
	opts.Fusion = e.fusionFor(opts)
	if opts.Mode == ModeRerank && e.opts.Reranker == nil {
		return nil, hint.Wrap(optErr("SearchOptions.Mode", ModeRerank, "needs a reranker (Options.Reranker: rerank.Load of a cross-encoder model directory); "+
			"none ships with anna: train/recipe.Build trains one and installs it as $ANNA_HOME/models/anna-reranker-bge"), hint.Action{Kind: hint.BuildReranker})
	}
	base := opts
	if opts.Mode == ModeRerank && opts.RerankOf != "" && opts.RerankOf != ModeHybrid {
		base.Mode, base.K = opts.RerankOf, max(opts.K, opts.RerankDepth)
		base.Depth = max(base.Depth, base.K)
	}
	r, err := e.search(ctx, query, base)
	if err != nil {
		return nil, err
	}
	res, err := e.finish(ctx, query, r, opts)
	locate(res)
	return res, err
}

// retrieved is what search found: the retrieval lists, their fusion, and
// the best passage of each document the dense list returned (for
// snippets).
type retrieved struct {
	lists   []fusion.List
	fused   []fusion.Result
	passage map[string]int
}

// search retrieves and fuses (no reranking, no cut to K beyond the lists').
func (e *Engine) search(ctx context.Context, query string, opts SearchOptions) (retrieved, error) {
	var (
		lists   []fusion.List
		passage map[string]int
	)
	switch opts.Mode {
	case ModeLexical:
		l, err := e.lexicalList(ctx, query, opts.K, opts.Filter)
		if err != nil {
			return retrieved{}, err
		}
		lists = []fusion.List{l}
	case ModeDense:
		l, ps, err := e.denseList(ctx, query, opts.K, opts)
		if err != nil {
			return retrieved{}, err
		}
		lists, passage = []fusion.List{l}, ps
	default: // hybrid, and rerank of hybrid
		// The two retrievals are independent: run the lexical one while the
		// query is being encoded.
		type res struct {
			l   fusion.List
			err error
		}
		ch := make(chan res, 1)
		go func() {
			var l fusion.List
			err := safe.Call(func() (err error) {
				l, err = e.lexicalList(ctx, query, opts.Depth, opts.Filter)
				return err
			})
			ch <- res{l, err}
		}()
		dl, ps, derr := e.denseList(ctx, query, opts.Depth, opts)
		lr := <-ch
		if lr.err != nil {
			return retrieved{}, lr.err
		}
		if derr != nil {
			return retrieved{}, derr
		}
		if _, given := opts.Weights["lexical"]; !given {
			w, err := e.lexicalWeight(ctx, query)
			if err != nil {
				return retrieved{}, err
			}
			lr.l.Weight = w
		}
		if _, given := opts.Weights["dense"]; !given && (!e.modelKnowsIndex() || !e.modelKnowsQuery(query)) {
			dl.Weight = unknownLanguageWeight
		}
		lists, passage = []fusion.List{lr.l, dl}, ps
	}
	if len(lists) == 1 {
		// A single list keeps its own scores: RRF would only rename them.
		return retrieved{lists: lists, fused: single(lists[0]), passage: passage}, nil
	}
	return retrieved{lists: lists, fused: fuse(lists, opts), passage: passage}, nil
}

// fuse weights lists by opts.Weights (a list it does not name keeps its
// weight) and fuses them as opts.Fusion says.
func fuse(lists []fusion.List, opts SearchOptions) []fusion.Result {
	for i := range lists {
		if w, ok := opts.Weights[lists[i].Name]; ok {
			lists[i].Weight = w
		}
	}
	switch opts.Fusion {
	case FusionMinMax:
		return fusion.ScoreFusion(lists, fusion.MinMax)
	case FusionDBSF:
		return fusion.ScoreFusion(lists, fusion.DBSF)
	}
	return fusion.RRF(lists, opts.RRFK)
}

// finish reranks (in ModeRerank), cuts to K and attaches the documents.
func (e *Engine) finish(ctx context.Context, query string, r retrieved, opts SearchOptions) ([]Result, error) {
	fused := r.fused
	if opts.Mode == ModeRerank {
		var err error
		if fused, err = e.rerank(ctx, query, fused, opts.RerankDepth); err != nil {
			return nil, err
		}
		if opts.RerankFusion {
			rl := fusion.List{Name: "rerank", Hits: make([]fusion.Hit, 0, opts.RerankDepth)}
			for _, x := range fused[:min(len(fused), opts.RerankDepth)] {
				rl.Hits = append(rl.Hits, fusion.Hit{ID: x.ID, Score: x.Score})
			}
			fused = fuse(append(append([]fusion.List(nil), r.lists...), rl), opts)
		}
	}
	if len(fused) > opts.K {
		fused = fused[:opts.K]
	}
	out, err := e.hydrate(fused)
	if err != nil || !opts.Snippets {
		return out, err
	}
	if err := e.snippets(ctx, query, out, r.passage, opts.SnippetSize); err != nil {
		return nil, err
	}
	return out, nil
}

func single(l fusion.List) []fusion.Result {
	out := make([]fusion.Result, len(l.Hits))
	for i, h := range l.Hits {
		out[i] = fusion.Result{ID: h.ID, Score: h.Score, Contributions: []fusion.Contribution{{List: l.Name, Rank: i + 1, Score: h.Score}}}
	}
	return out
}

func (e *Engine) lexicalList(ctx context.Context, query string, k int, f Filter) (fusion.List, error) {
	hits, err := e.be.lexical(ctx, query, k, f)
	if err != nil {
		return fusion.List{}, err
	}
	return fusion.List{Name: "lexical", Hits: hits}, nil
}

// lexicalWeight is the BM25 list's weight in a hybrid search that gives
// none: full where the index knows at least half of the query's words
// (weighed by idf: lexical.Index.Coverage), less in proportion below, so
// that a query in a language the index does not hold (a Chinese question
// over English paragraphs), whose BM25 list ranks by a name or a number,
// does not drag the dense list down. Backends that cannot tell give 1.
func (e *Engine) lexicalWeight(ctx context.Context, query string) (float64, error) {
	cv, ok := e.be.(interface {
		coverage(ctx context.Context, query string) (float64, error)
	})
	if !ok || e.via != nil {
		return 1, nil
	}
	c, err := cv.coverage(ctx, query)
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	w := coverageWeight(c)
	if c < fullCoverage && e.crossLingual(query) {
		w = min(w, crossLingualWeight)
	}
	return w, nil
}

// fullCoverage is the coverage from which a query is taken to be in the
// index's language whatever the detector says: a long English query the
// trigrams read as another language (a few of CACM's) keeps BM25.
const fullCoverage = 0.8

// crossLingualWeight is the BM25 list's weight at most for a query surely
// in a language none of the index's documents is in: a Spanish question
// over English paragraphs shares enough words with them (names, "los",
// "el") to look covered, and its BM25 list (nDCG@10 0.317 on xquad-es-en)
// fused at full weight takes multilingual-e5-small's (0.926) down to 0.768.
const crossLingualWeight = 0.05

// crossLingual reports a query lang.GuessText is sure is in a language
// under 5 % of the index's documents are in (an index that never counted
// holds English).
func (e *Engine) crossLingual(query string) bool {
	g := lang.GuessText(query)
	if !g.Sure || g.Code == "" {
		return false
	}
	langs, ok := e.local().languages()
	if !ok {
		return false
	}
	if len(langs) == 0 {
		return g.Code != lang.English
	}
	var all uint64
	for _, n := range langs {
		all += n
	}
	return langs[g.Code]*20 < all // under 5 %: a few documents detected so (or written so) do not make it the index's
}

// coverageWeight maps a query's coverage to the BM25 list's weight.
func coverageWeight(c float64) float64 {
	return max(min(1, c/minCoverage), unknownLanguageWeight)
}

// minCoverage is the coverage from which the BM25 list has its full weight.
const minCoverage = 0.5

// unknownLanguageWeight is the dense list's weight in a hybrid search that
// gives none when the model was not trained on the language of most of the
// index's documents (modelKnowsIndex): all-MiniLM-L6-v2's list over German
// paragraphs (nDCG@10 0.69 against BM25's 0.93) fused by RRF at weight 1
// gives 0.857, at 0.3 0.909, at 0.05 0.934; over Spanish only 0 keeps
// BM25's 0.955 (docs/results/multilingual.md). So the list is kept at a
// weight that only orders what BM25 leaves tied or did not find (a
// fusion.List's 0 would mean 1), and K results still come back.
const unknownLanguageWeight = 1e-6

// modelKnowsIndex reports whether the model embeds in the languages of at
// least half of the index's documents (model.Manifest.KnowsLanguage over
// the BM25 index's counts): true for a model whose languages are unknown,
// for an empty index and where the backend cannot tell.
func (e *Engine) modelKnowsIndex() bool {
	l := e.local()
	if l == nil || l.lexStale != "" {
		return true
	}
	langs, ok := l.languages()
	if !ok {
		return true
	}
	man := e.modelManifest()
	if len(langs) == 0 { // an index before languages: English
		return man.KnowsLanguage(lang.English)
	}
	var known, all uint64
	for l, n := range langs {
		all += n
		if man.KnowsLanguage(l) {
			known += n
		}
	}
	return 2*known >= all
}

// modelKnowsQuery is false for a query in a script that settles its
// language (Chinese, Arabic, Devanagari, Cyrillic with Russian's letters...)
// when the model was not trained on that language: all-MiniLM-L6-v2's list
// for a Chinese question over English paragraphs is noise (nDCG@10 0.090
// on xquad-zh-en), where BM25 finds what its names and numbers match
// (0.136). A Latin-script query is left alone: the trigrams that tell its
// language are unsure on short questions, and an English model still
// reads the names a German question shares with English text.
func (e *Engine) modelKnowsQuery(query string) bool {
	g := lang.GuessText(query)
	if !g.Sure || g.Latin || g.Code == "" {
		return true
	}
	man := e.modelManifest()
	return man.KnowsLanguage(g.Code)
}

// modelManifest is the manifest of the model the engine embeds with: the
// encoder's, else one naming it (what model.Manifest.ModelLanguages reads).
func (e *Engine) modelManifest() *model.Manifest {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if m, ok := e.cur.enc.(interface{ Manifest() *model.Manifest }); ok && m.Manifest() != nil {
		return m.Manifest()
	}
	return &model.Manifest{Name: e.cur.model.Name}
}

// denseList also returns each hit's best passage.
func (e *Engine) denseList(ctx context.Context, query string, k int, opts SearchOptions) (fusion.List, map[string]int, error) {
	if err := e.ensureEncoder(ctx); err != nil { // the model, loaded on first use
		return fusion.List{}, nil, err
	}
	// One consistent (model, index) snapshot: during a Reindex a search
	// sees either the old pair or the new one, never a mix.
	e.mu.RLock()
	enc, search := e.cur.enc, e.be.denseSearch()
	e.mu.RUnlock()
	qv, err := enc.EmbedQueries(ctx, []string{query}, opts.Prompt.encoder())
	if err != nil {
		return fusion.List{}, nil, fmt.Errorf("engine: embedding the query: %w", err)
	}
	hits, passage, err := search(ctx, qv[0], k, opts)
	if err != nil {
		return fusion.List{}, nil, err
	}
	return fusion.List{Name: "dense", Hits: hits}, passage, nil
}

// rerank rescores the first depth results with the cross-encoder and sorts
// them by that score; the results past depth follow in their old order, so
// recall at larger cut-offs is kept.
func (e *Engine) rerank(ctx context.Context, query string, all []fusion.Result, depth int) ([]fusion.Result, error) {
	fused, tail := all, []fusion.Result(nil)
	if len(all) > depth {
		fused, tail = all[:depth], all[depth:]
	}
	ids := resultIDs(fused)
	docs, err := e.docsByID(ids)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(fused))
	for i, id := range ids {
		texts[i] = EmbedText(Document(docs[id]))
	}
	scores, err := e.opts.Reranker.Score(ctx, query, texts)
	if err != nil {
		return nil, fmt.Errorf("engine: reranking %d candidates: %w", len(texts), err)
	}
	if len(scores) != len(texts) {
		return nil, fmt.Errorf("engine: the reranker returned %d scores for %d candidates", len(scores), len(texts))
	}
	out := make([]fusion.Result, len(fused))
	copy(out, fused)
	for i := range out {
		out[i].Score = float64(scores[i])
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Score > out[b].Score })
	for i := range out {
		out[i].Contributions = append(append([]fusion.Contribution(nil), out[i].Contributions...),
			fusion.Contribution{List: "rerank", Rank: i + 1, Score: out[i].Score})
	}
	return append(out, tail...), nil
}

func resultIDs(rs []fusion.Result) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func (e *Engine) docsByID(ids []string) (map[string]storage.Doc, error) {
	if e.via != nil {
		return e.via.docs(ids)
	}
	docs, err := e.store.GetMany(ids)
	if err != nil {
		return nil, fmt.Errorf("engine: reading documents: %w", err)
	}
	m := make(map[string]storage.Doc, len(docs))
	for _, d := range docs {
		m[d.ID] = d
	}
	return m, nil
}

// hydrate attaches stored documents to fused results. A hit whose document
// is gone (deleted between the index read and now) is dropped.
func (e *Engine) hydrate(fused []fusion.Result) ([]Result, error) {
	docs, err := e.docsByID(resultIDs(fused))
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(fused))
	for _, r := range fused {
		d, ok := docs[r.ID]
		if !ok {
			continue
		}
		ex := make([]Contribution, len(r.Contributions))
		for i, c := range r.Contributions {
			ex[i] = Contribution{List: c.List, Rank: c.Rank, Score: c.Score, Fused: c.Fused}
		}
		out = append(out, Result{ID: r.ID, Score: r.Score, Title: d.Title, Text: d.Text, Meta: d.Meta, MetaValues: d.MetaValues, Language: d.Language, Explain: ex})
	}
	return out, nil
}
