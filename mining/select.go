package mining

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// scored is a candidate that survived exclusion, with its teacher score.
type scored struct {
	Candidate
	Teacher float64
}

// prepared is a unit after retrieval and teacher scoring: what sampling needs.
type prepared struct {
	posTexts  []string
	posIDs    []string
	posScores []float64
	kept      []scored // candidates under every threshold, in retrieval order
	stats     Stats
}

// prepare resolves positives, retrieves, excludes, scores and filters one unit.
func (m *Miner) prepare(ctx context.Context, u *Unit) (*prepared, error) {
	p := &prepared{}
	st := &p.stats
	exclude := u.Exclude
	if exclude == nil {
		exclude = map[uint64]struct{}{}
	}
	var posKeys []uint64
	for _, pos := range u.Positives {
		text := pos.Text
		if text == "" {
			t, ok, err := m.corpus.Text(ctx, pos.ID)
			if err != nil {
				return nil, fmt.Errorf("look up positive %q: %w", pos.ID, err)
			}
			if !ok {
				if m.opt.Strict {
					return nil, badInput(fmt.Errorf("positive %q is not in the corpus", pos.ID))
				}
				st.missing(u, pos.ID)
				continue
			}
			text = t
		}
		k := keyText(text)
		if slices.Contains(posKeys, k) {
			// Two positive IDs with one text (duplicate documents): one pair.
			st.DuplicatePairs++
			continue
		}
		st.Pairs++
		posKeys = append(posKeys, k)
		p.posTexts = append(p.posTexts, text)
		p.posIDs = append(p.posIDs, pos.ID)
		exclude[k] = struct{}{}
		if pos.ID != "" {
			exclude[keyID(pos.ID)] = struct{}{}
		}
	}
	if len(p.posTexts) == 0 {
		return p, nil // no positive in the corpus: nothing to mine
	}
	// Ask for extra candidates so that K remain after the positives go.
	want := m.opt.TopK + len(exclude)
	cands, err := m.retriever.Retrieve(ctx, u.Query, want)
	if err != nil {
		return nil, fmt.Errorf("retrieve: %w", err)
	}
	st.Retrieved = len(cands)
	qKey := keyText(u.Query.Text)
	seenText := map[uint64]struct{}{}
	var pool []Candidate
	for _, c := range cands {
		if c.ID != "" {
			if _, ok := exclude[keyID(c.ID)]; ok {
				st.ExcludedPositive++
				continue
			}
		}
		if c.Text == "" {
			t, ok, err := m.corpus.Text(ctx, c.ID)
			if err != nil {
				return nil, fmt.Errorf("look up candidate %q: %w", c.ID, err)
			}
			if !ok {
				return nil, fmt.Errorf("retriever returned %q, which the corpus does not hold", c.ID)
			}
			c.Text = t
		}
		k := keyText(c.Text)
		_, isPos := exclude[k]
		if !isPos && c.Body != "" {
			_, isPos = exclude[keyText(c.Body)]
		}
		if isPos {
			st.ExcludedPositive++
			continue
		}
		if isQueryItself(u, c) {
			st.ExcludedQueryID++
			continue
		}
		if _, ok := seenText[k]; ok || k == qKey {
			// The query itself, or a duplicate document text.
			st.ExcludedSameText++
			continue
		}
		seenText[k] = struct{}{}
		pool = append(pool, c)
	}
	lo, hi := m.opt.RangeMin, m.opt.TopK
	if m.opt.RangeMax > 0 {
		hi = m.opt.RangeMax
	}
	if hi > len(pool) {
		hi = len(pool)
	}
	if lo > hi {
		lo = hi
	}
	st.OutsideWindow = len(pool) - (hi - lo)
	pool = pool[lo:hi]

	// One teacher call per unit: positives and candidates together.
	texts := make([]Doc, 0, len(p.posTexts)+len(pool))
	for i, t := range p.posTexts {
		texts = append(texts, Doc{ID: p.posIDs[i], Text: t})
	}
	for _, c := range pool {
		texts = append(texts, Doc{ID: c.ID, Text: c.Text})
	}
	scores, err := m.teacher.Score(ctx, u.Query, texts)
	if err != nil {
		return nil, fmt.Errorf("teacher %s: %w", m.teacher.Name(), err)
	}
	if len(scores) != len(texts) {
		return nil, fmt.Errorf("teacher %s returned %d scores for %d texts", m.teacher.Name(), len(scores), len(texts))
	}
	for i, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("teacher %s returned %v for text %d", m.teacher.Name(), s, i)
		}
	}
	p.posScores = scores[:len(p.posTexts)]
	candScores := scores[len(p.posTexts):]
	st.Quality.observe(p.posScores, candScores)
	if m.opt.RequireTop > 0 {
		p.requireTop(m.opt.RequireTop, candScores)
		if len(p.posTexts) == 0 {
			return p, nil
		}
	}
	// The lowest positive anchors the margins: a candidate close to any
	// positive's score is too likely an unlabelled positive.
	anchor := slices.Min(p.posScores)
	rel := Threshold(anchor, m.opt.Margin)
	abs := math.Inf(1)
	if !math.IsNaN(m.opt.AbsMargin) {
		abs = anchor - m.opt.AbsMargin
	}
	for i, c := range pool {
		s := candScores[i]
		switch {
		case s > rel:
			st.DroppedMargin++
		case s > abs:
			st.DroppedAbsMargin++
		case !math.IsNaN(m.opt.MaxScore) && s > m.opt.MaxScore:
			st.DroppedCeiling++
		case !math.IsNaN(m.opt.MinScore) && s < m.opt.MinScore:
			st.DroppedFloor++
		default:
			p.kept = append(p.kept, scored{c, s})
		}
	}
	return p, nil
}

