package dense

import (
	"math"
	"testing"
)

// TestDocScore: a document whose first passage is its best, or of
// BestFrom passages or more, scores its best passage's cosine exactly;
// otherwise the mix, which is at most the best cosine and grows with
// either.
func TestDocScore(t *testing.T) {
	for _, c := range []float32{-1, -0.3, 0, 0.4711, 1} {
		for _, n := range []int{1, 2, BestFrom} {
			if got := DocScore(c, c, n); got != c {
				t.Errorf("DocScore(%v, %v, %d) = %v, want %v exactly", c, c, n, got, c)
			}
		}
	}
	for n := BestFrom; n < BestFrom+3; n++ {
		if got := DocScore(0.2, 0.8, n); got != 0.8 {
			t.Errorf("DocScore(0.2, 0.8, %d) = %v, want the best, 0.8", n, got)
		}
	}
	if got, want := DocScore(0.2, 0.8, 2), float32(FirstWeight*0.2+(1-FirstWeight)*0.8); math.Abs(float64(got-want)) > 1e-7 || got >= 0.8 {
		t.Errorf("DocScore(0.2, 0.8, 2) = %v, want %v", got, want)
	}
	prev := float32(-2)
	for first := float32(-1); first <= 0.8; first += 0.1 {
		got := DocScore(first, 0.8, BestFrom-1)
		if got > 0.8 || got < prev {
			t.Fatalf("DocScore(%v, 0.8) = %v: above the best or below DocScore of a lower first (%v)", first, got, prev)
		}
		prev = got
	}
}

// unit returns the unit vector of dimension 3 at cosine c to e1, in the
// e1-e2 plane (e2 side when side > 0, e3 side otherwise).
func unit(c float32, side int) []float32 {
	s := float32(math.Sqrt(float64(1 - c*c)))
	if side > 0 {
		return []float32{c, s, 0}
	}
	return []float32{c, 0, s}
}

// TestFirstPassageCounts: a long document whose later passage is a little
// nearer the query than a short document, but whose first passage is far
// from it, ranks below the short one (max-passage ranked it first), in
// Search and ExactDocs alike, and is reported at its best passage.
func TestFirstPassageCounts(t *testing.T) {
	q := []float32{1, 0, 0}
	docs := []Doc{
		{ID: "long", Vectors: [][]float32{unit(0.2, 1), unit(0.3, -1), unit(0.85, 1)}},
		{ID: "short", Vectors: [][]float32{unit(0.8, -1)}},
		{ID: "far", Vectors: [][]float32{unit(0.1, 1)}},
	}
	ix := New(Config{Dim: 3})
	mustAddDocs(t, ix, docs...)
	hits := search(t, ix, q, 3, SearchOptions{})
	if len(hits) != 3 || hits[0].ID != "short" || hits[1].ID != "long" || hits[1].Passage != 2 {
		t.Fatalf("got %+v, want short, then long at passage 2", hits)
	}
	if want := DocScore(0.2, 0.85, 3); math.Abs(float64(hits[1].Score-want)) > 1e-5 {
		t.Errorf("long scores %v, want DocScore(0.2, 0.85, 3) = %v", hits[1].Score, want)
	}
	if want := ExactDocs(docs, q, 3); !sameHits(hits, want) {
		t.Fatalf("Search %+v, ExactDocs %+v", hits, want)
	}
	// Well past the window (BestFrom passages), the best passage decides.
	long := Doc{ID: "long", Vectors: [][]float32{unit(0.2, 1)}}
	for len(long.Vectors) < BestFrom-1 {
		long.Vectors = append(long.Vectors, unit(0.3, -1))
	}
	long.Vectors = append(long.Vectors, unit(0.85, 1))
	docs[0] = long
	mustAddDocs(t, ix, long)
	hits = search(t, ix, q, 3, SearchOptions{})
	if len(hits) != 3 || hits[0].ID != "long" || hits[0].Passage != BestFrom-1 || math.Abs(float64(hits[0].Score-0.85)) > 1e-5 {
		t.Fatalf("got %+v, want long first at passage %d scoring 0.85", hits, BestFrom-1)
	}
	if want := ExactDocs(docs, q, 3); !sameHits(hits, want) {
		t.Fatalf("Search %+v, ExactDocs %+v", hits, want)
	}
}

// TestSearchFetchesPastAnUnsureTop: k = 1 and the first request (three
// passages) holds only passages of a document whose first passage is
// orthogonal to the query; a document of one passage found only by a
// larger request scores higher, and Search asks again to find it.
func TestSearchFetchesPastAnUnsureTop(t *testing.T) {
	q := []float32{1, 0, 0}
	docs := []Doc{
		{ID: "a", Vectors: [][]float32{{0, 1, 0}, unit(1, 1), unit(0.99, 1), unit(0.98, -1)}},
		{ID: "b", Vectors: [][]float32{unit(0.9, -1)}},
	}
	ix := New(Config{Dim: 3})
	mustAddDocs(t, ix, docs...)
	var st SearchStats
	hits := search(t, ix, q, 1, SearchOptions{Ef: 1, Stats: &st})
	if len(hits) != 1 || hits[0].ID != "b" {
		t.Fatalf("got %+v, want b (a scores %v)", hits, DocScore(0, 1, 4))
	}
	if st.Fetches < 2 {
		t.Errorf("%d fetches, want a second one past the first three passages", st.Fetches)
	}
	if want := ExactDocs(docs, q, 1); !sameHits(hits, want) {
		t.Fatalf("Search %+v, ExactDocs %+v", hits, want)
	}
}
