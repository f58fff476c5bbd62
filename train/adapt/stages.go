package adapt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unicode"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/train"
)

func (r *run) path(name string) string { return filepath.Join(r.cfg.Work, name) }

// openIndex opens the index with its recorded model.
func (r *run) openIndex(ctx context.Context) (*engine.Engine, error) {
	eng, err := engine.Open(ctx, r.cfg.Index, engine.Options{Logf: r.cfg.Logf})
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	return eng, nil
}

// listIDs lists the index's document IDs in byte order.
func listIDs(ctx context.Context, eng *engine.Engine) ([]string, error) {
	return eng.IDs(ctx)
}

// pseudoQuery is a document's extractive pseudo-query: its title when it
// has at least three words, else its first sentence (at most 32 words);
// "" when neither has three words.
func pseudoQuery(d engine.Document) string {
	if t := strings.Join(strings.Fields(d.Title), " "); len(strings.Fields(t)) >= 3 {
		return t
	}
	text := d.Text
	if i := strings.IndexFunc(text, func(c rune) bool { return c == '.' || c == '?' || c == '!' || c == '\n' }); i > 0 {
		text = text[:i]
	}
	w := strings.Fields(text)
	if len(w) < 3 {
		return ""
	}
	return strings.Join(w[:min(32, len(w))], " ")
}

type pair struct {
	Query  string   `json:"query"`
	PosIDs []string `json:"pos_ids"`
}

// queries is stage 1: Work/train.jsonl and Work/heldout.jsonl, pairs of a
// query and its candidate positive; every tenth query held out.
func (r *run) queries(ctx context.Context) error {
	c := &r.cfg
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	var all []pair
	ids, err := listIDs(ctx, eng)
	if err != nil {
		return fmt.Errorf("adapt: listing the index's documents: %w", err)
	}
	if len(ids) < c.Group {
		return fmt.Errorf("adapt: the index holds %d documents; at least Group (%d) are needed", len(ids), c.Group)
	}
	if !c.NoExtractive {
		for i := 0; i < len(ids); i += 256 {
			docs, err := eng.Get(ctx, ids[i:min(i+256, len(ids))]...)
			if err != nil {
				return fmt.Errorf("adapt: %w", err)
			}
			for _, d := range docs {
				if q := pseudoQuery(d); q != "" {
					all = append(all, pair{q, []string{d.ID}})
				}
			}
			r.report("documents", min(i+256, len(ids)), len(ids))
		}
	}
	if c.Queries != "" {
		logged, err := readLog(c.Queries)
		if err != nil {
			return err
		}
		for i, q := range logged {
			res, err := eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeHybrid, K: 1})
			if err != nil {
				return fmt.Errorf("adapt: %s: query %d: %w", c.Queries, i+1, err)
			}
			if len(res) > 0 {
				all = append(all, pair{q, []string{res[0].ID}})
			}
			r.report("logged queries", i+1, len(logged))
		}
	}
	if c.MaxQueries > 0 && len(all) > c.MaxQueries {
		all = all[:c.MaxQueries]
	}
	var tr, held []pair
	for i, p := range all {
		if i%10 == 9 || (len(all) < 10 && i == len(all)-1 && len(all) > 1) {
			held = append(held, p)
		} else {
			tr = append(tr, p)
		}
	}
	if len(tr) == 0 || len(held) == 0 {
		return fmt.Errorf("adapt: %d queries (from %d documents and the query log): too few to train and hold some out", len(all), len(ids))
	}
	for name, ps := range map[string][]pair{"train.jsonl": tr, "heldout.jsonl": held} {
		if err := atomicfile.Write(r.path(name), func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, p := range ps {
				if err := enc.Encode(p); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("adapt: %w", err)
		}
	}
	r.st.Report.Queries, r.st.Report.HeldOut = len(tr), len(held)
	r.st.Report.Estimate = r.estimate(ctx, eng, ids, len(tr), len(held))
	r.logf("%d queries for training, %d held out; estimated time on this machine: %s (from the measured time to embed a document)",
		len(tr), len(held), r.st.Report.Estimate.Round(time.Second))
	return nil
}

// readLog reads a query log: one query a line, blank lines skipped.
func readLog(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("adapt: query log: %w", err)
	}
	defer f.Close()
	var qs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		q := strings.TrimSpace(sc.Text())
		if q == "" {
			continue
		}
		if strings.IndexFunc(q, func(c rune) bool { return c == unicode.ReplacementChar }) >= 0 {
			return nil, fmt.Errorf("adapt: %s:%d: not UTF-8 text", path, n)
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("adapt: %s: %w", path, err)
	}
	return qs, nil
}

