package lexical

import (
	"context"
	"fmt"
	"github.com/anna-search/anna/lang"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/filtertest"
	"github.com/anna-search/anna/internal/storage"
)

// bruteBM25 scores every live document against q the slow, obvious way:
// per-field BM25 from the analysed tokens, combined as best_fields.
type bruteBM25 struct {
	ix   *Index
	docs map[string][len(fields)][]string // id -> analysed tokens per field
	meta map[string]storage.Doc           // id -> the document (its metadata)
}

func (b *bruteBM25) tokens(text, language string) []string {
	a, err := lang.Analyzer(language)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, tok := range a.Analyze([]byte(text)) {
		out = append(out, string(tok.Term))
	}
	return out
}

func (b *bruteBM25) put(d storage.Doc) {
	l, ok, err := b.ix.LanguageOf(d.ID)
	if err != nil || !ok {
		panic(fmt.Sprintf("LanguageOf(%q): %v %v", d.ID, ok, err))
	}
	prefixed := func(toks []string) []string {
		for i := range toks {
			toks[i] = termPrefix(l) + toks[i]
		}
		return toks
	}
	b.docs[d.ID] = [len(fields)][]string{prefixed(b.tokens(d.Title, l)), prefixed(b.tokens(d.Text, l))}
	d.Language = l
	b.meta[d.ID] = d
}

func (b *bruteBM25) delete(id string) {
	delete(b.docs, id)
	delete(b.meta, id)
}

// matching returns the hits whose document f matches, in order.
func (b *bruteBM25) matching(hits []Hit, f filter.Filter) []Hit {
	var out []Hit
	for _, h := range hits {
		if d := b.meta[h.ID]; f.MatchValues(d.Meta, d.MetaValues) {
			out = append(out, h)
		}
	}
	return out
}

// checkHits fails unless got is the top k of want (all hits, best first),
// rank by rank: the same scores, each returned ID really having its rank's
// score (ties may order differently only within 1e-9).
func checkHits(t *testing.T, what string, k int, got, want []Hit) {
	t.Helper()
	if len(got) != min(k, len(want)) {
		t.Fatalf("%s k=%d: %d hits, want %d", what, k, len(got), min(k, len(want)))
	}
	score := map[string]float64{}
	for _, h := range want {
		score[h.ID] = h.Score
	}
	for i, h := range got {
		s, ok := score[h.ID]
		if !ok || math.Abs(h.Score-want[i].Score) > 1e-9 || math.Abs(s-want[i].Score) > 1e-9 {
			t.Fatalf("%s k=%d rank %d: got %s %.12f (brute force gives it %.12f, listed %v), want %s %.12f",
				what, k, i+1, h.ID, h.Score, s, ok, want[i].ID, want[i].Score)
		}
	}
}

