// Package lexical is anna's BM25 index. It is derived from storage and can be
// rebuilt from it at any time; it records the storage seq it has applied so
// the engine knows where to resume.
//
// Bleve (scorch) holds the inverted index: postings with term frequencies
// and field-length norms. Each document is analysed for its language
// (package lang: Bleve's language analyzers, CJK and other bigrams): the one
// its storage.Doc names, else Options.Language, else the one lang.Detect
// finds in its title and text, else English (Bleve's "en": unicode
// tokenizer, possessive 's stripping, lower case, English stop words, Porter
// stemmer). The index counts its documents per language (in its field
// statistics) and stores each document's beside its field lengths. Each
// language's terms are kept apart (termPrefix: English's as they are, every
// other's behind its code), and a query is analysed by the analyzer of every
// language the index holds, each language's terms scored with that
// language's document count as BM25's N (queryTerms): so one index may hold
// many languages, each scored as though it were alone but for the average
// field lengths, which stay the whole index's, and a few documents of a
// language that is rare in the index (or detected wrongly) cannot draw the
// other languages' queries through words their analyzer keeps and the
// majority's drops (stop words). An index made
// before languages were recorded holds English only: it opens as it is and
// keeps its analysis; the documents added later are analysed for their own
// language. Scoring is done here, from those postings, with
// textbook BM25 (k1=1.2, b=0.75, Lucene's idf
// ln(1+(N-df+0.5)/(df+0.5))), not by Bleve's own "bm25" scoring model: Bleve
// 2.6 scores sqrt(tf) instead of tf, multiplies in idf a second time through
// its query norm, applies a coord factor, and takes the average field length
// as ceil(distinct terms / docs) rather than tokens / docs. On SciFact test
// Bleve's own scoring reaches nDCG@10 0.631, this package 0.690 (BEIR
// publishes 0.665; TestSciFactBM25 logs both). The mapping still
// names "bm25" and "en", so Bleve's own queries on the index agree as far as
// Bleve goes.
//
// Fields: title and text are indexed as separate fields and scored like
// Elasticsearch's multi_match best_fields query with tie_breaker 0.5, the
// BM25 baseline BEIR publishes: score = max(title, text) + 0.5 * the other.
// Title is not boosted: on SciFact a title boost of 2 drops nDCG@10 to 0.633,
// summing the two fields gives 0.668 and the text field alone 0.672
// (TestSciFactBM25 logs these), so best_fields without boost it is.
//
// Search reads the scorch segments' postings directly, merges them document
// at a time and prunes exactly with MaxScore (score.go): over 100,000
// SciFact variants it answers SciFact's queries 4x faster than Bleve's own
// search, over a million 6x on one goroutine (BenchmarkLexicalSearch100k).
// A search over at least 2×MinParallelDocs documents spreads its segments
// over Options.SearchWorkers goroutines (GOMAXPROCS by default) that share
// one top-k and so one pruning threshold; the hits are the same as on one
// (TestScoresMatchBruteForce runs both), and over a million documents on 2
// cores the search takes 0.56 times as long.
//
// MaxScore's bounds are per block of 4,096 documents where they can be
// (blockmax.go): the Pareto frontier of each block's (tf, length) pairs,
// computed from a segment's postings of a term by a goroutine of the open
// Index the first time a search reads the term, and kept in memory only
// (Options.BlockMaxBytes, 32 MiB by default; nothing is written, so a crash
// loses nothing). A search never waits for them: until they are there it
// uses the whole-index bounds. Close stops that goroutine. Over a million
// documents grouped by subject they make a search 1.37-1.39 times faster; where
// every block holds a document as strong as any, they change nothing.
//
// Postings are read through anna's copy of zap v17 (internal/third_party/zapx,
// zapx v17.2.3 with its iterator's Advance patched: PATCHES.md there),
// which this package registers at init as scorch's segment plugin "zap"
// version 17 in place of Bleve's own. Bleve's plugin registry is
// process-wide, so every scorch index in a program that links this package
// reads and writes through the copy; the on-disk format is the same, so
// an index written by either opens with the other.
//
// BM25 needs each field's average length, which Bleve does not keep, so
// Index and Delete maintain the total token count of each field in an
// internal key, updated in the same batch as the content, and each document
// carries its field lengths in a stored field so an upsert or delete can
// subtract them.
//
// Metadata filters (SearchFilter, CountMatching, ForEachMatching; the
// language is package filter's). Each document's Meta and MetaValues are
// indexed in the field _meta, not stored, without term vectors, not in
// _all: one term per string value, key + filter.Separator (NUL) + value,
// the exact bytes, no analysis (a list posts each element), and one per
// number, NUL + key + NUL + filter.EncodeNumber(x), whose byte order is
// numeric order. Pairs whose key holds NUL are not indexed: no valid filter can
// name them, and their term would read as another key's. Bleve keeps the
// field's postings like any other field's, so an upsert that changes Meta
// moves the document between postings lists and a delete removes it.
//
// A filter is evaluated per scorch segment by filter.Eval over that
// segment's _meta postings, into a roaring bitmap of segment-local document
// numbers less the deleted ones (filter.go): Eq and In take the postings
// of one term each (zap's own postings bitmap, neither copied nor walked;
// a value that reads as a number adds its number term); Prefix and the
// ranges union the postings of the terms in a dictionary range (Prefix:
// between key NUL prefix and the least key above every key with that
// prefix), which the term dictionary (an FST) lists by a range iterator
// without looking at any other term;
// Not subtracts from the segment's live documents. No document's metadata
// is read. SearchFilter copies each segment's bitmap into a plain bitset
// (docSet) and, merging the terms' postings, steps over the documents
// outside it, so a document the filter rejects is never scored nor
// collected, and the terms read by skipping are read only at allowed
// documents. (Handing zap the complement of the bitmap as the
// postings' exception list, the way deleted documents are skipped, was
// measured slower: zap then computes an AndNot with it for every term in
// every segment, and over 20,000 documents a filter keeping half of them
// made the search 1.7 times slower than none, where this way it is 0.9
// times; BenchmarkLexicalSearchFilter100k.) idf, the average field lengths and the
// MaxScore bounds stay the whole index's: a document scores the same with
// or without a filter, and the pruning stays exact (scoreFields). The zero
// Filter takes Search's path unchanged. Indexes of format 1, without
// _meta, are refused by Open (and rebuilt by the engine).
//
// A nil context.Context given to a function of this package is
// context.Background(), and a panic on a goroutine it starts comes back
// as the call's error (internal/parallel).
package lexical

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/parallel"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
	"github.com/anna-search/anna/lang"
)

