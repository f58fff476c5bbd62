package benchmarks

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/model/catalog"
)

// hybridCorpusEncoder gives documents precomputed vectors and encodes
// queries with the real model. Embedding 100,000 documents with MiniLM on a
// 2-core machine would take over an hour and measure nothing new, so the
// large corpus is built from SciFact's real embeddings (see
// BenchmarkHybridLatency100k); queries still pay the real encoder.
type hybridCorpusEncoder struct {
	vecs  map[string][]float32 // EmbedText -> vector
	query encoder.Encoder
}

func (h *hybridCorpusEncoder) Dim() int            { return h.query.Dim() }
func (h *hybridCorpusEncoder) Fingerprint() string { return "bench-100k-" + h.query.Fingerprint() }
func (h *hybridCorpusEncoder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v, ok := h.vecs[t]
		if !ok {
			return nil, fmt.Errorf("no vector for %.40q", t)
		}
		out[i] = v
	}
	return out, nil
}
func (h *hybridCorpusEncoder) EmbedQueries(ctx context.Context, q []string, p encoder.Prompt) ([][]float32, error) {
	return h.query.EmbedQueries(ctx, q, p)
}

// benchDocs is the corpus size of the 100k benchmarks: 100,000, or
// ANNA_BENCH_DOCS.
func benchDocs() int {
	n := 100_000
	if s := os.Getenv("ANNA_BENCH_DOCS"); s != "" {
		fmt.Sscan(s, &n)
	}
	return n
}

// judgedQueries returns the texts of ds's queries that have judgments,
// sorted, so every run times the same queries in the same order.
func judgedQueries(ds *beir.Dataset) []string {
	var queries []string
	for q := range ds.Qrels {
		queries = append(queries, ds.Queries[q])
	}
	sort.Strings(queries)
	return queries
}

// sciFactVariants makes an n-document corpus from SciFact: each abstract in
// ~n/5183 variants, each variant dropping 15% of the abstract's words at
// random, so that BM25 sees n distinct documents with SciFact's vocabulary
// and term statistics. src[i] is the index in ds.Corpus docs[i] came from.
func sciFactVariants(ds *beir.Dataset, n int) (docs []engine.Document, src []int) {
	rng := rand.New(rand.NewPCG(1, 2))
	docs = make([]engine.Document, 0, n)
	src = make([]int, 0, n)
	for i := 0; len(docs) < n; i++ {
		j := i % len(ds.Corpus)
		s := ds.Corpus[j]
		words := strings.Fields(s.Text)
		kept := words[:0:0]
		for _, w := range words {
			if rng.Float64() >= 0.15 {
				kept = append(kept, w)
			}
		}
		d := engine.Document{ID: fmt.Sprintf("%s#%d", s.ID, i/len(ds.Corpus)), Title: s.Title, Text: strings.Join(kept, " ")}
		if strings.TrimSpace(d.Text) == "" {
			d.Text = s.Text
		}
		docs = append(docs, d)
		src = append(src, j)
	}
	return docs, src
}

