// Package eval computes the ranking metrics BEIR reports (nDCG@10,
// Recall@100, MRR@10, MAP) with pytrec_eval's (trec_eval's) semantics.
// Collections in the BEIR layout are read by package beir.
package eval

import (
	"math"
	"sort"
)

// The metrics follow trec_eval as wrapped by pytrec_eval (what BEIR uses):
// a doc is relevant when its grade is > 0; nDCG's gain is the grade itself
// with a log2(rank+1) discount and the ideal ranking built from the judged
// grades; ranked lists are taken in the order given (trec_eval would re-sort
// by score, breaking ties by doc ID) and a doc repeated in a list counts only
// at its first rank.

// NDCG returns nDCG@k of ranked against the graded judgments rels; 0 when no
// doc is relevant.
func NDCG(ranked []string, rels map[string]int, k int) float64 {
	ideal := make([]int, 0, len(rels))
	for _, g := range rels {
		if g > 0 {
			ideal = append(ideal, g)
		}
	}
	if len(ideal) == 0 || k <= 0 {
		return 0
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ideal)))
	var idcg float64
	for i := 0; i < len(ideal) && i < k; i++ {
		idcg += float64(ideal[i]) / math.Log2(float64(i+2))
	}
	var dcg float64
	for i, id := range dedupe(ranked, k) {
		if g := rels[id]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	return dcg / idcg
}

// Recall returns the fraction of relevant docs found in the top k; 0 when no
// doc is relevant.
func Recall(ranked []string, rels map[string]int, k int) float64 {
	n := numRelevant(rels)
	if n == 0 {
		return 0
	}
	found := 0
	for _, id := range dedupe(ranked, k) {
		if rels[id] > 0 {
			found++
		}
	}
	return float64(found) / float64(n)
}

// MRR returns the reciprocal rank of the first relevant doc within the top
// k, 0 if there is none.
func MRR(ranked []string, rels map[string]int, k int) float64 {
	for i, id := range dedupe(ranked, k) {
		if rels[id] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// AP returns the average precision of the whole ranked list: the mean, over
// all relevant docs, of the precision at the rank where each is found
// (relevant docs never found contribute 0).
func AP(ranked []string, rels map[string]int) float64 {
	n := numRelevant(rels)
	if n == 0 {
		return 0
	}
	var sum float64
	found := 0
	for i, id := range dedupe(ranked, len(ranked)) {
		if rels[id] > 0 {
			found++
			sum += float64(found) / float64(i+1)
		}
	}
	return sum / float64(n)
}

// Scores are the means of the metrics over the evaluated queries.
type Scores struct {
	NDCG10, Recall100, MRR10, MAP float64
	Queries                       int
}

// Evaluate scores a run (query ID -> ranked doc IDs) against qrels. The mean
// is over every query in qrels with at least one relevant doc; such a query
// missing from the run, or with an empty list, scores 0 (trec_eval -c
// semantics; pytrec_eval and BEIR skip it instead, which only differs when a
// system returns nothing). Queries with no relevant doc are skipped since no
// metric is defined for them.
func Evaluate(run map[string][]string, qrels map[string]map[string]int) Scores {
	var s Scores
	for qid, rels := range qrels {
		if numRelevant(rels) == 0 {
			continue
		}
		ranked := run[qid]
		s.NDCG10 += NDCG(ranked, rels, 10)
		s.Recall100 += Recall(ranked, rels, 100)
		s.MRR10 += MRR(ranked, rels, 10)
		s.MAP += AP(ranked, rels)
		s.Queries++
	}
	if s.Queries > 0 {
		n := float64(s.Queries)
		s.NDCG10 /= n
		s.Recall100 /= n
		s.MRR10 /= n
		s.MAP /= n
	}
	return s
}

func numRelevant(rels map[string]int) int {
	n := 0
	for _, g := range rels {
		if g > 0 {
			n++
		}
	}
	return n
}

// dedupe returns the first k distinct IDs of ranked, keeping their order.
func dedupe(ranked []string, k int) []string {
	if k > len(ranked) {
		k = len(ranked)
	}
	seen := make(map[string]struct{}, k)
	out := make([]string, 0, k)
	for _, id := range ranked {
		if len(out) == k {
			break
		}
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	return out
}
