package dense_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/shareddata"
)

// TestSciFactRecall checks the index on real embeddings: the SciFact corpus
// (5,183 abstracts) and its 300 test queries embedded by the default MiniLM
// model through the shared embedding cache (encoder.NewCache; the first run
// embeds, later runs read the cache). HNSW at the default EfSearch must find
// >= 0.95 of the exact top 10 and lose no retrieval quality: its nDCG@10
// against the qrels stays within 0.005 of exact search's.
func TestSciFactRecall(t *testing.T) {
	if _, err := home.RequireDefaultModel(); err != nil {
		t.Skipf("needs the default MiniLM model: %v", err)
	}
	ds, err := beir.Load(shareddata.Path(t, "datasets", "scifact"), "test")
	if err != nil {
		t.Fatalf("loading SciFact: %v", err)
	}
	ctx := context.Background()
	enc, err := encoder.Default(ctx)
	if err != nil {
		t.Fatalf("loading the default encoder: %v", err)
	}
	defer enc.Close()
	cache, err := encoder.NewCache(enc, "")
	if err != nil {
		t.Fatal(err)
	}

	ids := make([]string, len(ds.Corpus))
	texts := make([]string, len(ds.Corpus))
	for i, d := range ds.Corpus {
		ids[i] = d.ID
		// The dense side's document text (engine.EmbedText): title and
		// text joined by a space.
		switch {
		case d.Title == "":
			texts[i] = d.Text
		case d.Text == "":
			texts[i] = d.Title
		default:
			texts[i] = d.Title + " " + d.Text
		}
	}
	start := time.Now()
	vecs, err := cache.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatalf("embedding the corpus: %v", err)
	}
	qids := make([]string, 0, len(ds.Queries))
	for id := range ds.Queries {
		qids = append(qids, id)
	}
	sort.Strings(qids)
	qtexts := make([]string, len(qids))
	for i, id := range qids {
		qtexts[i] = ds.Queries[id]
	}
	qvecs, err := cache.EmbedQueries(ctx, qtexts, encoder.Prompt{})
	if err != nil {
		t.Fatalf("embedding the queries: %v", err)
	}
	t.Logf("embedded %d docs + %d queries in %v (cache hits %d, misses %d)",
		len(vecs), len(qvecs), time.Since(start).Round(time.Millisecond), cache.Hits(), cache.Misses())

	ix := dense.New(dense.Config{Dim: cache.Dim()})
	start = time.Now()
	docs := make([]dense.Doc, len(ids))
	for i, id := range ids {
		docs[i] = dense.Doc{ID: id, Vectors: [][]float32{vecs[i]}}
	}
	if err := ix.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d x %d in %v", ix.Len(), cache.Dim(), time.Since(start).Round(time.Millisecond))
	ref := make(map[string][]float32, len(ids))
	for i, id := range ids {
		ref[id] = vecs[i]
	}

	const k = 10
	hits := 0
	var ndcgHNSW, ndcgExact float64
	for i, q := range qvecs {
		got, err := ix.Search(ctx, q, k, dense.SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exact := dense.Exact(ref, q, k)
		want := map[string]bool{}
		for _, h := range exact {
			want[h.ID] = true
		}
		for _, h := range got {
			if want[h.ID] {
				hits++
			}
		}
		ndcgHNSW += eval.NDCG(ids10(got), ds.Qrels[qids[i]], k)
		ndcgExact += eval.NDCG(ids10(exact), ds.Qrels[qids[i]], k)
	}
	recall := float64(hits) / float64(k*len(qvecs))
	ndcgHNSW /= float64(len(qvecs))
	ndcgExact /= float64(len(qvecs))
	t.Logf("SciFact test: recall@10 vs exact %.4f at EfSearch %d; nDCG@10 HNSW %.4f, exact %.4f (published all-MiniLM-L6-v2: 0.645)",
		recall, ix.Config().EfSearch, ndcgHNSW, ndcgExact)
	if recall < 0.95 {
		t.Errorf("recall@10 vs exact = %.4f, want >= 0.95", recall)
	}
	if ndcgHNSW < ndcgExact-0.005 {
		t.Errorf("nDCG@10 HNSW %.4f is more than 0.005 below exact %.4f", ndcgHNSW, ndcgExact)
	}
}

func ids10(hs []dense.Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}
