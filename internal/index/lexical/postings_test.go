package lexical

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/internal/storage"
	zap "github.com/anna-search/anna/internal/third_party/zapx"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// isPatchedZap reports whether seg was opened by anna's copy of zap.
func isPatchedZap(seg segment.Segment) bool {
	_, ok := seg.(*zap.Segment)
	return ok
}

// posting is what a search reads of one: document, frequency, norm.
type posting struct {
	doc, tf uint64
	norm    float64
}

// TestPostingsAdvance checks that segments are anna's copy of zap (which
// internal/index/lexical registers with scorch) and the postings iterator it
// patches (internal/third_party/zapx: Advance jumps to the target's chunk and skips
// the chunk's earlier entries in one loop) against stepping with Next, on a
// segment whose terms span many chunks (over 1,024 postings), with
// frequencies whose entries take one or two bytes, from every kind of
// start: fresh, mid-chunk, a target in the current chunk, in the next, far
// ahead, in a gap before a chunk's first posting, past the end; on lists
// without deletions and with them.
func TestPostingsAdvance(t *testing.T) {
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{BlockMaxBytes: -1, Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 12000
	// "dense" in 9 of 10 documents, "mid" in 1 of 4, "rare" in 1 of 60:
	// 10,800, 3,000 and 200 postings, so 11, 3 and 1 chunks; a frequency
	// of 64 or more takes two bytes (it is stored shifted left by one);
	// "burst" in runs
	var docs []storage.Doc
	for i := range n {
		var w []string
		for word, p := range map[string]float64{"dense": 0.9, "mid": 0.25, "rare": 1.0 / 60} {
			if rng.Float64() < p {
				tf := 1 + rng.IntN(3)
				if rng.IntN(20) == 0 {
					tf = 60 + rng.IntN(20)
				}
				for range tf {
					w = append(w, word)
				}
			}
		}
		if i/500%3 == 0 {
			// runs of 500 documents with it, 1,000 without: targets
			// whose chunk holds no later posting
			w = append(w, "burst")
		}
		w = append(w, strings.Repeat("pad ", rng.IntN(5)))
		docs = append(docs, storage.Doc{ID: fmt.Sprintf("d%05d", i), Text: strings.Join(w, " ")})
	}
	if err := ix.Index(context.Background(), docs, 1); err != nil {
		t.Fatal(err)
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if len(snap.segs) != 1 {
		t.Fatalf("%d segments, want 1", len(snap.segs))
	}
	if seg := snap.segs[0].Segment(); !isPatchedZap(seg) {
		t.Fatalf("the segment is a %T, not anna's copy of zap's", seg)
	}
	d, err := snap.segs[0].Segment().Dictionary("text")
	if err != nil {
		t.Fatal(err)
	}
	read := func(p segment.Posting) posting {
		return posting{p.Number(), p.Frequency(), postingLength(p)}
	}
	checked := 0
	// deleted: documents a segment's deletions would hide, every third
	// one at random and a run of 2,000 (a list with deletions takes zap's
	// own path: patching it as nextFreqNorm is patched was tried, exact,
	// and 12 % slower on advances of a few postings)
	deleted := roaring.New()
	for doc := range uint32(n) {
		if rng.IntN(3) == 0 || doc >= 5000 && doc < 7000 {
			deleted.Add(doc)
		}
	}
	for _, tc := range []struct {
		term   string // as stemmed
		except *roaring.Bitmap
	}{{"dens", nil}, {"mid", nil}, {"rare", nil}, {"burst", nil}, {"dens", deleted}, {"burst", deleted}} {
		term := tc.term
		if tc.except != nil {
			term += " (with deletions)"
		}
		pl, err := d.PostingsList([]byte(tc.term), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		// the expected postings, read with locations: zap's own path,
		// which the patch leaves alone
		var all []posting
		it := pl.Iterator(true, true, true, nil)
		for p, err := it.Next(); p != nil || err != nil; p, err = it.Next() {
			if err != nil {
				t.Fatal(err)
			}
			if tc.except == nil || !tc.except.Contains(uint32(p.Number())) {
				all = append(all, read(p))
			}
		}
		if len(all) < 100 {
			t.Fatalf("%q: %d postings", term, len(all))
		}
		if pl, err = d.PostingsList([]byte(tc.term), tc.except, nil); err != nil {
			t.Fatal(err)
		}
		it = nil
		// gaps: the postings after a gap of 50 documents or more (in
		// "burst", the first of a run, some of them a chunk's first)
		var gaps []int
		for k := 1; k < len(all); k++ {
			if all[k].doc-all[k-1].doc >= 50 {
				gaps = append(gaps, k)
			}
		}
		for trial := range 200 {
			it = pl.Iterator(true, true, false, it)
			// i: the index in all of the posting the iterator is on
			i, target := -1, uint64(0)
			for {
				step := []uint64{1, 2, 10, 100, 1000, 5000}[rng.IntN(6)]
				target += uint64(rng.Int64N(int64(step)))
				if g, _ := slices.BinarySearch(gaps, i+2); rng.IntN(3) == 0 && g < len(gaps) {
					// into the gap before a posting past the next one
					k := gaps[g]
					target = all[k].doc - uint64(rng.Int64N(int64(all[k].doc-all[k-1].doc)))
				}
				var p segment.Posting
				if trial%3 == 0 && rng.IntN(3) == 0 {
					p, err = it.Next()
					i++
				} else {
					// the posting it is on was read: Advance moves past it
					p, err = it.Advance(target)
					for i++; i < len(all) && all[i].doc < target; i++ {
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				checked++
				if i >= len(all) {
					if p != nil {
						t.Fatalf("%q trial %d target %d: got %v, want the end", term, trial, target, read(p))
					}
					break
				}
				if p == nil || read(p) != all[i] {
					t.Fatalf("%q trial %d target %d: got %v, want %v", term, trial, target, p, all[i])
				}
				target = max(target, all[i].doc)
			}
		}
	}
	t.Logf("%d moves checked", checked)
}