// BenchmarkHybridLatency100k measures hybrid (BM25 + HNSW, fused) query
// latency on a 100,000-document corpus next to the time of encoding the
// query alone (with the engine's encoder, and with a 2-thread session), on
// SciFact's 300 test queries; also BM25 and dense top-100 alone. The
// directory is then open twice read-only: as by default (a BM25 search
// spread over GOMAXPROCS goroutines) and with SearchWorkers 1, each query
// going through both in turn (the one_worker metrics).
//
// The corpus: each of SciFact's 5,183 abstracts in ~20 variants. A variant
// drops 15% of the abstract's words at random (so BM25 sees 100k distinct
// documents with SciFact's vocabulary) and takes the original's real MiniLM
// vector plus Gaussian noise, renormalised (so HNSW searches 100k vectors
// clustered like real embeddings). Env ANNA_BENCH_DOCS overrides the size,
// ANNA_BENCH_PRECISION=float32 the model's precision (by default the one
// `annactl index` builds with), ANNA_BENCH_HYBDIR keeps the index
// (hybridIndex).
func BenchmarkHybridLatency100k(b *testing.B) {
	ctx := context.Background()
	ds, err := beir.Load(shareddata.Path(b, "datasets", "scifact"), "test")
	if err != nil {
		b.Fatal(err)
	}
	modelDir := hybridModel(b)
	base, err := encoder.Load(ctx, modelDir, encoder.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer base.Close()
	b.Logf("model %s", filepath.Base(modelDir))
	dir := hybridIndex(b, ds, base, filepath.Base(modelDir))
	// Only the query encoder is needed from here on: the corpus's vectors
	// (over 1.5 GB at a million) are garbage, so the timed searches do not
	// run beside a heap a server would not have.
	enc := &hybridCorpusEncoder{query: base}
	runtime.GC()
	open := func(o engine.Options) *engine.Engine {
		o.Encoder, o.ReadOnly = enc, true
		e, err := engine.Open(ctx, dir, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	eng, one := open(engine.Options{}), open(engine.Options{SearchWorkers: 1})
	waitIdle(b)

	queries := judgedQueries(ds)
	// Warm up both paths, over every query: the BM25 index's block maxima
	// are computed in the background for the terms searches read, which
	// would otherwise share the cores with the timed pass.
	for _, q := range queries {
		base.EmbedQueries(ctx, []string{q}, encoder.Prompt{})
		eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeHybrid, K: 10})
		one.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeHybrid, K: 10})
	}
	waitIdle(b)
	// The engine's encoder runs one thread per operator (encoder.Options);
	// a 2-thread session encodes a lone query faster, so it is timed too,
	// as the strictest reference.
	enc2, err := encoder.Load(ctx, modelDir, encoder.Options{IntraOpThreads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer enc2.Close()
	for _, q := range queries[:20] {
		enc2.EmbedQueries(ctx, []string{q}, encoder.Prompt{})
	}
	var encT, enc2T, hybT, lexT, denT, hyb1T, lex1T []time.Duration
	search := func(e *engine.Engine, q string, mode engine.Mode, k int) func() {
		return func() {
			if _, err := e.Search(ctx, q, engine.SearchOptions{Mode: mode, K: k}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		for _, q := range queries {
			t0 := time.Now()
			if _, err := base.EmbedQueries(ctx, []string{q}, encoder.Prompt{}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeHybrid, K: 10}); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if _, err := eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeLexical, K: 100}); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			if _, err := eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeDense, K: 100}); err != nil {
				b.Fatal(err)
			}
			t4 := time.Now()
			if _, err := enc2.EmbedQueries(ctx, []string{q}, encoder.Prompt{}); err != nil {
				b.Fatal(err)
			}
			enc2T = append(enc2T, time.Since(t4))
			timed(&hyb1T, search(one, q, engine.ModeHybrid, 10))
			timed(&lex1T, search(one, q, engine.ModeLexical, 100))
			encT = append(encT, t1.Sub(t0))
			hybT = append(hybT, t2.Sub(t1))
			lexT = append(lexT, t3.Sub(t2))
			denT = append(denT, t4.Sub(t3))
		}
	}
	b.StopTimer()
	pct := percentile
	b.ReportMetric(ms(pct(hybT, 0.5)), "hybrid_p50_ms")
	b.ReportMetric(ms(pct(hybT, 0.99)), "hybrid_p99_ms")
	b.ReportMetric(ms(pct(encT, 0.5)), "encode_p50_ms")
	b.ReportMetric(ms(pct(encT, 0.99)), "encode_p99_ms")
	b.ReportMetric(ms(pct(lexT, 0.5)), "bm25_top100_p50_ms")
	b.ReportMetric(ms(pct(denT, 0.5)), "dense_top100_p50_ms")
	b.ReportMetric(ms(pct(enc2T, 0.5)), "encode_2threads_p50_ms")
	b.ReportMetric(ms(pct(hyb1T, 0.5)), "one_worker_hybrid_p50_ms")
	b.ReportMetric(ms(pct(hyb1T, 0.99)), "one_worker_hybrid_p99_ms")
	b.ReportMetric(ms(pct(lex1T, 0.5)), "one_worker_bm25_top100_p50_ms")
	b.ReportMetric(ms(pct(hybT, 0.5)-pct(encT, 0.5))/ms(pct(encT, 0.5)), "added_over_encode_p50")
	b.ReportMetric(ms(pct(hybT, 0.5)-pct(enc2T, 0.5))/ms(pct(enc2T, 0.5)), "added_over_encode_2threads_p50")
	b.Logf("hybrid p50 %.2f ms p99 %.2f ms; query encoding alone p50 %.2f ms p99 %.2f ms (2 threads: p50 %.2f ms); retrieval+fusion add %.0f%% at p50 (%.0f%% over the 2-thread encode; goal <= 30%%)",
		ms(pct(hybT, 0.5)), ms(pct(hybT, 0.99)), ms(pct(encT, 0.5)), ms(pct(encT, 0.99)), ms(pct(enc2T, 0.5)),
		100*(ms(pct(hybT, 0.5))-ms(pct(encT, 0.5)))/ms(pct(encT, 0.5)), 100*(ms(pct(hybT, 0.5))-ms(pct(enc2T, 0.5)))/ms(pct(enc2T, 0.5)))
}

