package recipe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/eval/retrieval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/rerank"
)

// measureMode is one row of a measurement, as annactl eval's.
type measureMode struct {
	key string
	of  engine.Mode // "" for a retrieval mode
	rrf bool
}

var measureModes = []measureMode{
	{"lexical", "", false}, {"hybrid", "", false},
	{"lexical+rerank", engine.ModeLexical, false}, {"hybrid+rerank", engine.ModeHybrid, false},
	{"lexical+rerank+rrf", engine.ModeLexical, true}, {"hybrid+rerank+rrf", engine.ModeHybrid, true},
}

// measure evaluates the reranker in modelDir on dir's test split — BM25
// and hybrid top 100, as annactl eval --record does — records each rerank
// mode's nDCG@10 against its candidates' in its manifest, and writes the
// table to Work/eval-NAME.json. Pairs are scored once across the modes and
// kept in Work/scores-NAME-FP.txt, so a stopped measurement goes on.
func (b *build) measure(ctx context.Context, dir, modelDir string) error {
	c := &b.cfg
	name := filepath.Base(filepath.Clean(dir))
	stage := "measure " + name + " test"
	key := fmt.Sprintf("measure:%s:%d", dir, c.Depth)
	if b.st.Done[key] {
		return nil
	}
	b.enter(stage)
	t0 := time.Now()
	defer func() { b.took[stage] += time.Since(t0) }()
	ds, err := beir.Load(dir, "test")
	if err != nil {
		return err
	}
	eng, sc, closeAll, err := b.scoredIndex(ctx, dir, name, modelDir, stage, ds.Corpus)
	if err != nil {
		return err
	}
	defer closeAll()
	qids := retrieval.JudgedQueries(ds)
	runs := map[string]eval.Run{}
	// The candidate lists first: they say how many pairs there are to score
	// (each document's text as the engine hands it to the reranker).
	pairs := map[[16]byte]bool{}
	b.meter = meter{}
	for _, m := range measureModes[:2] {
		run, err := b.searchAll(ctx, eng, ds, qids, m, stage+": "+m.key+" candidates")
		if err != nil {
			return err
		}
		runs[m.key] = run
	}
	texts := make(map[string]string, len(ds.Corpus))
	for _, d := range ds.Corpus {
		texts[d.ID] = engine.EmbedText(engine.Document(d))
	}
	for q, hits := range runs["lexical"] {
		for _, list := range [][]eval.Hit{hits, runs["hybrid"][q]} {
			for _, h := range list[:min(c.Depth, len(list))] {
				pairs[pairKey(ds.Queries[q], texts[h.ID])] = true
			}
		}
	}
	had := 0
	for k := range pairs {
		if _, ok := sc.scores[k]; ok {
			had++
		}
	}
	b.logf("%s: %d judged queries, %d (query, document) pairs to score (top %d of BM25 and of hybrid), %d scored before", stage, len(qids), len(pairs), c.Depth, had)
	b.meter = meter{base: had}
	scored := had
	b.report(stage+": rerank", "pairs", scored, len(pairs), "")
	sc.onScored = func(n int) {
		scored += n
		b.report(stage+": rerank", "pairs", scored, len(pairs), "")
	}
	for _, m := range measureModes[2:] {
		run, err := b.searchAll(ctx, eng, ds, qids, m, "")
		if err != nil {
			return err
		}
		runs[m.key] = run
	}
	isQuery := retrieval.IsQueryDoc(ds)
	scores := map[string]eval.Scores{}
	table := map[string]map[string]any{}
	for _, m := range measureModes {
		run := runs[m.key]
		run.DropIdentical(isQuery) // BEIR's rule, as annactl eval applies it
		s := eval.Evaluate(run.IDs(), ds.Qrels)
		scores[m.key] = s
		table[m.key] = map[string]any{"ndcg@10": s.NDCG10, "recall@100": s.Recall100, "mrr@10": s.MRR10, "map": s.MAP, "queries": s.Queries}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	var ms []model.Measurement
	for _, m := range measureModes[2:] {
		x := model.Measurement{Dataset: name, Split: "test", Candidates: string(m.of), Depth: c.Depth, Fusion: m.rrf, Metric: "ndcg@10",
			Before: scores[string(m.of)].NDCG10, After: scores[m.key].NDCG10, Queries: len(qids), Date: now}
		if m.of != engine.ModeLexical {
			x.Embedder = eng.Model().Fingerprint
		}
		ms = append(ms, x)
		how := "its order"
		if m.rrf {
			how = "fused by RRF"
		}
		b.logf("%s: %s top %d reranked, %s: nDCG@10 %.4f → %.4f", stage, m.of, c.Depth, how, x.Before, x.After)
	}
	if err := model.RecordMeasurements(modelDir, ms); err != nil {
		return err
	}
	bs, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(c.Work, "eval-"+name+".json"), append(bs, '\n')); err != nil {
		return err
	}
	return b.done(key)
}

