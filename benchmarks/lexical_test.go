package benchmarks

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/index/lexical"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/storage"
)

func lexSciFact(b *testing.B) *beir.Dataset {
	b.Helper()
	ds, err := beir.Load(shareddata.Path(b, "datasets", "scifact"), "test")
	if err != nil {
		b.Fatal(err)
	}
	return ds
}

func storageDocs(docs []beir.Doc) []storage.Doc {
	out := make([]storage.Doc, len(docs))
	for i, d := range docs {
		out[i] = storage.Doc(d)
	}
	return out
}

func lexBuild(b *testing.B, docs []storage.Doc, batch int) (*lexical.Index, time.Duration) {
	b.Helper()
	return lexBuildIn(b, filepath.Join(b.TempDir(), "lex"), docs, batch)
}

// lexBuildIn is lexBuild into dir, document i's batch applied with seq
// one past the batch's last document.
func lexBuildIn(b *testing.B, dir string, docs []storage.Doc, batch int) (*lexical.Index, time.Duration) {
	b.Helper()
	ix, err := lexical.Open(dir, lexical.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	start := time.Now()
	for i := 0; i < len(docs); i += batch {
		end := min(i+batch, len(docs))
		if err := ix.Index(context.Background(), docs[i:end], uint64(end)); err != nil {
			b.Fatal(err)
		}
	}
	return ix, time.Since(start)
}

// BenchmarkLexicalIndexSciFact: indexing SciFact in batches of 1000, against
// single-document calls (on the first 300 docs) and against plain Bleve
// indexing the same docs in batches of 1000 through its mapping, in the same
// run. Reports docs/s of each and the ratios.
func BenchmarkLexicalIndexSciFact(b *testing.B) {
	ds := lexSciFact(b)
	corpus := storageDocs(ds.Corpus)
	for i := 0; i < b.N; i++ {
		_, batched := lexBuild(b, corpus, 1000)
		_, single := lexBuild(b, corpus[:300], 1)
		start := time.Now()
		ref := lexBleveRef(b, corpus)
		plain := time.Since(start)
		ref.Close()
		batchedRate := float64(len(ds.Corpus)) / batched.Seconds()
		singleRate := 300 / single.Seconds()
		plainRate := float64(len(ds.Corpus)) / plain.Seconds()
		b.ReportMetric(batchedRate, "docs/s_batch1000")
		b.ReportMetric(singleRate, "docs/s_single")
		b.ReportMetric(plainRate, "docs/s_bleve")
		b.ReportMetric(batchedRate/singleRate, "x_batch_vs_single")
		b.ReportMetric(batchedRate/plainRate, "x_vs_bleve")
	}
}

// lexBleveRef indexes docs with plain Bleve (en analyzer, bm25 model) in
// batches of 1000: the reference for both benchmarks.
func lexBleveRef(b *testing.B, docs []storage.Doc) bleve.Index {
	b.Helper()
	m := bleve.NewIndexMapping()
	m.ScoringModel = bindex.BM25Scoring
	m.DefaultAnalyzer = en.AnalyzerName
	ref, err := bleve.New(filepath.Join(b.TempDir(), "ref"), m)
	if err != nil {
		b.Fatal(err)
	}
	batch := ref.NewBatch()
	for i, d := range docs {
		if err := batch.Index(d.ID, map[string]string{"title": d.Title, "text": d.Text}); err != nil {
			b.Fatal(err)
		}
		if (i+1)%1000 == 0 || i == len(docs)-1 {
			if err := ref.Batch(batch); err != nil {
				b.Fatal(err)
			}
			batch = ref.NewBatch()
		}
	}
	return ref
}

// BenchmarkLexicalSearchSciFact: the 300 SciFact test queries, top 100,
// through lexical.Index (BM25 scored from the postings) and through Bleve's
// own search (match queries on title and text, bm25 model) over an index of
// the same docs built with Bleve's mapping, in the same run.
func BenchmarkLexicalSearchSciFact(b *testing.B) {
	ds := lexSciFact(b)
	corpus := storageDocs(ds.Corpus)
	ix, _ := lexBuild(b, corpus, 1000)

	ref := lexBleveRef(b, corpus)
	defer ref.Close()
	var queries []string
	for _, q := range ds.Queries {
		queries = append(queries, q)
	}
	ctx := context.Background()
	ours := func() {
		for _, q := range queries {
			if _, err := ix.Search(ctx, q, 100); err != nil {
				b.Fatal(err)
			}
		}
	}
	theirs := func() {
		for _, q := range queries {
			var qs []query.Query
			for _, f := range []string{"title", "text"} {
				mq := bleve.NewMatchQuery(q)
				mq.SetField(f)
				qs = append(qs, mq)
			}
			if _, err := ref.Search(bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), 100, 0, false)); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Best of three alternating rounds after a warm-up of each, so that
	// neither side pays for the other's background segment merging.
	best := func(fn func()) time.Duration {
		start := time.Now()
		fn()
		return time.Since(start)
	}
	ours()
	theirs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o, t := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
		for range 3 {
			o = min(o, best(ours))
			t = min(t, best(theirs))
		}
		n := float64(len(queries))
		b.ReportMetric(n/o.Seconds(), "queries/s")
		b.ReportMetric(n/t.Seconds(), "queries/s_bleve")
		b.ReportMetric(t.Seconds()/o.Seconds(), "x_vs_bleve")
	}
}