// hybridModel is the model directory of the hybrid benchmarks: the
// default model at the precision `annactl index` builds a new index with
// (int8 for all-MiniLM-L6-v2, docs/results/indexing.md), or at
// ANNA_BENCH_PRECISION (float32 times the float32 model, as every run
// before 2026-11-28 did). It skips b when the default model is missing.
func hybridModel(b *testing.B) string {
	b.Helper()
	prec := os.Getenv("ANNA_BENCH_PRECISION")
	if err := catalog.CheckPrecision(prec); err != nil {
		b.Fatalf("ANNA_BENCH_PRECISION: %v", err)
	}
	if _, err := home.RequireDefaultModel(); err != nil {
		b.Skipf("default model: %v", err)
	}
	dir, err := catalog.WithPrecision(context.Background(), home.DefaultModel(), prec, home.SourceDir(), catalog.Options{DownloadsDir: home.DownloadsDir()})
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

// hybridKept is where, under ANNA_BENCH_HYBDIR (keep), the index of
// benchDocs() documents embedded by the model named modelName is kept.
func hybridKept(keep, modelName string) string {
	return filepath.Join(keep, fmt.Sprintf("hybrid-%d-%s", benchDocs(), modelName))
}

// hybridIndex returns the directory of BenchmarkHybridLatency100k's
// corpus of benchDocs() variants, indexed (BM25 + HNSW) with vectors made
// from base's embeddings of SciFact's abstracts. With ANNA_BENCH_HYBDIR set
// the index is kept in $ANNA_BENCH_HYBDIR/hybrid-N-MODEL and reused by later
// runs: it is built beside that name and renamed into place once closed, so
// a directory of that name is whole.
func hybridIndex(b *testing.B, ds *beir.Dataset, base encoder.Encoder, modelName string) string {
	b.Helper()
	ctx := context.Background()
	n := benchDocs()
	keep := os.Getenv("ANNA_BENCH_HYBDIR")
	dir := filepath.Join(b.TempDir(), "hybrid")
	if keep != "" {
		dir = hybridKept(keep, modelName)
		if _, err := os.Stat(filepath.Join(dir, "anna.db")); err == nil {
			b.Logf("reusing the index of %d docs in %s", n, dir)
			return dir
		}
	}
	cached, err := encoder.NewCache(base, "")
	if err != nil {
		b.Fatal(err)
	}
	texts := make([]string, len(ds.Corpus))
	for i, d := range ds.Corpus {
		texts[i] = engine.EmbedText(engine.Document(d))
	}
	baseVecs, err := cached.EmbedDocuments(ctx, texts) // cached after the first run
	if err != nil {
		b.Fatal(err)
	}
	docs, src := sciFactVariants(ds, n)
	rng := rand.New(rand.NewPCG(3, 4))
	enc := &hybridCorpusEncoder{vecs: make(map[string][]float32, n), query: base}
	for i, d := range docs {
		j := src[i]
		v := make([]float32, len(baseVecs[j]))
		var norm float64
		for k, x := range baseVecs[j] {
			v[k] = x + float32(rng.NormFloat64()*0.02)
			norm += float64(v[k]) * float64(v[k])
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(norm))
		}
		enc.vecs[engine.EmbedText(d)] = v
	}
	part := dir + ".part"
	if err := os.RemoveAll(part); err != nil {
		b.Fatal(err)
	}
	w, err := engine.Open(ctx, part, engine.Options{Encoder: enc})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := ingest.Slice(ctx, w, docs, ingest.Options{Batch: 5000}); err != nil {
		b.Fatal(err)
	}
	b.Logf("indexed %d docs (BM25 + HNSW) in %s", len(docs), time.Since(start).Round(time.Second))
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(part, dir); err != nil {
		b.Fatal(err)
	}
	return dir
}

