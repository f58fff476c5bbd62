package recipe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train/adapt"
)

// pseudoName names a Pseudo corpus in stages and measurements.
func pseudoName(dir string) string { return filepath.Base(filepath.Clean(dir)) + " pseudo-queries" }

// checkDoc reports whether the i-th document of a corpus (in its file's
// order) is the pseudo-query check's: every tenth, never trained on.
func checkDoc(i int) bool { return i%10 == 9 }

// pseudoPairs are a corpus's extractive pseudo-queries, each with its
// document as the positive: the training ones (check false: every
// document but every tenth, at most max of them spread evenly; 0 for all)
// or the check's (every tenth document's, at most max).
func pseudoPairs(docs []beir.Doc, check bool, max int) []map[string]any {
	var out []map[string]any
	for i, d := range docs {
		if checkDoc(i) != check {
			continue
		}
		if q := adapt.PseudoQuery(engine.Document{Title: d.Title, Text: d.Text}); q != "" {
			out = append(out, map[string]any{"query": q, "pos_ids": []string{d.ID}})
		}
	}
	if max > 0 && len(out) > max {
		if check {
			return out[:max]
		}
		kept := make([]map[string]any, max)
		for i := range kept {
			kept[i] = out[i*len(out)/max]
		}
		out = kept
	}
	return out
}

// minePseudo mines dir's training pseudo-queries (pseudoPairs) into
// MineDir/mined-pseudo-NAME.jsonl, a query kept only where the teacher
// ranks its document first, and writes the training file
// MineDir/mined-pseudo-NAME-cloze.jsonl: each query cut out of its
// positive (adapt.Cloze: matching the words given teaches nothing).
func (b *build) minePseudo(ctx context.Context, dir string) (string, error) {
	c := &b.cfg
	name := filepath.Base(filepath.Clean(dir))
	stage := "mine " + pseudoName(dir)
	pairs := filepath.Join(c.MineDir, "pseudo-"+name+".jsonl")
	mined := filepath.Join(c.MineDir, "mined-pseudo-"+name+".jsonl")
	out := filepath.Join(c.MineDir, "mined-pseudo-"+name+"-cloze.jsonl")
	key := "pseudo:" + dir
	if b.st.Done[key] {
		return out, nil
	}
	b.enter(stage)
	t0 := time.Now()
	defer func() { b.took[stage] += time.Since(t0) }()
	if err := os.MkdirAll(c.MineDir, 0o755); err != nil {
		return "", fmt.Errorf("recipe: %w", err)
	}
	if _, err := os.Stat(pairs); err != nil {
		docs, err := readCorpus(dir)
		if err != nil {
			return "", err
		}
		ps := pseudoPairs(docs, false, c.PseudoQueries)
		if len(ps) == 0 {
			return "", fmt.Errorf("recipe: %s: no document has a title or first sentence of three words or more to make a pseudo-query of", beir.CorpusPath(dir))
		}
		if err := atomicfile.Write(pairs, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, p := range ps {
				if err := enc.Encode(p); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return "", fmt.Errorf("recipe: %w", err)
		}
		b.logf("%s: %d pseudo-queries (titles, else first sentences) of %d documents, every tenth document's kept for the check", stage, len(ps), len(docs))
	}
	err := b.mineWith(ctx, stage, dir, mined, 1, func() (mining.Source, error) {
		return mining.OpenPairs(ctx, pairs, mining.PromptDefaults{})
	})
	if err != nil {
		return "", err
	}
	if fo, err := os.Stat(out); err == nil {
		if fm, err := os.Stat(mined); err == nil && !fo.ModTime().Before(fm.ModTime()) {
			return out, b.done(key) // written from this mining (another build sharing MineDir)
		}
	}
	bs, err := os.ReadFile(mined)
	if err != nil {
		return "", fmt.Errorf("recipe: %w", err)
	}
	if err := atomicfile.Write(out, func(w io.Writer) error {
		dec := json.NewDecoder(bytes.NewReader(bs))
		for dec.More() {
			var rec flagembedding.Record
			if err := dec.Decode(&rec); err != nil {
				return fmt.Errorf("%s: %w", mined, err)
			}
			adapt.Cloze(&rec)
			line, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return "", fmt.Errorf("recipe: %w", err)
	}
	return out, b.done(key)
}

// check measures the reranker in modelDir on dir's check pseudo-queries
// (pseudoPairs, every tenth document's, at most CheckQueries): hybrid's top
// 100 (RRF), its top Depth reranked (replacing its order, and fused with
// its lists by RRF), each scored by nDCG@10 against the pseudo-judgments of
// BM25 fused with the teacher models (adapt.PseudoJudge), and records both
// uses in the model's manifest as split "pseudo" (model.Measurement) —
// what decides, with the judged measurements, whether anna uses the
// reranker unasked.
func (b *build) check(ctx context.Context, dir, modelDir string) error {
	c := &b.cfg
	name := filepath.Base(filepath.Clean(dir))
	stage := "check " + pseudoName(dir)
	key := fmt.Sprintf("check:%s:%d:%d", dir, c.Depth, c.CheckQueries)
	if b.st.Done[key] {
		return nil
	}
	b.enter(stage)
	t0 := time.Now()
	defer func() { b.took[stage] += time.Since(t0) }()
	docs, err := readCorpus(dir)
	if err != nil {
		return err
	}
	var queries []string
	for _, p := range pseudoPairs(docs, true, c.CheckQueries) {
		queries = append(queries, p["query"].(string))
	}
	if len(queries) == 0 {
		return fmt.Errorf("recipe: %s: no pseudo-query to check on", beir.CorpusPath(dir))
	}
	eng, _, closeAll, err := b.scoredIndex(ctx, dir, name, modelDir, stage, docs)
	if err != nil {
		return err
	}
	defer closeAll()
	b.logf("%s: %d pseudo-queries, judged by BM25 fused with %d teacher models", stage, len(queries), len(c.TeacherModels))
	rels, err := adapt.PseudoJudge(ctx, eng, queries, c.TeacherModels)
	if err != nil {
		return err
	}
	b.meter = meter{}
	var before, order, fused float64
	for i, q := range queries {
		var nd [3]float64
		for j, opts := range []engine.SearchOptions{
			{Mode: engine.ModeHybrid, K: 100, Depth: 100, Fusion: engine.FusionRRF},
			{Mode: engine.ModeRerank, RerankOf: engine.ModeHybrid, RerankDepth: c.Depth, K: 100, Depth: 100, Fusion: engine.FusionRRF},
			{Mode: engine.ModeRerank, RerankOf: engine.ModeHybrid, RerankDepth: c.Depth, RerankFusion: true, K: 100, Depth: 100, Fusion: engine.FusionRRF},
		} {
			res, err := eng.Search(ctx, q, opts)
			if err != nil {
				return fmt.Errorf("recipe: %s: %w", stage, err)
			}
			ids := make([]string, len(res))
			for k, r := range res {
				ids[k] = r.ID
			}
			nd[j] = eval.NDCG(ids, rels[i], 10)
		}
		before, order, fused = before+nd[0], order+nd[1], fused+nd[2]
		b.report(stage, "queries", i+1, len(queries), "")
	}
	n := float64(len(queries))
	now := time.Now().UTC().Format(time.RFC3339)
	var ms []model.Measurement
	for _, u := range []struct {
		fusion bool
		after  float64
	}{{false, order}, {true, fused}} {
		ms = append(ms, model.Measurement{Dataset: name, Split: "pseudo", Candidates: string(engine.ModeHybrid), Depth: c.Depth, Fusion: u.fusion,
			Metric: "ndcg@10", Before: before / n, After: u.after / n, Queries: len(queries), Embedder: eng.Model().Fingerprint, Date: now})
	}
	b.logf("%s: hybrid nDCG@10 %.4f against the pseudo-judgments; top %d reranked, its order %.4f, fused by RRF %.4f",
		stage, before/n, c.Depth, order/n, fused/n)
	if err := model.RecordMeasurements(modelDir, ms); err != nil {
		return err
	}
	return b.done(key)
}

// roundAll rounds each value to 3 decimals, for a log line.
func roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*1000) / 1000
	}
	return out
}