func (b *bruteBM25) search(q string) []Hit {
	N := float64(len(b.docs))
	var hits []Hit
	// The query is read in every language of the documents, each
	// language's terms apart (behind its prefix) and scored with that
	// language's document count as N.
	docsOf := map[string]float64{}
	for _, d := range b.meta {
		docsOf[d.Language]++
	}
	qtf := map[string]float64{}
	nOf := map[string]float64{} // term -> N of its language
	for l, n := range docsOf {
		for _, t := range b.tokens(q, l) {
			t = termPrefix(l) + t
			qtf[t]++
			nOf[t] = n
		}
	}
	var total [len(fields)]float64
	df := [len(fields)]map[string]float64{{}, {}}
	for _, d := range b.docs {
		for f := range fields {
			total[f] += float64(len(d[f]))
			seen := map[string]bool{}
			for _, t := range d[f] {
				if !seen[t] {
					seen[t] = true
					df[f][t]++
				}
			}
		}
	}
	for id, d := range b.docs {
		var fs fieldScores
		for f := range fields {
			avgdl := total[f] / N
			for t, n := range qtf {
				tf := 0.0
				for _, x := range d[f] {
					if x == t {
						tf++
					}
				}
				if tf == 0 {
					continue
				}
				idf := math.Log(1 + (nOf[t]-df[f][t]+0.5)/(df[f][t]+0.5))
				fs[f] += n * idf * tf * (K1 + 1) / (tf + K1*(1-B+B*float64(len(d[f]))/avgdl))
			}
		}
		if fs != (fieldScores{}) {
			best := max(fs[0], fs[1])
			hits = append(hits, Hit{ID: id, Score: best + TieBreaker*(fs[0]+fs[1]-best)})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	return hits
}

// TestScoresMatchBruteForce indexes random documents over a small Zipf-like
// vocabulary, with random metadata, in many small batches (many segments),
// with upserts (which change the metadata too) and deletes between them,
// and checks every search against brute-force BM25: the same scores rank
// by rank, and each returned ID really has its rank's score (ties may
// order differently only within 1e-9). Top-1 and top-10 searches mostly
// take the MaxScore path, top-100 the full one. Each query also runs with
// random filters: the filtered top k must be brute-force BM25 (over the
// whole index) restricted to the live documents the filter matches, which
// for a filter matching fewer than k of the documents holding a query term
// is exactly those; and CountMatching and ForEachMatching must agree with
// filter.MatchValues over the live documents' metadata (strings, numbers,
// lists; ranges among the filters).
func TestScoresMatchBruteForce(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	vocab := make([]string, 80)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%02dx", i) // survives the analyzer as itself
	}
	zipf := func() string { return vocab[int(float64(len(vocab))*math.Pow(rng.Float64(), 2.5))] }
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = zipf()
		}
		return strings.Join(w, " ")
	}
	bf := &bruteBM25{ix: ix, docs: map[string][len(fields)][]string{}, meta: map[string]storage.Doc{}}
	seq := uint64(0)
	searches, prunedSearches := 0, 0
	filtered, prunedFiltered, fewer, empty := 0, 0, 0, 0
	// Each search is scored on one goroutine or spread over two or three,
	// in pieces of a few documents (far below MinParallelDocs), so the
	// shared threshold and the tasks' ranges are checked by the same oracle.
	// Block maxima too: none, or blocks of 1-64 documents for terms with
	// 1-8 postings in a segment, kept across searches (and writes) or
	// computed afresh, in a cache that sometimes holds one entry.
	prng, spread, blocked := rand.New(rand.NewPCG(9, 10)), 0, 0
	setPar := func() {
		ix.par = parallelism{workers: 1 + prng.IntN(3), minPiece: uint64(1 + prng.IntN(64))}
		if ix.par.workers > 1 {
			spread++
		}
		fresh := func() *blockCache {
			return newBlockCache(uint64(1+prng.IntN(64)), uint64(1+prng.IntN(8)), []int{1, 1 << 20}[prng.IntN(2)])
		}
		switch r := prng.IntN(8); {
		case r == 0:
			ix.blocks.close()
			ix.blocks = nil
		case r == 1:
			// computed in the background, used once there
			ix.blocks.close()
			ix.blocks = fresh()
			ix.blocks.fill(func() (*snapshot, io.Closer, error) { return ix.openSnapshot() })
		case r < 4 || ix.blocks == nil:
			ix.blocks.close()
			ix.blocks = fresh()
		}
		if ix.blocks != nil {
			blocked++
		}
	}
	queries := func() {
		t.Helper()
		for range 25 {
			q := text(1 + rng.IntN(8))
			want := bf.search(q)
			for _, k := range []int{1, 10, 100} {
				setPar()
				got, advanced, err := ix.search(ctx, q, k, filter.Filter{})
				if err != nil {
					t.Fatal(err)
				}
				searches++
				if advanced > 0 {
					prunedSearches++
				}
				checkHits(t, fmt.Sprintf("%q", q), k, got, want)
			}
			for range 3 {
				f := filtertest.Random(rng, rng.IntN(4))
				wantF := bf.matching(want, f)
				for _, k := range []int{1, 10, 100} {
					setPar()
					got, advanced, err := ix.search(ctx, q, k, f)
					if err != nil {
						t.Fatal(err)
					}
					filtered++
					if advanced > 0 {
						prunedFiltered++
					}
					switch {
					case len(wantF) == 0:
						empty++
					case len(wantF) < k:
						fewer++
					}
					checkHits(t, fmt.Sprintf("%q filter %s", q, f), k, got, wantF)
				}
			}
		}
		for range 10 {
			f := filtertest.Random(rng, rng.IntN(4))
			want := map[string]bool{}
			for id, d := range bf.meta {
				if f.MatchValues(d.Meta, d.MetaValues) {
					want[id] = true
				}
			}
			n, err := ix.CountMatching(ctx, f)
			if err != nil || n != uint64(len(want)) {
				t.Fatalf("CountMatching(%s) = %d, %v; want %d", f, n, err, len(want))
			}
			got := map[string]bool{}
			err = ix.ForEachMatching(ctx, f, func(id string) error {
				if got[id] || !want[id] {
					return fmt.Errorf("%s: unexpected or repeated", id)
				}
				got[id] = true
				return nil
			})
			if err != nil || len(got) != len(want) {
				t.Fatalf("ForEachMatching(%s): %v, %d of %d documents", f, err, len(got), len(want))
			}
		}
	}
	for round := range 12 {
		var batch []storage.Doc
		for range 40 + rng.IntN(80) {
			d := storage.Doc{ID: fmt.Sprintf("d%d", rng.IntN(600)), Text: text(1 + rng.IntN(40)), Meta: filtertest.Meta(rng), MetaValues: filtertest.MetaValues(rng)}
			if rng.IntN(3) > 0 {
				d.Title = text(1 + rng.IntN(5))
			}
			batch = append(batch, d)
		}
		seq++
		if err := ix.Index(ctx, batch, seq); err != nil {
			t.Fatal(err)
		}
		for _, d := range batch {
			bf.put(d) // later duplicates win, as in Index
		}
		if round%3 == 2 {
			var del []string
			for id := range bf.docs {
				if rng.IntN(5) == 0 {
					del = append(del, id)
				}
			}
			seq++
			if err := ix.Delete(ctx, del, seq); err != nil {
				t.Fatal(err)
			}
			for _, id := range del {
				bf.delete(id)
			}
		}
		queries()
	}
	// Both paths must have been checked: full scoring and MaxScore pruning.
	t.Logf("%d of %d searches pruned; filtered: %d of %d pruned, %d matching fewer than k documents with a query term, %d none; %d spread over goroutines, %d with block maxima",
		prunedSearches, searches, prunedFiltered, filtered, fewer, empty, spread, blocked)
	if blocked < (searches+filtered)/2 {
		t.Fatalf("%d of %d searches with block maxima", blocked, searches+filtered)
	}
	if spread < (searches+filtered)/2 {
		t.Fatalf("%d of %d searches spread over goroutines", spread, searches+filtered)
	}
	if prunedSearches < searches/10 || prunedSearches == searches {
		t.Fatalf("%d of %d searches pruned: the test no longer covers both paths", prunedSearches, searches)
	}
	if prunedFiltered < filtered/10 || prunedFiltered == filtered || fewer < filtered/10 || empty == filtered {
		t.Fatalf("filtered searches: %d of %d pruned, %d fewer than k, %d empty: the test no longer covers every case",
			prunedFiltered, filtered, fewer, empty)
	}
}