func asDocuments(ds []beir.Doc) []engine.Document {
	out := make([]engine.Document, len(ds))
	for i, d := range ds {
		out[i] = engine.Document(d)
	}
	return out
}

// BenchmarkDenseSearchKept times the dense index alone (dense.Index.Search,
// k 10 then k 100 for each of SciFact's 300 test queries, their vectors
// computed before the timing) on BenchmarkHybridLatency100k's index kept
// in ANNA_BENCH_HYBDIR (the same ANNA_BENCH_DOCS and ANNA_BENCH_PRECISION
// pick it; skipped when there is none): the HNSW walk and re-scoring at a
// million documents, without the encoder. -benchtime Nx runs N passes.
func BenchmarkDenseSearchKept(b *testing.B) {
	ctx := context.Background()
	keep := os.Getenv("ANNA_BENCH_HYBDIR")
	if keep == "" {
		b.Skip("ANNA_BENCH_HYBDIR is not set")
	}
	ds, err := beir.Load(shareddata.Path(b, "datasets", "scifact"), "test")
	if err != nil {
		b.Fatal(err)
	}
	modelDir := hybridModel(b)
	path := filepath.Join(hybridKept(keep, filepath.Base(modelDir)), "dense.hnsw")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("no kept index: %v (run BenchmarkHybridLatency100k with ANNA_BENCH_HYBDIR first)", err)
	}
	enc, err := encoder.Load(ctx, modelDir, encoder.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	qv, err := enc.EmbedQueries(ctx, judgedQueries(ds), encoder.Prompt{})
	if err != nil {
		b.Fatal(err)
	}
	ix, _, err := dense.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range qv {
		if _, err := ix.Search(ctx, q, 100, dense.SearchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var t10, t100 []time.Duration
	b.ResetTimer()
	for range b.N {
		for _, q := range qv {
			t0 := time.Now()
			ix.Search(ctx, q, 10, dense.SearchOptions{})
			t1 := time.Now()
			ix.Search(ctx, q, 100, dense.SearchOptions{})
			t10, t100 = append(t10, t1.Sub(t0)), append(t100, time.Since(t1))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(t10, 0.5).Nanoseconds())/1e3, "k10_p50_us")
	b.ReportMetric(float64(percentile(t100, 0.5).Nanoseconds())/1e3, "k100_p50_us")
}
