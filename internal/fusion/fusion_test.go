package fusion

import (
	"math"
	"reflect"
	"testing"
)

func ids(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func score(t *testing.T, rs []Result, id string) float64 {
	t.Helper()
	for _, r := range rs {
		if r.ID == id {
			return r.Score
		}
	}
	t.Fatalf("%s not in results %v", id, ids(rs))
	return 0
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("%s = %.15f, want %.15f", name, got, want)
	}
}

// Two lists: A [x y z] and B (weight 2) [y w]; B repeats y, which counts once.
var (
	listA = List{Name: "bm25", Hits: []Hit{{"x", 10}, {"y", 6}, {"z", 2}}}
	listB = List{Name: "dense", Hits: []Hit{{"y", 0.9}, {"w", 0.3}, {"y", 0.1}}, Weight: 2}
)

func TestRRFHandComputed(t *testing.T) {
	rs := RRF([]List{listA, listB}, 0) // k=60
	near(t, "x", score(t, rs, "x"), 1.0/61)
	near(t, "y", score(t, rs, "y"), 1.0/62+2.0/61)
	near(t, "z", score(t, rs, "z"), 1.0/63)
	near(t, "w", score(t, rs, "w"), 2.0/62)
	if got := ids(rs); !reflect.DeepEqual(got, []string{"y", "w", "x", "z"}) {
		t.Fatalf("order = %v", got)
	}
	y := rs[0]
	want := []Contribution{{"bm25", 2, 6, 1.0 / 62}, {"dense", 1, 0.9, 2.0 / 61}}
	if !reflect.DeepEqual(y.Contributions, want) {
		t.Fatalf("y contributions = %+v, want %+v", y.Contributions, want)
	}
	if len(rs[1].Contributions) != 1 || rs[1].Contributions[0].List != "dense" {
		t.Fatalf("w should have only the dense contribution: %+v", rs[1].Contributions)
	}
	rs = RRF([]List{listA}, 1)
	near(t, "k=1 x", score(t, rs, "x"), 0.5)
}

func TestRRFTies(t *testing.T) {
	// a and b: ranks (1,2) and (2,1): equal score, equal best rank -> by ID.
	rs := RRF([]List{{Name: "A", Hits: []Hit{{"b", 0}, {"a", 0}}}, {Name: "B", Hits: []Hit{{"a", 0}, {"b", 0}}}}, 60)
	if got := ids(rs); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("equal ties: %v", got)
	}
	// With k=1, "b" at rank 1 scores 1/2 and "a" at ranks 3 and 3 scores
	// 1/4+1/4 = 1/2 exactly: the better best rank wins over ID order.
	rs = RRF([]List{
		{Name: "A", Hits: []Hit{{"b", 0}, {"p", 0}, {"a", 0}}},
		{Name: "B", Hits: []Hit{{"q", 0}, {"r", 0}, {"a", 0}}},
	}, 1)
	if score(t, rs, "a") != score(t, rs, "b") {
		t.Fatal("test setup: a and b should tie")
	}
	var pos = map[string]int{}
	for i, r := range rs {
		pos[r.ID] = i
	}
	if pos["b"] > pos["a"] {
		t.Fatalf("tie not broken by best rank: %v", ids(rs))
	}
	if len(RRF(nil, 60)) != 0 || len(RRF([]List{{Name: "empty"}}, 60)) != 0 {
		t.Fatal("empty input gave results")
	}
}

func TestMinMaxHandComputed(t *testing.T) {
	// A: 10, 6, 2 -> 1, 0.5, 0. B: 0.9, 0.3 -> 1, 0, times weight 2.
	rs := ScoreFusion([]List{listA, listB}, MinMax)
	near(t, "y", score(t, rs, "y"), 0.5+2)
	near(t, "x", score(t, rs, "x"), 1)
	near(t, "z", score(t, rs, "z"), 0)
	near(t, "w", score(t, rs, "w"), 0)
	// z and w tie at 0; w's best rank (2) beats z's (3).
	if got := ids(rs); !reflect.DeepEqual(got, []string{"y", "x", "w", "z"}) {
		t.Fatalf("order = %v", got)
	}
	one := ScoreFusion([]List{{Name: "s", Hits: []Hit{{"only", 3}}}}, MinMax)
	near(t, "single hit", one[0].Score, 1)
}

func TestDBSFHandComputed(t *testing.T) {
	// A: mean 6, sample sd sqrt((16+0+16)/2) = 4, range [-6, 18]: (s+6)/24.
	// B: mean 0.6, sample sd sqrt(0.18) = 0.42426..., range mean±3sd.
	rs := ScoreFusion([]List{listA, listB}, DBSF)
	sdB := math.Sqrt(0.18)
	loB := 0.6 - 3*sdB
	near(t, "x", score(t, rs, "x"), 16.0/24)
	near(t, "z", score(t, rs, "z"), 8.0/24)
	near(t, "y", score(t, rs, "y"), 12.0/24+2*(0.9-loB)/(6*sdB))
	near(t, "w", score(t, rs, "w"), 2*(0.3-loB)/(6*sdB))
	if got := ids(rs); !reflect.DeepEqual(got, []string{"y", "w", "x", "z"}) {
		t.Fatalf("order = %v", got)
	}
	one := ScoreFusion([]List{{Name: "s", Hits: []Hit{{"only", 3}}}}, DBSF)
	near(t, "single hit", one[0].Score, 0.5)
}
