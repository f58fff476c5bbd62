package lexical

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/anna-search/anna/storage"
)

// bruteBM25 scores every live document against q the slow, obvious way:
// per-field BM25 from the analysed tokens, combined as best_fields.
type bruteBM25 struct {
	ix   *Index
	docs map[string][len(fields)][]string // id -> analysed tokens per field
}

func (b *bruteBM25) tokens(text string) []string {
	var out []string
	for _, tok := range b.ix.analyzer.Analyze([]byte(text)) {
		out = append(out, string(tok.Term))
	}
	return out
}

func (b *bruteBM25) put(d storage.Doc) {
	b.docs[d.ID] = [len(fields)][]string{b.tokens(d.Title), b.tokens(d.Text)}
}

func (b *bruteBM25) search(q string) []Hit {
	N := float64(len(b.docs))
	var hits []Hit
	qtf := map[string]float64{}
	for _, t := range b.tokens(q) {
		qtf[t]++
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
				idf := math.Log(1 + (N-df[f][t]+0.5)/(df[f][t]+0.5))
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
// vocabulary in many small batches (many segments), with upserts and
// deletes between them, and checks every search against brute-force BM25:
// the same scores rank by rank, and each returned ID really has its rank's
// score (ties may order differently only within 1e-9). Top-1 and top-10
// searches mostly take the MaxScore path, top-100 the full one.
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
	bf := &bruteBM25{ix: ix, docs: map[string][len(fields)][]string{}}
	seq := uint64(0)
	searches, prunedSearches := 0, 0
	queries := func() {
		t.Helper()
		for range 25 {
			q := text(1 + rng.IntN(8))
			want := bf.search(q)
			for _, k := range []int{1, 10, 100} {
				got, advanced, err := ix.search(ctx, q, k)
				if err != nil {
					t.Fatal(err)
				}
				searches++
				if advanced > 0 {
					prunedSearches++
				}
				if len(got) != min(k, len(want)) {
					t.Fatalf("%q k=%d: %d hits, want %d", q, k, len(got), min(k, len(want)))
				}
				score := map[string]float64{}
				for _, h := range want {
					score[h.ID] = h.Score
				}
				for i, h := range got {
					if math.Abs(h.Score-want[i].Score) > 1e-9 || math.Abs(score[h.ID]-want[i].Score) > 1e-9 {
						t.Fatalf("%q k=%d rank %d: got %s %.12f (brute force gives it %.12f), want %s %.12f",
							q, k, i+1, h.ID, h.Score, score[h.ID], want[i].ID, want[i].Score)
					}
				}
			}
		}
	}
	for round := range 12 {
		var batch []storage.Doc
		for range 40 + rng.IntN(80) {
			d := storage.Doc{ID: fmt.Sprintf("d%d", rng.IntN(600)), Text: text(1 + rng.IntN(40))}
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
				delete(bf.docs, id)
			}
		}
		queries()
	}
	// Both paths must have been checked: full scoring and MaxScore pruning.
	t.Logf("%d of %d searches pruned", prunedSearches, searches)
	if prunedSearches < searches/10 || prunedSearches == searches {
		t.Fatalf("%d of %d searches pruned: the test no longer covers both paths", prunedSearches, searches)
	}
}