// searchAll searches every query in mode m, two at a time (as annactl
// eval), reporting queries done under label when it is set.
func (b *build) searchAll(ctx context.Context, eng *engine.Engine, ds *beir.Dataset, qids []string, m measureMode, label string) (eval.Run, error) {
	opts := engine.SearchOptions{Mode: engine.ModeHybrid, K: 100, Depth: 100, Fusion: engine.FusionRRF}
	switch {
	case m.of != "":
		opts.Mode, opts.RerankOf, opts.RerankDepth, opts.RerankFusion = engine.ModeRerank, m.of, b.cfg.Depth, m.rrf
	case m.key == "lexical":
		opts.Mode = engine.ModeLexical
	}
	var progress func(done int)
	if label != "" {
		progress = func(done int) { b.report(label, "queries", done, len(qids), "") }
	}
	run, err := retrieval.SearchAll(ctx, eng, ds.Queries, qids, opts, 2, progress)
	if err != nil {
		return run, fmt.Errorf("recipe: %s: %w", m.key, err)
	}
	return run, nil
}

// pairKey names a (query, document text) pair.
func pairKey(query, doc string) [16]byte {
	h := sha256.New()
	h.Write([]byte(query))
	h.Write([]byte{0})
	h.Write([]byte(doc))
	var k [16]byte
	copy(k[:], h.Sum(nil))
	return k
}

// scores is the reranker scoring each pair once across the modes, every
// score appended to a file as it is computed ("KEY BITS" lines: the pair's
// key and the float32's bits, in hex), so that a stopped measurement
// resumes with the same scores, bit for bit.
type scores struct {
	rr       engine.Reranker
	path     string
	mu       sync.Mutex
	scores   map[[16]byte]float32
	f        *os.File
	onScored func(n int) // pairs newly scored, under mu
}

// openScores reads path's scores (a torn last line, left by a kill during
// its write, is cut off) and opens it for appending.
func openScores(path string, rr engine.Reranker) (*scores, error) {
	s := &scores{rr: rr, path: path, scores: map[[16]byte]float32{}}
	bs, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	whole := bytes.LastIndexByte(bs, '\n') + 1
	for i, line := range strings.Split(string(bs[:whole]), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		kb, err1 := hex.DecodeString(k)
		bits, err2 := strconv.ParseUint(v, 16, 32)
		if !ok || err1 != nil || err2 != nil || len(kb) != 16 {
			return nil, fmt.Errorf("recipe: %s:%d: not a \"KEY BITS\" score line (delete the file to score its pairs again)", path, i+1)
		}
		s.scores[[16]byte(kb)] = math.Float32frombits(uint32(bits))
	}
	if s.f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	if err := s.f.Truncate(int64(whole)); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("recipe: %s: %w", path, err)
	}
	if _, err := s.f.Seek(int64(whole), io.SeekStart); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("recipe: %s: %w", path, err)
	}
	return s, nil
}

func (s *scores) close() error { return s.f.Close() }

// Score is engine.Reranker: known pairs from the file, the others scored
// and appended.
func (s *scores) Score(ctx context.Context, query string, docs []string) ([]float32, error) {
	ctx = safe.Ctx(ctx)
	out := make([]float32, len(docs))
	keys := make([][16]byte, len(docs))
	var miss []int
	s.mu.Lock()
	for i, d := range docs {
		keys[i] = pairKey(query, d)
		if v, ok := s.scores[keys[i]]; ok {
			out[i] = v
		} else {
			miss = append(miss, i)
		}
	}
	s.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	texts := make([]string, len(miss))
	for j, i := range miss {
		texts[j] = docs[i]
	}
	got, err := s.rr.Score(ctx, query, texts)
	if err != nil {
		return nil, err
	}
	if len(got) != len(texts) {
		return nil, fmt.Errorf("recipe: the reranker returned %d scores for %d documents", len(got), len(texts))
	}
	var buf bytes.Buffer
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for j, i := range miss {
		out[i] = got[j]
		if _, ok := s.scores[keys[i]]; !ok {
			n++
		}
		s.scores[keys[i]] = got[j]
		fmt.Fprintf(&buf, "%x %08x\n", keys[i], math.Float32bits(got[j]))
	}
	if _, err := s.f.Write(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("recipe: %s: %w", s.path, err)
	}
	if s.onScored != nil && n > 0 {
		s.onScored(n)
	}
	return out, nil
}

// scoredIndex opens dir's index (indexing docs where it lacks them) with
// the reranker in modelDir behind its score cache, Work/scores-NAME-FP.txt
// (pairs scored once, kept across stops), and returns the engine and what
// closes it all; the score cache's pairs are the measure's to count.
func (b *build) scoredIndex(ctx context.Context, dir, name, modelDir, stage string, docs []beir.Doc) (*engine.Engine, *scores, func(), error) {
	c := &b.cfg
	var closers []func()
	done := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*engine.Engine, *scores, func(), error) { done(); return nil, nil, nil, err }
	rr, err := rerank.Load(ctx, modelDir, rerank.Options{})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { rr.Close() })
	sc, err := openScores(filepath.Join(c.Work, fmt.Sprintf("scores-%s-%s.txt", name, rr.Manifest().ShortFingerprint())), rr)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { sc.close() })
	enc, _, closeEnc, err := b.embedder(ctx)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, closeEnc)
	eng, err := engine.Open(ctx, b.indexDir(dir), engine.Options{Encoder: enc, Model: c.Embedder, Reranker: sc, Logf: c.Logf})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { eng.Close() })
	if err := b.index(ctx, eng, stage, docs); err != nil {
		return fail(err)
	}
	return eng, sc, done, nil
}
