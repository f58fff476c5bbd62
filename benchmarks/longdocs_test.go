package benchmarks

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/tokenizer"
)

// longSciFact builds the long-document set from SciFact's test split.
//
// Every abstract judged relevant to a test query, and 1,500 other abstracts
// (a fixed draw), becomes a document of its own ID and title whose text is
// two unrelated abstracts, then its own abstract, then one more unrelated
// abstract. "Unrelated" abstracts are drawn (fixed seed) from those judged
// relevant to no test query, so no document gains another's relevant text.
// The filler in front is at least minFront model tokens long (more
// abstracts are added until it is), so the relevant text starts past the
// first 256 tokens: a model that reads only the first window never sees it.
// Queries and judgments are SciFact's test split, unchanged.
func longSciFact(tb testing.TB, tok func(string) int, minFront int) (*beir.Dataset, int) {
	ds, relevant := sciFactTest(tb)
	var filler, others []beir.Doc
	for _, d := range ds.Corpus {
		if !relevant[d.ID] {
			filler = append(filler, d)
			others = append(others, d)
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	var keep []beir.Doc
	for _, d := range ds.Corpus {
		if relevant[d.ID] {
			keep = append(keep, d)
		}
	}
	keep = append(keep, others[:1500]...)
	sort.Slice(keep, func(i, j int) bool { return keep[i].ID < keep[j].ID })
	pick := func(not string) string {
		for {
			f := filler[rng.IntN(len(filler))]
			if f.ID != not {
				return f.Text
			}
		}
	}
	fronts := 0
	out := &beir.Dataset{Queries: ds.Queries, Qrels: ds.Qrels}
	for _, d := range keep {
		front := pick(d.ID) + " " + pick(d.ID)
		for tok(front) < minFront {
			front += " " + pick(d.ID)
		}
		fronts += tok(front)
		d.Text = front + " " + d.Text + " " + pick(d.ID)
		out.Corpus = append(out.Corpus, d)
	}
	return out, fronts / len(keep)
}

// BenchmarkLongDocuments compares dense and hybrid nDCG@10 on long
// documents (longSciFact) with chunking (windows of the model's max length,
// half a window apart, ranked by the best passage) against without (each
// document truncated to its first 256 tokens), with each index's size on
// disk and indexing time. No embedding cache: both indexings embed every
// text, so the times compare (on 2 cores the chunked one takes minutes).
//
//	go test -v ./benchmarks -run '^$' -bench LongDocuments -benchtime 1x -timeout 90m
func BenchmarkLongDocuments(b *testing.B) {
	modelDir, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	enc, err := encoder.Load(ctx, modelDir, encoder.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	tok, err := tokenizer.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	defer tok.Close()
	ds, front := longSciFact(b, tok.Count, 300)
	b.Logf("long SciFact: %d documents, %d queries; relevant text starts after %d model tokens on average", len(ds.Corpus), len(ds.Queries), front)
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	for i := 0; i < b.N; i++ {
		for _, c := range []struct {
			name string
			ch   engine.Chunking
		}{{"truncated", engine.Chunking{Off: true}}, {"chunked", engine.Chunking{}}} {
			dir := b.TempDir()
			eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc, Model: modelDir, Chunking: c.ch})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := ingest.Slice(ctx, eng, ds.Corpus, ingest.Options{Batch: 256}); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			if err := eng.Flush(); err != nil {
				b.Fatal(err)
			}
			size := dirSize(b, dir)
			for _, mode := range []engine.Mode{engine.ModeDense, engine.ModeHybrid} {
				run := map[string][]string{}
				for _, q := range qids {
					res, err := eng.Search(ctx, ds.Queries[q], engine.SearchOptions{Mode: mode, K: 100})
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						run[q] = append(run[q], r.ID)
					}
				}
				s := eval.Evaluate(run, ds.Qrels)
				b.Logf("%s %s: nDCG@10 %.4f, Recall@100 %.4f", c.name, mode, s.NDCG10, s.Recall100)
				b.ReportMetric(s.NDCG10, c.name+"_"+string(mode)+"_ndcg@10")
			}
			st, err := eng.Stats()
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: %d documents, %d passages embedded in %s, %.1f MB on disk", c.name, st.DenseDocs, st.DensePassages, took.Round(time.Second), float64(size)/1e6)
			b.ReportMetric(took.Seconds(), c.name+"_index_s")
			b.ReportMetric(float64(size)/1e6, c.name+"_MB")
			eng.Close()
		}
	}
}

func dirSize(tb testing.TB, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// sciFactTest loads SciFact's test split and the IDs of its relevant
// documents (grade > 0).
func sciFactTest(tb testing.TB) (*beir.Dataset, map[string]bool) {
	ds, err := beir.Load(shareddata.Path(tb, "datasets", "scifact"), "test")
	if err != nil {
		tb.Fatal(err)
	}
	relevant := map[string]bool{}
	for _, rels := range ds.Qrels {
		for id, g := range rels {
			if g > 0 {
				relevant[id] = true
			}
		}
	}
	return ds, relevant
}