// BM25 parameters (Lucene/Elasticsearch defaults).
const (
	K1 = 1.2
	B  = 0.75
	// TieBreaker weighs the non-best field, as in Elasticsearch's
	// multi_match best_fields.
	TieBreaker = 0.5
)

const (
	fieldTitle = "title"
	fieldText  = "text"
	fieldLens  = "_lens" // stored only: "titleLen textLen lang" (no lang: English)
	fieldMeta  = "_meta" // indexed only: one term key+filter.Separator+value per Meta pair
)

var fields = [...]string{fieldTitle, fieldText}

// Internal keys, written in the same batch as the content they describe
// (the store id once, at creation).
var (
	keySeq     = []byte("anna.applied_seq")
	keyStats   = []byte("anna.field_stats")
	keyFormat  = []byte("anna.format")
	keyStoreID = []byte("anna.store_id")
)

// format identifies this package's document layout; an index written with a
// different one must be rebuilt. 2: Meta indexed in fieldMeta.
const format = "2"

// Hit is one search result.
type Hit struct {
	ID    string
	Score float64
}

// stats are the per-field token totals over live documents, and how many
// live documents each language has (nil in an index made before they were
// counted: all English).
type stats struct {
	Len   [len(fields)]uint64 `json:"len"`
	Langs map[string]uint64   `json:"langs,omitempty"`
}

