package engine_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
)

// TestWeaviateSciFact indexes SciFact (5,183 abstracts, the default MiniLM
// model, vectors from the embedding cache that `annactl eval --cache`
// fills) into the local backend and into the test cluster, and evaluates
// its 300 test queries through both. The dense lists must score the same
// nDCG@10 (the same vectors; both HNSW searches are close to exact at this
// size); BM25 and hybrid are logged beside each other (Weaviate's BM25F
// without stemming is not anna's BM25, and settles about a minute after
// an ingest). It also logs the throughput of both, ingest and queries, as
// ratios.
func TestWeaviateSciFact(t *testing.T) {
	w := clusterWeaviate(t)
	ds, err := beir.Load(shareddata.Path(t, "datasets", "scifact"), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var qids []string
	for q := range ds.Qrels {
		if _, ok := ds.Queries[q]; ok {
			qids = append(qids, q)
		}
	}
	sort.Strings(qids)
	docs := make([]engine.Document, len(ds.Corpus))
	for i, d := range ds.Corpus {
		docs[i] = engine.Document(d)
	}
	type result struct {
		scores map[engine.Mode]eval.Scores
		qps    map[engine.Mode]float64
		dps    float64
		native []string // Weaviate's own hybrid
	}
	run := func(name string, wv *engine.Weaviate) result {
		e, err := engine.Open(ctx, t.TempDir(), engine.Options{EmbeddingCache: home.EmbeddingCacheDir(), Weaviate: wv})
		if err != nil {
			t.Skipf("opening with the default model: %v", err)
		}
		defer e.Close()
		start := time.Now()
		for i := 0; i < len(docs); i += 256 {
			if _, err := e.Add(ctx, docs[i:min(i+256, len(docs))]); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		r := result{scores: map[engine.Mode]eval.Scores{}, qps: map[engine.Mode]float64{}, dps: float64(len(docs)) / time.Since(start).Seconds()}
		evaluate := func(m engine.Mode) (eval.Scores, float64) {
			runIDs := make(map[string][]string, len(qids))
			start := time.Now()
			for _, q := range qids {
				rs, err := e.Search(ctx, ds.Queries[q], engine.SearchOptions{Mode: m, K: 100, Depth: 100})
				if err != nil {
					t.Fatalf("%s %s: %v", name, m, err)
				}
				runIDs[q] = ids(rs)
			}
			return eval.Evaluate(runIDs, ds.Qrels), float64(len(qids)) / time.Since(start).Seconds()
		}
		if wv != nil {
			// Weaviate's BM25 ranks differently for about a minute after an
			// ingest (nDCG@10 0.48-0.59 right after, 0.63 after; we take it
			// for its memtables, flushed after 60 s): wait until two
			// evaluations 10 s apart agree within 0.002 (Weaviate's BM25
			// moves by a few thousandths between runs even then).
			first, _ := evaluate(engine.ModeLexical)
			prev := first
			for range 12 {
				time.Sleep(10 * time.Second)
				cur, _ := evaluate(engine.ModeLexical)
				d := math.Abs(cur.NDCG10 - prev.NDCG10)
				prev = cur
				if d < 0.002 {
					break
				}
			}
			t.Logf("Weaviate BM25 nDCG@10 right after the ingest %.4f, settled %.4f (%s after the ingest began)", first.NDCG10, prev.NDCG10, time.Since(start).Round(time.Second))
		}
		for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
			r.scores[m], r.qps[m] = evaluate(m)
		}
		if wv != nil {
			// Weaviate's own hybrid on the same query vectors, against
			// anna's fusion (the default) of Weaviate's two lists.
			co := collection(t, wv)
			for _, fusion := range []string{"rankedFusion", "relativeScoreFusion"} {
				runIDs := make(map[string][]string, len(qids))
				for _, q := range qids {
					qv, err := e.Encoder().EmbedQueries(ctx, []string{ds.Queries[q]}, encoder.Prompt{})
					if err != nil {
						t.Fatal(err)
					}
					hits, err := co.Hybrid(ctx, ds.Queries[q], qv[0], 100, 0.5, fusion, engine.Filter{})
					if err != nil {
						t.Fatalf("Weaviate hybrid: %v", err)
					}
					for _, h := range hits {
						runIDs[q] = append(runIDs[q], h.ID)
					}
				}
				r.native = append(r.native, fmt.Sprintf("Weaviate's own hybrid (%s, alpha 0.5): nDCG@10 %.4f, R@100 %.4f", fusion,
					eval.Evaluate(runIDs, ds.Qrels).NDCG10, eval.Evaluate(runIDs, ds.Qrels).Recall100))
			}
		}
		return r
	}
	loc := run("local", nil)
	rem := run("weaviate", w)
	var b strings.Builder
	fmt.Fprintf(&b, "SciFact test, %d queries, %d documents (3 Weaviate nodes on loopback, replication 2)\n", len(qids), len(docs))
	fmt.Fprintf(&b, "%-8s %14s %14s %14s %14s\n", "mode", "local nDCG@10", "weaviate", "local R@100", "weaviate")
	for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
		fmt.Fprintf(&b, "%-8s %14.4f %14.4f %14.4f %14.4f\n", m, loc.scores[m].NDCG10, rem.scores[m].NDCG10, loc.scores[m].Recall100, rem.scores[m].Recall100)
	}
	fmt.Fprintf(&b, "ingest: local %.0f docs/s, weaviate %.0f docs/s (weaviate/local %.2f)\n", loc.dps, rem.dps, rem.dps/loc.dps)
	for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
		fmt.Fprintf(&b, "queries %s: local %.1f q/s, weaviate %.1f q/s (weaviate/local %.2f)\n", m, loc.qps[m], rem.qps[m], rem.qps[m]/loc.qps[m])
	}
	for _, l := range rem.native {
		fmt.Fprintln(&b, l)
	}
	t.Log("\n" + b.String())
	if d := math.Abs(loc.scores[engine.ModeDense].NDCG10 - rem.scores[engine.ModeDense].NDCG10); d > 0.001 {
		t.Errorf("dense nDCG@10: local %.4f, Weaviate %.4f: the same vectors should score the same", loc.scores[engine.ModeDense].NDCG10, rem.scores[engine.ModeDense].NDCG10)
	}
}