// BenchmarkLexicalSearch100k: SciFact's 300 test queries, top 100 (and top
// 10, for the effect of MaxScore pruning), over
// 100,000 SciFact variants (sciFactVariants; ANNA_BENCH_DOCS overrides the
// size), through lexical.Index as opened by default (a search spread over
// GOMAXPROCS goroutines), through the same index opened with one search
// worker and opened without block maxima, and through Bleve's own search
// over the same index (a disjunction of match queries on title and text,
// which Bleve scores with its bm25 model), in turn for each query:
// per-query p50 and p99 of each, and the ratios of their p50s; the timed
// pass follows one over every query (first_pass_p50_ms: the block maxima
// are computed in the background meanwhile). ANNA_BENCH_LEXDIR keeps the
// index between runs (lexVariants), ANNA_BENCH_ORDER=grouped orders the
// corpus by abstract (grouped). ANNA_BENCH_LUCENE=1 adds Lucene on the
// same terms in the same run (luceneReference).
func BenchmarkLexicalSearch100k(b *testing.B) {
	ix, dir, queries := lexVariants(b, nil)
	if os.Getenv("ANNA_BENCH_LEXDIR") == "" {
		// built here, writable: reopened read-only, as a second handle needs
		ix.Close()
		ix = lexOpen(b, dir, lexical.Options{ReadOnly: true})
	}
	one := lexOpen(b, dir, lexical.Options{ReadOnly: true, SearchWorkers: 1})
	noBM := lexOpen(b, dir, lexical.Options{ReadOnly: true, BlockMaxBytes: -1})
	ctx := context.Background()
	bi := ix.Bleve()
	search := func(ix *lexical.Index, q string, k int) {
		if _, err := ix.Search(ctx, q, k); err != nil {
			b.Fatal(err)
		}
	}
	ours := func(q string, k int) { search(ix, q, k) }
	theirs := func(q string) {
		var qs []query.Query
		for _, f := range []string{"title", "text"} {
			mq := bleve.NewMatchQuery(q)
			mq.SetField(f)
			qs = append(qs, mq)
		}
		if _, err := bi.Search(bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), 100, 0, false)); err != nil {
			b.Fatal(err)
		}
	}
	// The first pass over the queries finds no block maxima (computed in
	// the background as the searches ask for them): timed, then the
	// handles' maxima are left to be computed before the timed passes.
	var coldT []time.Duration
	for _, q := range queries {
		timed(&coldT, func() { ours(q, 100) })
		search(one, q, 100)
	}
	waitIdle(b)
	for _, q := range queries[:20] {
		search(noBM, q, 100)
		theirs(q)
	}
	var oT, o10T, tT, sT, s10T, nT []time.Duration
	runs := []func(q string){
		func(q string) { timed(&oT, func() { ours(q, 100) }) },
		func(q string) { timed(&sT, func() { search(one, q, 100) }) },
		func(q string) { timed(&nT, func() { search(noBM, q, 100) }) },
		func(q string) { timed(&tT, func() { theirs(q) }) },
		func(q string) { timed(&o10T, func() { ours(q, 10) }) },
		func(q string) { timed(&s10T, func() { search(one, q, 10) }) },
	}
	b.ResetTimer()
	for range b.N {
		for i, q := range queries {
			// each query through every configuration, the first one in
			// turn: the first to read a query's postings reads them from
			// memory, the next ones from the CPU's caches (~10 % faster)
			for j := range runs {
				runs[(i+j)%len(runs)](q)
			}
		}
	}
	b.StopTimer()
	p50o, p50t, p50s := percentile(oT, 0.5), percentile(tT, 0.5), percentile(sT, 0.5)
	b.ReportMetric(ms(p50o), "p50_ms")
	b.ReportMetric(ms(percentile(oT, 0.99)), "p99_ms")
	b.ReportMetric(ms(percentile(coldT, 0.5)), "first_pass_p50_ms")
	b.ReportMetric(ms(percentile(nT, 0.5)), "no_blockmax_p50_ms")
	b.ReportMetric(percentile(nT, 0.5).Seconds()/p50o.Seconds(), "x_vs_no_blockmax_p50")
	b.ReportMetric(ms(percentile(o10T, 0.5)), "top10_p50_ms")
	b.ReportMetric(ms(p50s), "one_worker_p50_ms")
	b.ReportMetric(ms(percentile(sT, 0.99)), "one_worker_p99_ms")
	b.ReportMetric(ms(percentile(s10T, 0.5)), "one_worker_top10_p50_ms")
	b.ReportMetric(p50s.Seconds()/p50o.Seconds(), "x_vs_one_worker_p50")
	if os.Getenv("ANNA_BENCH_LUCENE") != "" {
		luceneReference(b, ix, dir, queries, p50o, p50s)
	}
	b.ReportMetric(ms(p50t), "bleve_p50_ms")
	b.ReportMetric(ms(percentile(tT, 0.99)), "bleve_p99_ms")
	b.ReportMetric(p50t.Seconds()/p50o.Seconds(), "x_vs_bleve_p50")
}