// languages are the languages st's documents are in, sorted; English for
// an index that never counted them and for an empty one.
func (st stats) languages() []string {
	var out []string
	for l, n := range st.Langs {
		if n > 0 {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return []string{lang.English}
	}
	sort.Strings(out)
	return out
}

// legacy starts the language counts of an index made before they were
// kept, whose documents are all English, before its first change.
func (st *stats) legacy(reader bindex.IndexReader) error {
	if st.Langs != nil {
		return nil
	}
	n, err := reader.DocCount()
	if err != nil {
		return err
	}
	st.Langs = map[string]uint64{}
	if n > 0 {
		st.Langs[lang.English] = n
	}
	return nil
}

// count moves a document of language l in (+1) or out (-1) of st.
func (st *stats) count(l string, delta int) {
	if st.Langs == nil {
		st.Langs = map[string]uint64{}
	}
	switch {
	case delta > 0:
		st.Langs[l]++
	case st.Langs[l] > 0:
		st.Langs[l]--
	}
	if st.Langs[l] == 0 {
		delete(st.Langs, l)
	}
}

// Index is an open BM25 index. Search may run concurrently with anything;
// Index and Delete are serialised.
type Index struct {
	bi       bleve.Index
	language string // Options.Language, parsed
	dir      string
	mu       sync.Mutex // serialises writers: stats are read-modify-write
	closed   bool
	readOnly bool
	par      parallelism // how a search spreads over goroutines
	blocks   *blockCache // block maxima of the postings searches read (blockmax.go)
}

// Options configure Open.
type Options struct {
	// ReadOnly opens an existing index without writing anything; Index and
	// Delete then fail.
	ReadOnly bool
	// StoreID is recorded when Open creates the index: the identity of the
	// store it is derived from (see StoreID).
	StoreID string
	// SearchWorkers is how many goroutines one search may score on: 0 is
	// runtime.GOMAXPROCS, 1 scores on the caller's goroutine alone (for a
	// server whose concurrent queries already keep every core busy). An
	// index under 2×MinParallelDocs documents is always scored on one.
	// The hits are the same either way.
	SearchWorkers int
	// Language is the language of documents that name none (storage.Doc's
	// Language): "" or lang.Auto detects each one's (lang.Detect, English
	// when it cannot tell); a code (lang.Parse) is every such document's.
	Language string
	// BlockMaxBytes is the memory kept for block maxima, per-block bounds
	// of the terms' scores that let a search skip blocks of documents no
	// top document is in (blockmax.go): 0 is 32 MiB, negative keeps none.
	// They are computed in the background for the terms searches read, so
	// a search's first use of a term does without them. The hits are the
	// same either way.
	BlockMaxBytes int
}

// MinParallelDocs is the fewest documents one goroutine of a search scores
// (Options.SearchWorkers): below it, starting goroutines costs more than it
// saves.
const MinParallelDocs = 1 << 15

// ErrNotExist is wrapped by a read-only Open of a directory holding no index.
var ErrNotExist = errors.New("no BM25 index")

// Open opens the index in dir, creating it if dir holds none (unless
// opts.ReadOnly). A damaged index gives an error; so may a panic inside
// Bleve reading it, which Open turns into an error.
func Open(dir string, opts Options) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil {
			ix, err = nil, fmt.Errorf("lexical: open %s: the index is damaged: %v", dir, r)
		}
	}()
	language, err := lang.Parse(opts.Language)
	if err != nil {
		return nil, fmt.Errorf("lexical: open %s: %w", dir, err)
	}
	var bi bleve.Index
	if _, serr := os.Stat(filepath.Join(dir, "index_meta.json")); serr == nil {
		if opts.ReadOnly {
			bi, err = bleve.OpenUsing(dir, map[string]any{"read_only": true})
		} else {
			bi, err = bleve.Open(dir)
		}
	} else if opts.ReadOnly {
		return nil, fmt.Errorf("lexical: open %s: %w", dir, ErrNotExist)
	} else {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("lexical: create %s: %w", dir, err)
		}
		bi, err = bleve.NewUsing(dir, newMapping(), scorch.Name, scorch.Name, nil)
		if err == nil {
			b := bi.NewBatch()
			b.SetInternal(keyFormat, []byte(format))
			b.SetInternal(keyStoreID, []byte(opts.StoreID))
			err = bi.Batch(b)
		}
	}
	if err != nil {
		if bi != nil {
			bi.Close()
		}
		return nil, fmt.Errorf("lexical: open %s: %w", dir, err)
	}
	workers := opts.SearchWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ix = &Index{bi: bi, dir: dir, readOnly: opts.ReadOnly, language: language, par: parallelism{workers: workers, minPiece: MinParallelDocs}}
	if f, err := bi.GetInternal(keyFormat); err != nil || string(f) != format {
		bi.Close()
		return nil, fmt.Errorf("lexical: open %s: index format %q, want %q: delete the directory to rebuild it", dir, f, format)
	}
	if opts.BlockMaxBytes >= 0 {
		limit := opts.BlockMaxBytes
		if limit == 0 {
			limit = blockLimit
		}
		ix.blocks = newBlockCache(blockSize, blockMinDF, limit)
		ix.blocks.fill(func() (*snapshot, io.Closer, error) { return ix.openSnapshot() })
	}
	return ix, nil
}

