package lexical

import (
	"context"
	"path/filepath"
	"sort"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/storage"
)

// buildIndex indexes a corpus in batches of 1000, as the engine does.
func buildIndex(t testing.TB, corpus []beir.Doc) *Index {
	t.Helper()
	ix, err := Open(filepath.Join(t.TempDir(), "lexical"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	ctx := context.Background()
	for i := 0; i < len(corpus); i += 1000 {
		end := min(i+1000, len(corpus))
		batch := make([]storage.Doc, 0, end-i)
		for _, d := range corpus[i:end] {
			batch = append(batch, storage.Doc(d))
		}
		if err := ix.Index(ctx, batch, uint64(end)); err != nil {
			t.Fatal(err)
		}
	}
	return ix
}

func loadShared(t *testing.T, set string) *beir.Dataset {
	t.Helper()
	ds, err := beir.Load(shareddata.Path(t, "datasets", set), "test")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func runQueries(t testing.TB, ds *beir.Dataset, search func(q string) []string) eval.Scores {
	t.Helper()
	run := make(map[string][]string, len(ds.Queries))
	for qid, q := range ds.Queries {
		run[qid] = search(q)
	}
	return eval.Evaluate(run, ds.Qrels)
}

func (ix *Index) ids(t testing.TB, q string, k int) []string {
	hits, err := ix.Search(context.Background(), q, k)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// TestSciFactBM25 is the quality gate: BM25 on SciFact test must reach
// nDCG@10 >= 0.64 (BEIR publishes 0.665). It also logs the alternatives
// the package documentation argues against, measured on the same index.
func TestSciFactBM25(t *testing.T) {
	ds := loadShared(t, "scifact")
	ix := buildIndex(t, ds.Corpus)
	if n, _ := ix.Count(); n != uint64(len(ds.Corpus)) {
		t.Fatalf("count = %d, want %d", n, len(ds.Corpus))
	}
	s := runQueries(t, ds, func(q string) []string { return ix.ids(t, q, 100) })
	// ScoreTexts (mining's teacher) gives the indexed documents the
	// scores Search gives them.
	fields := make(map[string]Fields, len(ds.Corpus))
	for _, d := range ds.Corpus {
		fields[d.ID] = Fields{Title: d.Title, Text: d.Text, Language: d.Language}
	}
	var queries []string
	for _, q := range ds.Queries {
		if queries = append(queries, q); len(queries) == 50 {
			break
		}
	}
	t.Logf("ScoreTexts equals Search on %d (query, document) pairs", checkScoreTexts(t, ix, fields, queries, 100))
	t.Logf("scifact BM25 best_fields(tie %.1f): nDCG@10 %.4f  Recall@100 %.4f  MRR@10 %.4f  MAP %.4f  (%d queries)",
		TieBreaker, s.NDCG10, s.Recall100, s.MRR10, s.MAP, s.Queries)
	if s.NDCG10 < 0.64 {
		t.Errorf("nDCG@10 = %.4f < 0.64", s.NDCG10)
	}
	if testing.Short() {
		return
	}

	// Alternatives, for the record.
	variant := func(name string, comb func(*fieldScores) float64) {
		v := runQueries(t, ds, func(q string) []string { return ix.rankWith(t, q, 100, comb) })
		t.Logf("scifact %-32s nDCG@10 %.4f  Recall@100 %.4f", name, v.NDCG10, v.Recall100)
	}
	variant("sum of fields", func(fs *fieldScores) float64 { return fs[0] + fs[1] })
	variant("best_fields, title boost 2", func(fs *fieldScores) float64 {
		a, b := 2*fs[0], fs[1]
		return max(a, b) + TieBreaker*min(a, b)
	})
	variant("text field only", func(fs *fieldScores) float64 { return fs[1] })
	native := runQueries(t, ds, func(q string) []string { return ix.bleveNative(t, q, 100) })
	t.Logf("scifact %-32s nDCG@10 %.4f  Recall@100 %.4f", "Bleve's own bm25 (match, OR)", native.NDCG10, native.Recall100)
}

// TestClassicCollections reports BM25 on Cranfield, CISI and CACM. There is
// no published bar on these BEIR-converted copies; the floors sit about 0.05
// below what this scorer measured when it was written (0.529, 0.391, 0.480)
// so that a regression in the analyzer or the scorer fails.
func TestClassicCollections(t *testing.T) {
	if testing.Short() {
		t.Skip("quality report; skipped in -short")
	}
	for _, tc := range []struct {
		set   string
		floor float64
	}{{"cranfield", 0.48}, {"cisi", 0.34}, {"cacm", 0.43}} {
		ds := loadShared(t, tc.set)
		ix := buildIndex(t, ds.Corpus)
		s := runQueries(t, ds, func(q string) []string { return ix.ids(t, q, 100) })
		t.Logf("%-9s BM25: nDCG@10 %.4f  Recall@100 %.4f  MRR@10 %.4f  MAP %.4f  (%d queries)",
			tc.set, s.NDCG10, s.Recall100, s.MRR10, s.MAP, s.Queries)
		if s.NDCG10 < tc.floor {
			t.Errorf("%s nDCG@10 = %.4f < %.2f", tc.set, s.NDCG10, tc.floor)
		}
	}
}

// rankWith ranks all candidates with another field combination.
func (ix *Index) rankWith(t testing.TB, q string, k int, comb func(*fieldScores) float64) []string {
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		t.Fatal(err)
	}
	all := &allDocs{comb: comb}
	terms, err := queryTerms(q, st, snap.live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scoreFields(context.Background(), snap, st, terms, nil, all, parallelism{workers: 1}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range all.docs {
		id, err := snap.externalID(all.docs[i].doc)
		if err != nil {
			t.Fatal(err)
		}
		all.docs[i].id = id
	}
	docs := all.docs
	sort.Slice(docs, func(i, j int) bool {
		if docs[i].s != docs[j].s {
			return docs[i].s > docs[j].s
		}
		return docs[i].id < docs[j].id
	})
	var out []string
	for i := 0; i < len(docs) && i < k; i++ {
		out = append(out, docs[i].id)
	}
	return out
}

// allDocs collects every matching document, scored by comb.
type allDocs struct {
	comb func(*fieldScores) float64
	docs []scoredDoc
}

type scoredDoc struct {
	doc uint64
	id  string // filled in after scoring
	s   float64
}

func (a *allDocs) threshold() float64 { return 0 }

func (a *allDocs) collect(doc uint64, fs *fieldScores) {
	a.docs = append(a.docs, scoredDoc{doc: doc, s: a.comb(fs)})
}

// bleveNative runs Bleve's own scoring: a match query (OR) on each field,
// combined in a disjunction.
func (ix *Index) bleveNative(t testing.TB, q string, k int) []string {
	var qs []query.Query
	for _, f := range fields {
		m := bleve.NewMatchQuery(q)
		m.SetField(f)
		qs = append(qs, m)
	}
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), k, 0, false)
	res, err := ix.bi.Search(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.ID
	}
	return out
}