// isQueryItself applies evaluation's identical-ID rule (eval.Run.DropIdentical,
// BEIR's ignore_identical_ids) to a candidate: on collections whose queries
// are also documents (ArguAna, Quora, SCIDOCS), the document with the
// query's ID whose text contains the query's is the query itself. It is no
// negative, and ranking it would make every query's top document itself.
// A document that only shares the ID (another numbering) stays.
func isQueryItself(u *Unit, c Candidate) bool {
	if u.QueryID == "" || c.ID != u.QueryID {
		return false
	}
	q := foldText(u.Query.Text)
	return q != "" && (strings.Contains(foldText(c.Text), q) || (c.Body != "" && strings.Contains(foldText(c.Body), q)))
}

// foldText is the form in which the identical-ID rule compares texts: lower
// case, runs of space collapsed (as annactl eval does).
func foldText(s string) string { return strings.ToLower(normText(s)) }

// requireTop keeps the positives the teacher ranks within the top k of
// themselves and the candidates (rank 1 + the candidates scoring at least
// as high), counting the others.
func (p *prepared) requireTop(k int, cand []float64) {
	var texts, ids []string
	var scores []float64
	for i, s := range p.posScores {
		rank := 1
		for _, c := range cand {
			if c >= s {
				rank++
			}
		}
		if rank > k {
			p.stats.FilteredPositives++
			continue
		}
		texts, ids, scores = append(texts, p.posTexts[i]), append(ids, p.posIDs[i]), append(scores, s)
	}
	p.posTexts, p.posIDs, p.posScores = texts, ids, scores
}

// exampleRNG is the sampler for one example. It depends only on the global
// seed and the example's place in the input (unit index, positive index), so
// output is the same whatever the parallelism and across resumes.
func exampleRNG(seed uint64, unit, pos int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, splitmix(uint64(unit)<<20|uint64(pos&0xfffff))))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// sample picks up to n negatives from kept. The result is in retrieval order.
func sample(kept []scored, n int, how Sampling, rng *rand.Rand) []scored {
	if len(kept) <= n {
		return slices.Clone(kept)
	}
	idx := make([]int, len(kept))
	for i := range idx {
		idx[i] = i
	}
	switch how {
	case SampleTop:
		slices.SortStableFunc(idx, func(a, b int) int {
			switch {
			case kept[a].Teacher > kept[b].Teacher:
				return -1
			case kept[a].Teacher < kept[b].Teacher:
				return 1
			}
			return 0
		})
	default:
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	}
	idx = idx[:n]
	slices.Sort(idx)
	out := make([]scored, n)
	for i, j := range idx {
		out[i] = kept[j]
	}
	return out
}