// StoreID is the identity of the store the index was built from, "" for
// an index made before it was recorded.
func (ix *Index) StoreID() (string, error) {
	v, err := ix.bi.GetInternal(keyStoreID)
	if err != nil {
		return "", fmt.Errorf("lexical: store id: %w", err)
	}
	return string(v), nil
}

func newMapping() *mapping.IndexMappingImpl {
	m := bleve.NewIndexMapping()
	m.ScoringModel = bindex.BM25Scoring
	m.DefaultAnalyzer = lang.AnalyzerName(lang.English)
	doc := bleve.NewDocumentStaticMapping()
	for _, f := range fields {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = lang.AnalyzerName(lang.English) // for Bleve's own queries; Index analyses each document for its language
		fm.Store = false
		fm.IncludeTermVectors = false
		fm.IncludeInAll = false
		fm.DocValues = false
		doc.AddFieldMappingsAt(f, fm)
	}
	// Index adds the metadata terms itself; the mapping says what they are
	// (one exact keyword per term, not stored) for Bleve's own queries.
	meta := bleve.NewKeywordFieldMapping()
	meta.Store = false
	meta.IncludeTermVectors = false
	meta.IncludeInAll = false
	meta.DocValues = false
	doc.AddFieldMappingsAt(fieldMeta, meta)
	m.DefaultMapping = doc
	return m
}

// Bleve returns the underlying Bleve index, for reading only: running
// Bleve's own queries beside this package's scoring (benchmarks, checks).
// Writing through it would bypass the field statistics and applied seq.
func (ix *Index) Bleve() bleve.Index { return ix.bi }

// Close closes the index. Closing twice is harmless (Bleve itself panics).
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	ix.blocks.close() // before the segments it reads are closed
	if err := ix.bi.Close(); err != nil {
		return fmt.Errorf("lexical: close %s: %w", ix.dir, err)
	}
	return nil
}

var errReadOnly = errors.New("index is open read-only")

const indexOpts = bindex.IndexField // no stored values, no term vectors, no doc values