// TestTopDocsKeepsTies feeds topDocs documents in orders where the k-th
// best score is tied, and checks that it holds exactly the documents
// scoring at least its k-th best: the ties pushed out of the heap are kept
// until a better document raises the k-th score, then dropped.
func TestTopDocsKeepsTies(t *testing.T) {
	for _, tc := range []struct {
		scores []float64 // document i scores scores[i]
		k      int
		want   string // the documents held, sorted
	}{
		{[]float64{1, 1, 2, 1, 1}, 2, "0 1 2 3 4"},
		{[]float64{1, 1, 1, 2, 2}, 2, "3 4"},
		{[]float64{1, 2, 1, 1, 2}, 3, "0 1 2 3 4"},
		{[]float64{3, 1, 2, 2, 1}, 2, "0 2 3"},
		{[]float64{1, 1}, 5, "0 1"},
	} {
		c := &topDocs{k: tc.k}
		for i, s := range tc.scores {
			c.collect(uint64(i), &fieldScores{s})
		}
		var held []int
		for _, x := range slices.Concat(c.best, c.ties) {
			held = append(held, int(x.doc))
		}
		sort.Ints(held)
		if got := strings.Trim(fmt.Sprint(held), "[]"); got != tc.want {
			t.Errorf("scores %v, k %d: holds %s, want %s", tc.scores, tc.k, got, tc.want)
		}
	}
}