// GeneralSets are the collections a general reranker learns from when
// found under a datasets folder (General), each with the split whose
// judgments it trains on; GeneralPseudo those whose pseudo-queries it
// trains on too. The shared sets are these folders' names
// (../shared/datasets).
var (
	GeneralSets   = []Set{{"scifact", "train"}, {"cranfield", "test"}, {"cisi", "test"}, {"cacm", "test"}, {"squad2-dev-half", "dev"}}
	GeneralPseudo = []string{"scifact", "cranfield", "cisi", "cacm"}
)

// General sets c up for a general reranker from the collections under
// datasets: the judgments of every GeneralSets set found there (More) and
// the pseudo-queries of every GeneralPseudo corpus (Pseudo), no Data;
// the collections named in leaveOut are left out of both and measured on
// instead (Evals, their test split): a reranker measured only where it
// never trained. It returns the sets used and left out, for people.
func General(c *Config, datasets string, leaveOut []string) (used, left []string, err error) {
	out := map[string]bool{}
	for _, n := range leaveOut {
		known := false
		for _, s := range GeneralSets {
			known = known || s.Dir == n
		}
		if !known {
			return nil, nil, fmt.Errorf("recipe: leave-out %q is not one of the general sets (%s)", n, generalNames())
		}
		if _, err := os.Stat(beir.QrelsPath(filepath.Join(datasets, n), "test")); err != nil {
			return nil, nil, fmt.Errorf("recipe: leave-out %s: measuring on it needs its test split: %w", n, err)
		}
		out[n] = true
		c.Evals = append(c.Evals, filepath.Join(datasets, n))
	}
	c.Data, c.More, c.Pseudo = "", nil, nil
	for _, s := range GeneralSets {
		dir := filepath.Join(datasets, s.Dir)
		if out[s.Dir] {
			left = append(left, s.Dir)
			continue
		}
		if _, err := os.Stat(beir.QrelsPath(dir, s.Split)); err != nil {
			continue
		}
		c.More = append(c.More, Set{Dir: dir, Split: s.Split})
		used = append(used, s.Dir+" "+s.Split)
	}
	for _, n := range GeneralPseudo {
		dir := filepath.Join(datasets, n)
		if out[n] {
			continue
		}
		if _, err := os.Stat(beir.CorpusPath(dir)); err != nil {
			continue
		}
		c.Pseudo = append(c.Pseudo, dir)
		used = append(used, n+" pseudo-queries")
	}
	if len(c.More) == 0 && len(c.Pseudo) == 0 {
		return nil, nil, fmt.Errorf("recipe: %w: none of the general sets (%s) is in %s: the shared datasets folder holds them (BEIR folders: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)", ErrData, generalNames(), datasets)
	}
	return used, left, nil
}

func generalNames() string {
	var n []string
	for _, s := range GeneralSets {
		n = append(n, s.Dir)
	}
	return strings.Join(n, ", ")
}