// Index upserts docs in one Bleve batch that also records seq as the applied
// storage seq, so content and seq commit together. Callers should pass a
// few hundred to a few thousand docs per call: each call is one segment, and
// single-doc calls are about 20x slower per doc (BenchmarkLexicalIndexSciFact).
// With no docs it only records seq (for storage changes that do not touch
// text, such as new vectors). If an ID appears twice the later doc wins.
func (ix *Index) Index(ctx context.Context, docs []storage.Doc, seq uint64) error {
	ctx = safe.Ctx(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if ix.readOnly {
		return fmt.Errorf("lexical: index: %w", errReadOnly)
	}
	for i, d := range docs {
		if d.ID == "" {
			return fmt.Errorf("lexical: index: doc %d has an empty ID", i)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r, err := ix.bi.Advanced()
	if err != nil {
		return fmt.Errorf("lexical: index: %w", err)
	}
	reader, err := r.Reader()
	if err != nil {
		return fmt.Errorf("lexical: index: %w", err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		return fmt.Errorf("lexical: index: %w", err)
	}
	if err := st.legacy(reader); err != nil {
		return fmt.Errorf("lexical: index: %w", err)
	}
	// Later duplicates win, and only the last copy may touch the stats.
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		last[d.ID] = i
	}
	var todo []storage.Doc
	for i, d := range docs {
		if last[d.ID] == i {
			todo = append(todo, d)
		}
	}
	tokens, langs, err := ix.analyze(ctx, todo, st.Langs)
	if err != nil {
		return err
	}
	b := ix.bi.NewBatch()
	for i, d := range todo {
		old, oldLang, ok, err := storedLens(reader, d.ID)
		if err != nil {
			return fmt.Errorf("lexical: index doc %q: %w", d.ID, err)
		}
		var lens [len(fields)]uint64
		doc := document.NewDocument(d.ID)
		for f, field := range fields {
			lens[f] = uint64(len(tokens[i][f]))
			// The tokens are already analysed: hand them to Bleve as they are.
			doc.AddField(document.NewTextFieldCustom(field, nil, nil, indexOpts, tokens[i][f]))
		}
		if len(d.Meta) > 0 || len(d.MetaValues) > 0 {
			doc.AddField(document.NewTextFieldCustom(fieldMeta, nil, nil, indexOpts, metaTokens(d)))
		}
		doc.AddField(document.NewTextFieldCustom(fieldLens, nil, encodeLens(lens, langs[i]), bindex.StoreField, nil))
		if err := b.IndexAdvanced(doc); err != nil {
			return fmt.Errorf("lexical: index doc %q: %w", d.ID, err)
		}
		if ok {
			st.count(oldLang, -1)
		}
		st.count(langs[i], +1)
		for f := range fields {
			if ok {
				st.Len[f] -= min(old[f], st.Len[f])
			}
			st.Len[f] += lens[f]
		}
	}
	return ix.commit(b, st, seq)
}

// Delete removes ids (unknown ones are ignored) and records seq, in one batch.
func (ix *Index) Delete(ctx context.Context, ids []string, seq uint64) error {
	ctx = safe.Ctx(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if ix.readOnly {
		return fmt.Errorf("lexical: delete: %w", errReadOnly)
	}
	for i, id := range ids {
		if id == "" {
			return fmt.Errorf("lexical: delete: id %d is empty", i)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r, err := ix.bi.Advanced()
	if err != nil {
		return fmt.Errorf("lexical: delete: %w", err)
	}
	reader, err := r.Reader()
	if err != nil {
		return fmt.Errorf("lexical: delete: %w", err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		return fmt.Errorf("lexical: delete: %w", err)
	}
	if err := st.legacy(reader); err != nil {
		return fmt.Errorf("lexical: delete: %w", err)
	}
	b := ix.bi.NewBatch()
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		old, oldLang, ok, err := storedLens(reader, id)
		if err != nil {
			return fmt.Errorf("lexical: delete doc %q: %w", id, err)
		}
		if !ok {
			continue
		}
		b.Delete(id)
		st.count(oldLang, -1)
		for f := range fields {
			st.Len[f] -= min(old[f], st.Len[f])
		}
	}
	return ix.commit(b, st, seq)
}

func (ix *Index) commit(b *bleve.Batch, st stats, seq uint64) error {
	sj, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var sk [8]byte
	binary.BigEndian.PutUint64(sk[:], seq)
	b.SetInternal(keySeq, sk[:])
	b.SetInternal(keyStats, sj)
	if err := ix.bi.Batch(b); err != nil {
		return fmt.Errorf("lexical: apply batch (seq %d): %w", seq, err)
	}
	return nil
}

// AppliedSeq returns the storage seq recorded by the last Index or Delete, 0
// for a new index.
func (ix *Index) AppliedSeq() (uint64, error) {
	v, err := ix.bi.GetInternal(keySeq)
	if err != nil {
		return 0, fmt.Errorf("lexical: applied seq: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("lexical: applied seq: corrupt value %x", v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// Count returns the number of indexed documents.
func (ix *Index) Count() (uint64, error) {
	n, err := ix.bi.DocCount()
	if err != nil {
		return 0, fmt.Errorf("lexical: count: %w", err)
	}
	return n, nil
}

// Search returns the k best documents for a free-text query. The query is
// analysed like the documents and its terms are OR-ed (a bag of words, each
// repeated term counting again); no query syntax is interpreted, so any user
// text is safe. A query with no indexable term returns no hits.
func (ix *Index) Search(ctx context.Context, query string, k int) ([]Hit, error) {
	ctx = safe.Ctx(ctx)
	hits, _, err := ix.search(ctx, query, k, filter.Filter{})
	return hits, err
}

// SearchFilter is Search over only the documents f matches: the k best of
// them, with the scores Search gives them (BM25's statistics are the whole
// index's), so k hits come back whenever k matching documents contain a
// query term. The zero Filter is Search. An invalid f (f.Validate) is an
// error.
func (ix *Index) SearchFilter(ctx context.Context, query string, k int, f filter.Filter) ([]Hit, error) {
	ctx = safe.Ctx(ctx)
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("lexical: search: %w", err)
	}
	hits, _, err := ix.search(ctx, query, k, f)
	return hits, err
}

// search is SearchFilter, also returning how many term-fields MaxScore
// pruning read only by skipping (for tests and benchmarks; scoreFields).
func (ix *Index) search(ctx context.Context, query string, k int, f filter.Filter) ([]Hit, int, error) {
	if k <= 0 {
		return nil, 0, nil
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		return nil, 0, fmt.Errorf("lexical: search: %w", err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		return nil, 0, fmt.Errorf("lexical: search: %w", err)
	}
	terms, err := queryTerms(query, st, snap.live)
	if err != nil {
		return nil, 0, fmt.Errorf("lexical: search: %w", err)
	}
	if len(terms) == 0 {
		return nil, 0, nil
	}
	var allow []docSet // nil: no filter
	if !f.IsZero() {
		var n uint64
		if allow, n, err = snap.allowed(ctx, f); err != nil {
			return nil, 0, fmt.Errorf("lexical: search with filter %s: %w", f, err)
		}
		if n == 0 {
			return nil, 0, nil
		}
	}
	top := &topDocs{k: k}
	skipped, err := scoreFields(ctx, snap, st, terms, allow, top, ix.par, ix.blocks)
	if err != nil {
		return nil, 0, fmt.Errorf("lexical: search %q: %w", query, err)
	}
	hits, err := top.hits(snap)
	return hits, skipped, err
}

type queryTerm struct {
	term string
	qtf  float64
	docs uint64 // documents of the term's language: BM25's N in its idf (0: every document)
	lang string // the language whose analyzer gave it
}

// termPrefix is what a language's terms begin with in the index: nothing
// for English (so an index made before languages reads as it did), else
// the language's code and a NUL, which no analyzer puts in a term. Each
// language's terms are thus apart from every other's: a document is found
// only by the query as its own language's analyzer reads it, and a
// term's df counts documents of its language alone.
func termPrefix(language string) string {
	if language == lang.English {
		return ""
	}
	return language + "\x00"
}

// queryTerms analyses the query for each language the index holds (with
// how many documents each has: st.Langs, or an index before languages:
// English) into distinct terms, in first-seen order, each term of a
// language other than English carrying that language's prefix
// (termPrefix) and its documents as its N.
func queryTerms(query string, st stats, live uint64) ([]queryTerm, error) {
	langs := st.Langs
	if len(langs) == 0 {
		langs = map[string]uint64{lang.English: live}
	}
	var out []queryTerm
	for _, l := range st.languages() {
		a, err := lang.Analyzer(l)
		if err != nil {
			return nil, err
		}
		prefix := termPrefix(l)
		pos := map[string]int{}
		for _, tok := range a.Analyze([]byte(query)) {
			t := prefix + string(tok.Term)
			if i, ok := pos[t]; ok {
				out[i].qtf++
				continue
			}
			pos[t] = len(out)
			out = append(out, queryTerm{t, 1, langs[l], l})
		}
	}
	return out, nil
}

// Languages returns the languages of the index's documents, sorted, with
// how many documents each has; an index made before languages were
// counted reports none (it holds English: see the package doc).
func (ix *Index) Languages() (map[string]uint64, error) {
	r, err := ix.bi.Advanced()
	if err != nil {
		return nil, fmt.Errorf("lexical: languages: %w", err)
	}
	reader, err := r.Reader()
	if err != nil {
		return nil, fmt.Errorf("lexical: languages: %w", err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		return nil, fmt.Errorf("lexical: languages: %w", err)
	}
	return st.Langs, nil
}

// LanguageOf returns the language the index analysed document id in; ok
// is false when id is not indexed.
func (ix *Index) LanguageOf(id string) (language string, ok bool, err error) {
	r, err := ix.bi.Advanced()
	if err != nil {
		return "", false, fmt.Errorf("lexical: language of %q: %w", id, err)
	}
	reader, err := r.Reader()
	if err != nil {
		return "", false, fmt.Errorf("lexical: language of %q: %w", id, err)
	}
	defer reader.Close()
	_, language, ok, err = storedLens(reader, id)
	if err != nil {
		return "", false, fmt.Errorf("lexical: language of %q: %w", id, err)
	}
	return language, ok, nil
}

// docLanguages are the languages docs are analysed for, the index holding
// counts documents of each: a document's own, else the index's option,
// else the one lang.GuessText finds in its title and text where it is
// sure; a Latin-script text it is not sure of (short or technical English
// is often read as Italian or Romanian) takes the Latin-script language
// most documents are in (the index's and this batch's sure ones), and what
// is left the guess, else English.
func (ix *Index) docLanguages(ctx context.Context, docs []storage.Doc, counts map[string]uint64) ([]string, error) {
	out := make([]string, len(docs))
	guesses := make([]lang.Guess, len(docs))
	auto := ix.language == "" || ix.language == lang.Auto
	workers := min(runtime.GOMAXPROCS(0), max(1, len(docs)/64))
	err := parallel.Each(ctx, len(docs), workers, func(i int) error {
		d := docs[i]
		if l, err := lang.Parse(d.Language); err == nil && l != "" && l != lang.Auto {
			out[i] = l
		} else if !auto {
			out[i] = ix.language
		} else {
			text := d.Text
			if d.Title != "" {
				text = d.Title + "\n" + d.Text
			}
			if guesses[i] = lang.GuessText(text); guesses[i].Sure {
				out[i] = guesses[i].Code
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	tally := map[string]uint64{}
	for l, n := range counts {
		if lang.IsLatin(l) {
			tally[l] += n
		}
	}
	for _, l := range out {
		if lang.IsLatin(l) {
			tally[l]++
		}
	}
	dominant, most := "", uint64(0)
	for l, n := range tally {
		if n > most || (n == most && (l == lang.English || (dominant != lang.English && l < dominant))) {
			dominant, most = l, n
		}
	}
	for i, g := range guesses {
		switch {
		case out[i] != "":
		case g.Latin && dominant != "":
			out[i] = dominant
		case g.Code != "":
			out[i] = g.Code
		default:
			out[i] = lang.English
		}
	}
	return out, nil
}

// analyzed is a field's token stream, analysed once here both to count the
// field's length (for BM25's average) and to be indexed: as an
// analysis.Analyzer it ignores its input and returns the stream, so Bleve
// indexes exactly the tokens that were counted.
type analyzed analysis.TokenStream

func (a analyzed) Analyze([]byte) analysis.TokenStream { return analysis.TokenStream(a) }

// analyze runs each doc's language's analyzer (docLanguages, with counts
// the index's documents per language) over its fields, in parallel, and
// returns the languages too.
func (ix *Index) analyze(ctx context.Context, docs []storage.Doc, counts map[string]uint64) ([][len(fields)]analyzed, []string, error) {
	out := make([][len(fields)]analyzed, len(docs))
	langs, err := ix.docLanguages(ctx, docs, counts)
	if err != nil {
		return nil, nil, err
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(docs)/64))
	err = parallel.Each(ctx, len(docs), workers, func(i int) error {
		a, err := lang.Analyzer(langs[i])
		if err != nil {
			return err
		}
		prefix := termPrefix(langs[i])
		for f, text := range [len(fields)]string{docs[i].Title, docs[i].Text} {
			if text != "" {
				toks := a.Analyze([]byte(text))
				if prefix != "" {
					for _, t := range toks {
						t.Term = append([]byte(prefix), t.Term...)
					}
				}
				out[i][f] = analyzed(toks)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, langs, nil
}

func readStats(reader bindex.IndexReader) (stats, error) {
	var st stats
	v, err := reader.GetInternal(keyStats)
	if err != nil {
		return st, fmt.Errorf("read field stats: %w", err)
	}
	if v == nil {
		return st, nil
	}
	if err := json.Unmarshal(v, &st); err != nil {
		return st, fmt.Errorf("corrupt field stats %q: %w", v, err)
	}
	return st, nil
}

func encodeLens(l [len(fields)]uint64, language string) []byte {
	parts := make([]string, len(l), len(l)+1)
	for i, n := range l {
		parts[i] = strconv.FormatUint(n, 10)
	}
	return []byte(strings.Join(append(parts, language), " "))
}

// storedLens returns the field lengths and the language recorded for id
// (English where none is: an index made before they were), ok=false if id
// is not indexed.
func storedLens(reader bindex.IndexReader, id string) (l [len(fields)]uint64, language string, ok bool, err error) {
	doc, err := reader.Document(id)
	if err != nil || doc == nil {
		return l, "", false, err
	}
	var raw []byte
	doc.VisitFields(func(f bindex.Field) {
		if f.Name() == fieldLens {
			raw = f.Value()
		}
	})
	if raw == nil {
		return l, "", false, errors.New("indexed without field lengths")
	}
	parts := strings.Fields(string(raw))
	language = lang.English
	switch len(parts) {
	case len(fields) + 1:
		language = parts[len(fields)]
	case len(fields):
	default:
		return l, "", false, fmt.Errorf("corrupt field lengths %q", raw)
	}
	for i, p := range parts[:len(fields)] {
		if l[i], err = strconv.ParseUint(p, 10, 64); err != nil {
			return l, "", false, fmt.Errorf("corrupt field lengths %q", raw)
		}
	}
	return l, language, true, nil
}