// estimate is the run's time from the counted work and the measured time
// to embed one document with the index's model (up to 8 embedded, the
// first call's warm-up left out): mining scores ~2 texts a query,
// training a step ~3× (forward and backward) its batch's texts, the check
// 2 models × Group texts a held-out query, the reindex every document once.
func (r *run) estimate(ctx context.Context, eng *engine.Engine, ids []string, queries, held int) time.Duration {
	enc, err := eng.LoadEncoder(ctx)
	if err != nil {
		return 0
	}
	docs, err := eng.Get(ctx, ids[:min(9, len(ids))]...)
	if err != nil || len(docs) < 2 {
		return 0
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Title + " " + d.Text
	}
	if _, err := enc.EmbedDocuments(ctx, texts[:1]); err != nil {
		return 0
	}
	t := time.Now()
	if _, err := enc.EmbedDocuments(ctx, texts[1:]); err != nil {
		return 0
	}
	per := time.Since(t) / time.Duration(len(texts)-1)
	c := &r.cfg
	units := 2*(queries+held) + 3*c.Steps*c.BatchQueries*(c.Group+1) + 2*held*c.Group + len(ids)
	return per * time.Duration(units)
}

// miner builds the calibrated fusion teacher over eng (BM25, the index's
// model, TeacherModel's cosine) and a miner; calibrated on train.jsonl, the
// calibration kept in Work/teacher.json.
func (r *run) miner(ctx context.Context, eng *engine.Engine, progress func(done, total int)) (*mining.Miner, func(), error) {
	c := &r.cfg
	enc, err := eng.LoadEncoder(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("adapt: %w", err)
	}
	signals := []mining.Teacher{mining.MaxNormalized{Teacher: mining.EngineLexical{E: eng}},
		&mining.DenseTeacher{Enc: enc, Label: "dense:" + eng.Model().Label(), Vectors: mining.StoredVectors(eng)}}
	closeAll := func() {}
	if c.TeacherModel != "" {
		t, err := encoder.Load(ctx, c.TeacherModel, encoder.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("adapt: the teacher model: %w", err)
		}
		closeAll = func() { t.Close() }
		signals = append(signals, &mining.DenseTeacher{Enc: t, Label: "dense:" + t.Manifest().Name})
	}
	teacher := &mining.FusionTeacher{Signals: signals}
	opt := mining.DefaultOptions()
	opt.Negatives, opt.Seed, opt.Resume, opt.Workers, opt.RequireTop = c.Group-1, c.Seed, true, runtime.GOMAXPROCS(0), 1
	opt.Progress = progress
	m, err := mining.New(&mining.EngineRetriever{E: eng, Mode: engine.ModeHybrid}, teacher, mining.EngineCorpus{E: eng}, opt)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	path := r.path("teacher.json")
	if bs, err := os.ReadFile(path); err == nil {
		var cal mining.Calibration
		if err := json.Unmarshal(bs, &cal); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("adapt: %s: %w (delete it to calibrate again)", path, err)
		}
		teacher.Cal = &cal
		return m, closeAll, nil
	}
	src, err := mining.OpenPairs(ctx, r.path("train.jsonl"), mining.PromptDefaults{})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	defer src.Close()
	r.logf("calibrating the fusion teacher on up to 256 pseudo-queries")
	cal, err := m.Calibrate(ctx, src, 256, teacher)
	if err == nil {
		var bs []byte
		if bs, err = json.MarshalIndent(cal, "", "  "); err == nil {
			err = atomicfile.WriteBytes(path, append(bs, '\n'))
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("adapt: calibrating the teacher: %w", err)
	}
	return m, closeAll, nil
}

// mine is stage 2: Work/mined.jsonl (training) and Work/heldout-mined.jsonl
// (the check's pseudo-labels), each query's positive kept only when the
// teacher ranks it first.
func (r *run) mine(ctx context.Context) error {
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	for _, f := range [][2]string{{"train.jsonl", "mined.jsonl"}, {"heldout.jsonl", "heldout-mined.jsonl"}} {
		src, err := mining.OpenPairs(ctx, r.path(f[0]), mining.PromptDefaults{})
		if err != nil {
			return err
		}
		total := src.Len()
		m, closeAll, err := r.miner(ctx, eng, func(done, _ int) { r.report("queries ("+f[0]+")", done, total) })
		if err != nil {
			src.Close()
			return err
		}
		r.t0 = time.Time{}
		st, err := m.Run(ctx, src, r.path(f[1]))
		src.Close()
		closeAll()
		if err != nil {
			return err
		}
		r.logf("mined %s: %d examples from %d queries; %d positives the teacher did not rank first left out", f[0], st.Examples, st.Units, st.FilteredPositives)
		if f[0] == "train.jsonl" {
			r.st.Report.Examples, r.st.Report.Filtered = st.Examples, st.FilteredPositives
			if st.Examples == 0 {
				return errors.New("adapt: the teacher ranked no training query's source document first: nothing to train on")
			}
		}
	}
	return nil
}

// base is the student's starting checkpoint: Config.Base, else the index
// model's recorded training source.
func (r *run) base(eng *engine.Engine) (string, error) {
	if r.cfg.Base != "" {
		return r.cfg.Base, nil
	}
	dir := eng.Model().Dir
	man, err := model.LoadManifest(dir)
	if err != nil || man.Source == "" {
		return "", fmt.Errorf("adapt: the index's model (%q) records no checkpoint to train from: give Base (--base) (%v)", dir, err)
	}
	return man.Source, nil
}

