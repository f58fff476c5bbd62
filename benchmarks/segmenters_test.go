//go:build segmenters

package benchmarks

// BenchmarkCJKSegmenters (build tag segmenters: the dictionaries are 70 MB
// of modules that nothing else needs) compares how Chinese and Japanese
// text is cut into BM25 terms: package lang's analyzers (Chinese and
// Japanese characters and their bigrams, what anna indexes) against
// dictionary segmenters, go-ego/gse (Jieba's dictionary and algorithm, pure
// Go; its search mode also emits the words inside long words) for Chinese
// and Japanese and ikawaha/kagome with the IPA dictionary (MeCab's, pure
// Go; search mode) for Japanese. Every tokenization is scored by the same
// textbook BM25 (index/lexical's k1 and b, Lucene's idf) on the same
// documents and queries, so only the terms differ: nDCG@10, Recall@100
// and the time to cut the corpus. Run:
//
//	go test -tags segmenters ./benchmarks -run '^$' -bench CJKSegmenters -benchtime 1x
//
// docs/results/multilingual.md holds the table.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-ego/gse"
	"github.com/ikawaha/kagome-dict/ipa"
	"github.com/ikawaha/kagome/v2/tokenizer"

	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/index/lexical"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/lang"
)

type segmenter struct {
	name string
	cut  func(string) []string
}

func BenchmarkCJKSegmenters(b *testing.B) {
	t0 := time.Now()
	var zhSeg, jaSeg gse.Segmenter
	if err := zhSeg.LoadDict(); err != nil {
		b.Fatal(err)
	}
	if err := jaSeg.LoadDict("jp"); err != nil {
		b.Fatal(err)
	}
	gseLoad := time.Since(t0)
	t0 = time.Now()
	kg, err := tokenizer.New(ipa.Dict(), tokenizer.OmitBosEos())
	if err != nil {
		b.Fatal(err)
	}
	kagomeLoad := time.Since(t0)
	b.Logf("dictionaries loaded: gse (zh and jp) %s, kagome IPA %s", gseLoad.Round(time.Millisecond), kagomeLoad.Round(time.Millisecond))

	words := func(ws []string) []string {
		out := ws[:0]
		for _, w := range ws {
			w = strings.ToLower(strings.TrimSpace(w))
			if w != "" && strings.IndexFunc(w, isWordRune) >= 0 {
				out = append(out, w)
			}
		}
		return out
	}
	annaCut := func(code string) func(string) []string {
		a, err := lang.Analyzer(code)
		if err != nil {
			b.Fatal(err)
		}
		return func(s string) []string {
			var out []string
			for _, t := range a.Analyze([]byte(s)) {
				out = append(out, string(t.Term))
			}
			return out
		}
	}
	sets := []struct {
		name, code string
		segs       []segmenter
	}{
		{"xquad-zh", "zh", []segmenter{
			{"anna: characters and bigrams", annaCut("zh")},
			{"gse (Jieba dictionary), search mode", func(s string) []string { return words(zhSeg.CutSearch(s, true)) }},
			{"gse (Jieba dictionary), words", func(s string) []string { return words(zhSeg.Cut(s, true)) }},
		}},
		{"jsquad", "ja", []segmenter{
			{"anna: characters and bigrams", annaCut("ja")},
			{"kagome (IPA dictionary), normal mode (Wakati)", func(s string) []string {
				return words(kg.Wakati(s))
			}},
			{"kagome (IPA dictionary), search mode", func(s string) []string {
				var ws []string
				for _, t := range kg.Analyze(s, tokenizer.Search) {
					ws = append(ws, t.Surface)
				}
				return words(ws)
			}},
			{"gse (its Japanese dictionary), search mode", func(s string) []string { return words(jaSeg.CutSearch(s, true)) }},
		}},
	}
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "\n| set | terms | nDCG@10 | Recall@100 | corpus cut in | terms per document |\n|---|---|---|---|---|---|\n")
	for _, set := range sets {
		ds, err := beir.Load(shareddata.Path(b, "datasets", set.name), "test")
		if err != nil {
			b.Fatal(err)
		}
		qids := make([]string, 0, len(ds.Queries))
		for id := range ds.Queries {
			qids = append(qids, id)
		}
		sort.Strings(qids)
		for _, sg := range set.segs {
			t0 := time.Now()
			docs := make([][]string, len(ds.Corpus))
			terms := 0
			for i, d := range ds.Corpus {
				docs[i] = sg.cut(d.Title + "\n" + d.Text)
				terms += len(docs[i])
			}
			cutTime := time.Since(t0)
			ix := newBM25(docs)
			run := map[string][]string{}
			for _, q := range qids {
				hits := ix.search(sg.cut(ds.Queries[q]), 100)
				ids := make([]string, len(hits))
				for i, h := range hits {
					ids[i] = ds.Corpus[h].ID
				}
				run[q] = ids
			}
			var ndcg, recall float64
			for _, q := range qids {
				ndcg += eval.NDCG(run[q], ds.Qrels[q], 10)
				recall += eval.Recall(run[q], ds.Qrels[q], 100)
			}
			n := float64(len(qids))
			fmt.Fprintf(&tbl, "| %s | %s | %.4f | %.4f | %s | %.0f |\n", set.name, sg.name, ndcg/n, recall/n,
				cutTime.Round(time.Millisecond), float64(terms)/float64(len(docs)))
		}
	}
	fmt.Print(tbl.String()) // b.Log cuts a benchmark's log at 10 lines
}

func isWordRune(r rune) bool {
	return !strings.ContainsRune(" \t\n\r.,!?;:()[]{}\"'、。，．！？：；（）「」『』・…〜ー－—", r)
}

// bm25 is textbook BM25 over term lists (index/lexical's K1 and B,
// Lucene's idf), the same for every segmenter.
type bm25 struct {
	post  map[string][]posting
	lens  []float64
	avgdl float64
}

type posting struct{ doc, tf int }

func newBM25(docs [][]string) *bm25 {
	ix := &bm25{post: map[string][]posting{}, lens: make([]float64, len(docs))}
	total := 0.0
	for i, d := range docs {
		tf := map[string]int{}
		for _, t := range d {
			tf[t]++
		}
		for t, n := range tf {
			ix.post[t] = append(ix.post[t], posting{i, n})
		}
		ix.lens[i] = float64(len(d))
		total += float64(len(d))
	}
	ix.avgdl = total / float64(max(1, len(docs)))
	return ix
}

func (ix *bm25) search(query []string, k int) []int {
	n := float64(len(ix.lens))
	scores := map[int]float64{}
	seen := map[string]bool{}
	for _, t := range query {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.post[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			scores[p.doc] += idf * tf * (lexical.K1 + 1) / (tf + lexical.K1*(1-lexical.B+lexical.B*ix.lens[p.doc]/ix.avgdl))
		}
	}
	out := make([]int, 0, len(scores))
	for d := range scores {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if scores[out[i]] != scores[out[j]] {
			return scores[out[i]] > scores[out[j]]
		}
		return out[i] < out[j]
	})
	return out[:min(k, len(out))]
}