// lexVariants indexes the sciFactVariants corpus (benchDocs documents) in
// batches of 5000, document i with metadata meta(i) when meta is not nil,
// waits until Bleve's background work is done, and returns the index and
// SciFact's judged queries.
//
// With ANNA_BENCH_LEXDIR set (and no metadata), the index is kept in
// $ANNA_BENCH_LEXDIR/variants-N and reused by later runs when complete (its
// applied seq is N), so that comparing search code at a million documents
// does not re-index for 15 minutes each time.
func lexVariants(b *testing.B, meta func(i int) map[string]string) (*lexical.Index, string, []string) {
	b.Helper()
	ds := lexSciFact(b)
	ix, dir := lexVariantIndex(b, ds, benchDocs(), meta)
	waitIdle(b)
	return ix, dir, judgedQueries(ds)
}

// lexOpen opens the index in dir, closed when b ends.
func lexOpen(b *testing.B, dir string, o lexical.Options) *lexical.Index {
	b.Helper()
	ix, err := lexical.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	return ix
}

// lexVariantIndex is lexVariants' index of n variants, and its directory:
// reused from ANNA_BENCH_LEXDIR when there is a complete one (open
// read-only), else built.
func lexVariantIndex(b *testing.B, ds *beir.Dataset, n int, meta func(i int) map[string]string) (*lexical.Index, string) {
	b.Helper()
	keep := os.Getenv("ANNA_BENCH_LEXDIR")
	if keep == "" || meta != nil {
		dir := filepath.Join(b.TempDir(), "lex")
		ix, took := lexBuildIn(b, dir, lexVariantDocs(ds, n, meta), 5000)
		b.Logf("indexed %d docs in %s", n, took.Round(time.Second))
		return ix, dir
	}
	dir := filepath.Join(keep, fmt.Sprintf("variants-%d", n))
	if grouped() {
		dir = filepath.Join(keep, fmt.Sprintf("variants-grouped-%d", n))
	}
	if ix, err := lexical.Open(dir, lexical.Options{ReadOnly: true}); err == nil {
		if seq, err := ix.AppliedSeq(); err == nil && seq == uint64(n) {
			b.Cleanup(func() { ix.Close() })
			b.Logf("reusing the index of %d docs in %s", n, dir)
			return ix, dir
		}
		ix.Close()
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	ix, took := lexBuildIn(b, dir, lexVariantDocs(ds, n, nil), 5000)
	b.Logf("indexed %d docs in %s into %s", n, took.Round(time.Second), dir)
	// read-only, as when reused: a writer's lock would keep the
	// benchmarks' second, read-only handle waiting
	ix.Close()
	return lexOpen(b, dir, lexical.Options{ReadOnly: true}), dir
}

// grouped reports ANNA_BENCH_ORDER=grouped: the lexical benchmarks' corpus
// then holds each abstract's variants side by side (document i is variant
// i/n of abstract i%n otherwise, so that every run of a few thousand
// documents holds a variant of every abstract: the worst case for block
// maxima, every block's maximum being the index's), indexed in its own
// directory under ANNA_BENCH_LEXDIR.
func grouped() bool { return os.Getenv("ANNA_BENCH_ORDER") == "grouped" }

// lexVariantDocs returns n sciFactVariants of ds's corpus as documents,
// document i with metadata meta(i) when meta is not nil.
func lexVariantDocs(ds *beir.Dataset, n int, meta func(i int) map[string]string) []storage.Doc {
	variants, src := sciFactVariants(ds, n)
	if grouped() {
		// each abstract's variants side by side, in the order made
		order := make([]int, len(variants))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return src[order[a]] < src[order[b]] })
		g := variants[:0:0]
		for _, j := range order {
			g = append(g, variants[j])
		}
		variants = g
	}
	docs := make([]storage.Doc, len(variants))
	for i, d := range variants {
		docs[i] = storage.Doc(d)
		if meta != nil {
			docs[i].Meta = meta(i)
		}
	}
	return docs
}