// train is stage 3: the student, contrastive with distillation, in
// Work/student (checkpoint/, model/), resuming from its checkpoint.
func (r *run) train(ctx context.Context) error {
	c := &r.cfg
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	base, err := r.base(eng)
	eng.Close()
	if err != nil {
		return err
	}
	tc := train.Config{ModelDir: base, Data: r.path("mined.jsonl"), OutDir: r.path("student"), Objective: train.ObjectiveContrastive,
		DistillWeight: c.Distill, MaxLength: c.MaxLength, BatchSize: c.BatchQueries, GroupSize: c.Group, MaxSteps: c.Steps,
		LR: c.LR, Seed: c.Seed, EvalFraction: -1, CheckpointEvery: c.CheckpointEvery, Resume: true, Name: "adapted",
		Progress: func(p train.Progress) {
			if p.Eval == nil {
				r.report("steps", p.Step, p.Steps)
			}
		}}
	res, err := train.Run(ctx, tc)
	if err != nil {
		return err
	}
	r.st.Report.Steps, r.st.Report.Model = res.Steps, res.ModelDir
	return nil
}

// heldExample is a held-out query with the teacher's top document first.
type heldExample struct {
	Query string   `json:"query"`
	Pos   []string `json:"pos"`
	Neg   []string `json:"neg"`
}

// check is stage 4: the student's and the base model's nDCG@10 on the
// held-out queries, the teacher's top document the one relevant among
// its candidates. ErrWorse when the student is below base + MinGain.
func (r *run) check(ctx context.Context) error {
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	baseEnc, err := eng.LoadEncoder(ctx)
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	student, err := encoder.Load(ctx, r.st.Report.Model, encoder.Options{})
	if err != nil {
		return fmt.Errorf("adapt: the student: %w", err)
	}
	defer student.Close()
	bs, err := os.ReadFile(r.path("heldout-mined.jsonl"))
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	var exs []heldExample
	for i, line := range strings.Split(strings.TrimSpace(string(bs)), "\n") {
		var ex heldExample
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &ex); err != nil {
			return fmt.Errorf("adapt: heldout-mined.jsonl:%d: %w", i+1, err)
		}
		if len(ex.Pos) > 0 && len(ex.Neg) > 0 {
			exs = append(exs, ex)
		}
	}
	if len(exs) == 0 {
		return fmt.Errorf("%w: no held-out query kept a teacher-confirmed document, so nothing shows the student is not worse; the index is left on its model", ErrWorse)
	}
	var sb, ss float64
	for i, ex := range exs {
		b, err := ndcg(ctx, baseEnc, ex)
		if err != nil {
			return err
		}
		s, err := ndcg(ctx, student, ex)
		if err != nil {
			return err
		}
		sb, ss = sb+b, ss+s
		r.report("held-out queries", i+1, len(exs))
	}
	rep := &r.st.Report
	rep.BaseScore, rep.StudentScore, rep.CheckQueries = sb/float64(len(exs)), ss/float64(len(exs)), len(exs)
	r.logf("held-out check on %d queries: nDCG@10 of the teacher's top document, the index's model %.4f, the adapted model %.4f", len(exs), rep.BaseScore, rep.StudentScore)
	if rep.StudentScore < rep.BaseScore+r.cfg.MinGain {
		return fmt.Errorf("adapt: %w (nDCG@10 %.4f against %.4f on %d held-out queries, %g gain required): the index keeps its model; the adapted one is in %s",
			ErrWorse, rep.StudentScore, rep.BaseScore, len(exs), r.cfg.MinGain, rep.Model)
	}
	return nil
}

// ndcg is nDCG@10 of ex's positive among its candidates ranked by enc's
// cosine; ties rank the positive last.
func ndcg(ctx context.Context, enc encoder.Encoder, ex heldExample) (float64, error) {
	q, err := enc.EmbedQueries(ctx, []string{ex.Query}, encoder.Prompt{})
	if err != nil {
		return 0, fmt.Errorf("adapt: %w", err)
	}
	d, err := enc.EmbedDocuments(ctx, append([]string{ex.Pos[0]}, ex.Neg...))
	if err != nil {
		return 0, fmt.Errorf("adapt: %w", err)
	}
	dot := func(a, b []float32) (s float64) {
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	pos, rank := dot(q[0], d[0]), 1
	for _, v := range d[1:] {
		if dot(q[0], v) >= pos {
			rank++
		}
	}
	if rank > 10 {
		return 0, nil
	}
	return 1 / math.Log2(float64(rank)+1), nil
}

// reindex is stage 5: the index re-embedded with the student.
func (r *run) reindex(ctx context.Context) error {
	eng, err := engine.Open(ctx, r.cfg.Index, engine.Options{Logf: r.cfg.Logf, KeepModel: r.cfg.KeepModel})
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	defer eng.Close()
	err = eng.Reindex(ctx, engine.ReindexOptions{Model: r.st.Report.Model, Progress: func(done, total int) { r.report("documents", done, total) }})
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	r.st.Report.Reindexed = true
	return nil
}
