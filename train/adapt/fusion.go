package adapt

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/internal/safe"
)

// The fusion stage (stage 6): hybrid retrieval's fusion measured for the
// adapted index. Each of the check's queries (the held-out ones, with the
// extractive pseudo-queries of every tenth document added when fewer than
// minCheckQueries; the user's judged queries with Config.Judged) is
// searched in hybrid mode by the index as it now serves, fused by each of
// fusionsTried, and each top 10 is scored by nDCG@10 against the user's
// judgments or else the check's pseudo-judgments (the top 10 of BM25 fused
// by RRF with every teacher model's whole-corpus retrieval: lists the
// index's hybrid search did not make). Only judged queries choose: another
// fusion than engine.DefaultFusion is recorded as the index's fusion
// (engine.Engine.SetFusion, what `annactl eval --choose-fusion` records)
// when it beats the default by at least FusionMargin. Pseudo-judgments,
// made by RRF, favour RRF where real judgments do not (Cranfield,
// docs/results/adapt.md), so with them the stage reports the scores and
// the index keeps its fusion. Without a teacher model or judged queries
// there is nothing to score the fusions by, and the stage does nothing.

// fusionsTried are the fusions the stage compares.
var fusionsTried = []engine.Fusion{engine.FusionRRF, engine.FusionMinMax, engine.FusionDBSF}

// FusionMargin is how much pseudo-judged nDCG@10 another fusion must gain
// over engine.DefaultFusion before the fusion stage records it.
const FusionMargin = 0.005

// fusion is stage 6: the index's fusion chosen as the package doc says.
func (r *run) fusion(ctx context.Context) error {
	rep := &r.st.Report
	rep.FusionScores, rep.Fusion, rep.FusionQueries = nil, "", 0
	if r.cfg.KeepFusion {
		r.logf("fusion: kept as it is (KeepFusion)")
		return nil
	}
	if r.cfg.Judged == "" && len(r.cfg.TeacherModels) == 0 {
		r.logf("fusion: no teacher model and no judged queries to choose by: the index keeps the default fusion")
		return nil
	}
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	qs, err := r.checkQueries(ctx, eng, true)
	if err != nil {
		return err
	}
	scores, err := r.fusionScores(ctx, eng, qs)
	if err != nil {
		return err
	}
	rep.FusionScores, rep.FusionQueries = map[string]float64{}, len(qs)
	for _, f := range fusionsTried {
		rep.FusionScores[string(f)] = scores[f]
	}
	var parts []string
	for _, f := range fusionsTried {
		parts = append(parts, fmt.Sprintf("%s %.4f", f, scores[f]))
	}
	if r.cfg.Judged == "" {
		// Pseudo-judgments are lists fused by RRF, and they rank RRF
		// above the fusion real judgments prefer (Cranfield: pseudo RRF
		// 0.8172, DBSF 0.8067; judged DBSF 0.5735, RRF 0.5575;
		// docs/results/adapt.md): they report, they do not choose.
		st, err := eng.Stats()
		if err != nil {
			return err
		}
		rep.Fusion = string(st.Fusion)
		r.logf("fusion: hybrid nDCG@10 on %d queries pseudo-judged by BM25 and the teacher models: %s; the index fuses as it did (%s): pseudo-judgments are made by RRF and favour it, so only judged queries (--judged) choose another fusion", len(qs), strings.Join(parts, ", "), st.Fusion)
		return nil
	}
	best := chooseFusion(scores)
	rep.Fusion = string(best)
	why := fmt.Sprintf("adapted: hybrid nDCG@10 on %d queries against your judged queries: %s", len(qs), strings.Join(parts, ", "))
	r.logf("fusion: %s; the index fuses by %s (another fusion is chosen over the default, %s, only %.3f or more above it)", why, best, engine.DefaultFusion, FusionMargin)
	if err := eng.SetFusion(engine.FusionChoice{Fusion: best, Why: why}); err != nil {
		return fmt.Errorf("adapt: recording the fusion: %w", err)
	}
	return nil
}

// chooseFusion is the fusion of scores with the best nDCG@10, another than
// engine.DefaultFusion only FusionMargin or more above it (the first of two
// equal).
func chooseFusion(scores map[engine.Fusion]float64) engine.Fusion {
	best := engine.DefaultFusion
	for _, f := range fusionsTried {
		if scores[f] >= scores[engine.DefaultFusion]+FusionMargin && scores[f] > scores[best] {
			best = f
		}
	}
	return best
}