// timed runs f and appends how long it took to ds.
func timed(ds *[]time.Duration, f func()) {
	t0 := time.Now()
	f()
	*ds = append(*ds, time.Since(t0))
}

// percentile returns the p-quantile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkLexicalSearchFilter100k: SciFact's judged queries, top 100 and
// top 10, over the corpus of BenchmarkLexicalSearch100k (ANNA_BENCH_DOCS
// overrides its size) with metadata on every document, {"bucket": i%100 as
// two digits, "parity": "even" or "odd"}: per-query p50 and p99 of Search
// and of SearchFilter with the zero filter and with filters matching 1%
// (bucket = "07"), 10% (bucket prefix "3"; and the string range bucket in
// ["40", "50")), 50% (parity = "even") and 90% (not bucket prefix "3") of
// the documents, each query run in every
// configuration in turn so that drift hits all alike.
func BenchmarkLexicalSearchFilter100k(b *testing.B) {
	ix, _, queries := lexVariants(b, func(i int) map[string]string {
		return map[string]string{"bucket": fmt.Sprintf("%02d", i%100), "parity": [2]string{"even", "odd"}[i%2]}
	})
	ctx := context.Background()
	configs := []struct {
		name string
		f    *filter.Filter // nil: Search
	}{
		{"search", nil},
		{"zero", &filter.Filter{}},
		{"1pct", ptr(filter.Eq("bucket", "07"))},
		{"10pct", ptr(filter.Prefix("bucket", "3"))},
		{"10pct_range", ptr(filter.Range("bucket", "40", "50"))},
		{"50pct", ptr(filter.Eq("parity", "even"))},
		{"90pct", ptr(filter.Not(filter.Prefix("bucket", "3")))},
	}
	for _, c := range configs[1:] {
		n, err := ix.CountMatching(ctx, *c.f)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%-6s %-28s matches %d documents", c.name, c.f, n)
	}
	run := func(q string, k int, f *filter.Filter) time.Duration {
		start := time.Now()
		var err error
		if f == nil {
			_, err = ix.Search(ctx, q, k)
		} else {
			_, err = ix.SearchFilter(ctx, q, k, *f)
		}
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, q := range queries[:20] {
		for _, c := range configs {
			run(q, 100, c.f)
		}
	}
	times := make([][2][]time.Duration, len(configs)) // per config, k = 100 and 10
	b.ResetTimer()
	for range b.N {
		for _, q := range queries {
			for j, k := range []int{100, 10} {
				for i, c := range configs {
					times[i][j] = append(times[i][j], run(q, k, c.f))
				}
			}
		}
	}
	b.StopTimer()
	for i, c := range configs {
		b.ReportMetric(ms(percentile(times[i][0], 0.5)), c.name+"_p50_ms")
		b.ReportMetric(ms(percentile(times[i][0], 0.99)), c.name+"_p99_ms")
		b.ReportMetric(ms(percentile(times[i][1], 0.5)), c.name+"_top10_p50_ms")
	}
}

func ptr[T any](v T) *T { return &v }

// luceneReference runs scripts/lucene-bm25.sh on the documents and queries
// of BenchmarkLexicalSearch100k, analysed by the index's own analyzer and
// written as terms (so Lucene indexes and searches exactly anna's terms),
// and reports its p50s beside anna's (p50o with the default workers, p50s
// with one) and how many of Lucene's 10 best documents anna's 10 best
// share (lucene_agree10, a mean fraction: the two differ only by Lucene's
// one-byte field-length norms and ties, which among the near-identical
// variants of one abstract decide which variants come first; so also
// lucene_agree10_source, over the abstracts the variants come from: the
// part of an ID before '#'). With ANNA_BENCH_LEXDIR the
// Lucene index is kept beside anna's (DIR.lucene) and reused.
func luceneReference(b *testing.B, ix *lexical.Index, dir string, queries []string, p50o, p50s time.Duration) {
	b.Helper()
	an := ix.Bleve().Mapping().AnalyzerNamed(en.AnalyzerName)
	terms := func(s string) string {
		var out []string
		for _, t := range an.Analyze([]byte(s)) {
			out = append(out, string(t.Term))
		}
		return strings.Join(out, " ")
	}
	work := b.TempDir()
	if os.Getenv("ANNA_BENCH_LEXDIR") != "" {
		work = dir + ".lucene"
	}
	script, err := filepath.Abs("../scripts/lucene-bm25.sh")
	if err != nil {
		b.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("lucene-bm25.sh %s: %v", args[0], err)
		}
		return string(out)
	}
	idx := filepath.Join(work, "index")
	if _, err := os.Stat(filepath.Join(work, "indexed")); err != nil {
		if err := os.MkdirAll(work, 0o755); err != nil {
			b.Fatal(err)
		}
		var sb strings.Builder
		for _, d := range lexVariantDocs(lexSciFact(b), benchDocs(), nil) {
			fmt.Fprintf(&sb, "%s\t%s\t%s\n", d.ID, terms(d.Title), terms(d.Text))
		}
		corpus := filepath.Join(work, "corpus.tsv")
		if err := os.WriteFile(corpus, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("lucene: %s", strings.TrimSpace(run("index", corpus, idx)))
		if err := os.Remove(corpus); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "indexed"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var qs []string
	for _, q := range queries {
		qs = append(qs, terms(q))
	}
	qfile, top10 := filepath.Join(work, "queries.txt"), filepath.Join(work, "top10.txt")
	if err := os.WriteFile(qfile, []byte(strings.Join(qs, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	line := strings.TrimSpace(run("search", idx, qfile, top10))
	b.Logf("lucene: %s", line)
	kv := map[string]float64{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("lucene: %q: %v", f, err)
		}
		kv[k] = x
	}
	raw, err := os.ReadFile(top10)
	if err != nil {
		b.Fatal(err)
	}
	lists := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lists) != len(queries) {
		b.Fatalf("lucene: %d top-10 lists for %d queries", len(lists), len(queries))
	}
	source := func(id string) string { s, _, _ := strings.Cut(id, "#"); return s }
	agree, agreeSrc := 0.0, 0.0
	for i, q := range queries {
		hits, err := ix.Search(context.Background(), q, 10)
		if err != nil {
			b.Fatal(err)
		}
		theirs, theirSrc, ourSrc := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, id := range strings.Fields(lists[i]) {
			theirs[id], theirSrc[source(id)] = true, true
		}
		n := 0
		for _, h := range hits {
			if theirs[h.ID] {
				n++
			}
			ourSrc[source(h.ID)] = true
		}
		agree += float64(n) / float64(max(len(theirs), 1))
		n = 0
		for s := range theirSrc {
			if ourSrc[s] {
				n++
			}
		}
		agreeSrc += float64(n) / float64(max(len(theirSrc), 1))
	}
	b.ReportMetric(kv["p50_ms"], "lucene_p50_ms")
	b.ReportMetric(kv["two_threads_p50_ms"], "lucene_two_threads_p50_ms")
	b.ReportMetric(kv["top10_p50_ms"], "lucene_top10_p50_ms")
	b.ReportMetric(kv["sum_p50_ms"], "lucene_sum_fields_p50_ms")
	b.ReportMetric(kv["segments"], "lucene_segments")
	b.ReportMetric(agree/float64(len(queries)), "lucene_agree10")
	b.ReportMetric(agreeSrc/float64(len(queries)), "lucene_agree10_source")
	b.ReportMetric(kv["two_threads_p50_ms"]/ms(p50o), "x_vs_lucene_two_threads_p50")
	b.ReportMetric(kv["p50_ms"]/ms(p50s), "x_one_worker_vs_lucene_p50")
}
