package eval

import (
	"math"
	"testing"
)

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("%s = %.15f, want %.15f", name, got, want)
	}
}

// A hand-worked example: graded judgments, one judged-irrelevant doc at rank
// 1, a duplicate, and a relevant doc (d9) never retrieved.
//
//	rels   d2:2 d4:1 d9:3 d1:0
//	ranked d1 d2 d3 d4 d2 d5
//	DCG@5  = 2/log2(3) + 1/log2(5)
//	IDCG@5 = 3/log2(2) + 2/log2(3) + 1/log2(4)
//	AP     = (1/2 + 2/4) / 3
func TestMetricsHandWorked(t *testing.T) {
	rels := map[string]int{"d2": 2, "d4": 1, "d9": 3, "d1": 0}
	ranked := []string{"d1", "d2", "d3", "d4", "d2", "d5"}
	near(t, "nDCG@5", NDCG(ranked, rels, 5), 0.35543595158098623)
	near(t, "nDCG@2", NDCG(ranked, rels, 2), 0.2960819109658652)
	near(t, "nDCG@1", NDCG(ranked, rels, 1), 0)
	near(t, "Recall@3", Recall(ranked, rels, 3), 1.0/3)
	near(t, "Recall@5", Recall(ranked, rels, 5), 2.0/3)
	near(t, "Recall@100", Recall(ranked, rels, 100), 2.0/3)
	near(t, "MRR@10", MRR(ranked, rels, 10), 0.5)
	near(t, "MRR@1", MRR(ranked, rels, 1), 0)
	near(t, "AP", AP(ranked, rels), 1.0/3)

	perfect := []string{"d9", "d2", "d4"}
	near(t, "perfect nDCG", NDCG(perfect, rels, 10), 1)
	near(t, "perfect AP", AP(perfect, rels), 1)
	// Swapping grades 3 and 2 costs exactly what the formula says.
	swapped := []string{"d2", "d9", "d4"}
	want := (2 + 3/math.Log2(3) + 1/math.Log2(4)) / (3 + 2/math.Log2(3) + 1/math.Log2(4))
	near(t, "swapped nDCG", NDCG(swapped, rels, 10), want)

	none := map[string]int{"x": 0}
	for name, v := range map[string]float64{
		"ndcg": NDCG(ranked, none, 10), "recall": Recall(ranked, none, 10), "ap": AP(ranked, none), "empty": NDCG(nil, rels, 10),
	} {
		if v != 0 {
			t.Errorf("%s with nothing relevant = %v", name, v)
		}
	}
}

func TestEvaluate(t *testing.T) {
	qrels := map[string]map[string]int{
		"q1": {"a": 1},
		"q2": {"b": 1, "c": 1},
		"q3": {"z": 1}, // not in the run: counts as 0
		"q4": {"n": 0}, // nothing relevant: skipped
	}
	run := map[string][]string{
		"q1":    {"a", "x"},
		"q2":    {"x", "c"},
		"extra": {"a"}, // unjudged: ignored
	}
	s := Evaluate(run, qrels)
	if s.Queries != 3 {
		t.Fatalf("queries = %d, want 3", s.Queries)
	}
	ndcgQ2 := (1 / math.Log2(3)) / (1 + 1/math.Log2(3))
	near(t, "NDCG10", s.NDCG10, (1+ndcgQ2+0)/3)
	near(t, "Recall100", s.Recall100, (1+0.5+0)/3)
	near(t, "MRR10", s.MRR10, (1+0.5+0)/3)
	near(t, "MAP", s.MAP, (1+0.25+0)/3)
}