// checkQueries are the queries the check (and the fusion stage) scores:
// the user's judged ones with Config.Judged, else the held-out ones, with
// extractive pseudo-queries added (withExtractive) when fewer than
// minCheckQueries are held out and always is true or no training query was
// extractive.
func (r *run) checkQueries(ctx context.Context, eng *engine.Engine, always bool) ([]checkQuery, error) {
	if r.cfg.Judged != "" {
		return r.judgedQueries(ctx, eng)
	}
	qs, err := r.heldQueries()
	if err != nil || !(always || r.cfg.NoExtractive) {
		return qs, err
	}
	held, added := len(qs), 0
	if qs, added, err = withExtractive(ctx, eng, qs); added > 0 {
		r.logf("the check adds %d extractive pseudo-queries (every tenth document's) to the %d held out: fewer than %d would decide it alone", added, held, minCheckQueries)
	}
	return qs, err
}

// fusionScores is the mean nDCG@10 of eng's hybrid search of qs fused by
// each of fusionsTried, against each query's judgments (Rels) or else the
// pseudo-judgments of BM25 fused with the teacher models (pseudoRels).
func (r *run) fusionScores(ctx context.Context, eng *engine.Engine, qs []checkQuery) (map[engine.Fusion]float64, error) {
	if len(qs) == 0 {
		return nil, fmt.Errorf("adapt: no queries to choose the fusion by")
	}
	var judged []map[string]int
	if slices.ContainsFunc(qs, func(q checkQuery) bool { return q.Rels == nil }) {
		texts := make([]string, len(qs))
		for i, q := range qs {
			texts[i] = q.Text
		}
		var err error
		if judged, err = r.pseudoJudge(ctx, eng, texts); err != nil {
			return nil, err
		}
	}
	sum := map[engine.Fusion]float64{}
	for q, cq := range qs {
		rels := cq.Rels
		if rels == nil {
			rels = judged[q]
		}
		for _, f := range fusionsTried {
			res, err := eng.Search(ctx, cq.Text, engine.SearchOptions{Mode: engine.ModeHybrid, K: checkK, Fusion: f})
			if err != nil {
				return nil, fmt.Errorf("adapt: the fusion stage's hybrid search (%s): %w", f, err)
			}
			ids := make([]string, len(res))
			for i, x := range res {
				ids[i] = x.ID
			}
			sum[f] += eval.NDCG(ids, rels, checkK)
		}
		r.report("fusion queries", q+1, len(qs))
	}
	for f := range sum {
		sum[f] /= float64(len(qs))
	}
	return sum, nil
}

// PseudoJudge returns each query's pseudo-judgments, what the held-out
// check and the fusion stage score by when there are no judged queries:
// the top 10 of BM25's top 100 over eng fused by RRF (k = 60) with each
// teacher model's (model directories) whole-corpus top 100 by exact cosine.
// The teacher models' document vectors go through the shared embedding
// cache ($ANNA_HOME/cache/embeddings): the first call on a corpus embeds it
// with each.
func PseudoJudge(ctx context.Context, eng *engine.Engine, queries, teacherModels []string) ([]map[string]int, error) {
	ctx = safe.Ctx(ctx)
	r := &run{cfg: Config{TeacherModels: teacherModels}}
	return r.pseudoJudge(ctx, eng, queries)
}

// pseudoJudge is PseudoJudge with Config.TeacherModels.
func (r *run) pseudoJudge(ctx context.Context, eng *engine.Engine, queries []string) ([]map[string]int, error) {
	ts, err := r.cachedTeachers(ctx)
	if err != nil {
		return nil, err
	}
	defer closeTeachers(ts)
	if len(ts) == 0 {
		return nil, fmt.Errorf("adapt: pseudo-judgments need a teacher model")
	}
	encs := make([]encoder.Encoder, len(ts))
	k := make([]int, len(ts))
	for i, t := range ts {
		encs[i], k[i] = t.enc, checkDepth
	}
	tops, err := r.rankCorpus(ctx, eng, encs, -1, queries, k)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]int, len(queries))
	for q, text := range queries {
		lex, err := eng.Search(ctx, text, engine.SearchOptions{Mode: engine.ModeLexical, K: checkDepth})
		if err != nil {
			return nil, fmt.Errorf("adapt: BM25 search for the pseudo-judgments: %w", err)
		}
		teachers := make([][]string, len(tops))
		for m := range tops {
			teachers[m] = tops[m][q].ids()
		}
		out[q] = pseudoRels(lex, teachers...)
	}
	return out, nil
}
