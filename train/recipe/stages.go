package recipe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model/catalog"
	"github.com/anna-search/anna/train"
)

// embedder loads the embedding model behind the embedding cache, queries
// remembered for the teacher after retrieval.
func (b *build) embedder(ctx context.Context) (encoder.Encoder, string, func(), error) {
	ort, err := encoder.Load(ctx, b.cfg.Embedder, encoder.Options{})
	if err != nil {
		return nil, "", nil, fmt.Errorf("recipe: the embedding model: %w", err)
	}
	c, err := encoder.NewCache(ort, b.cfg.EmbeddingCache)
	if err == nil {
		var memo *mining.QueryMemo
		if memo, err = mining.NewQueryMemo(c, nil, 256); err == nil {
			return memo, ort.Manifest().Name, func() { ort.Close() }, nil
		}
	}
	ort.Close()
	return nil, "", nil, err
}

// index adds docs to eng in batches (ingest.Slice); unchanged documents
// cost a read.
func (b *build) index(ctx context.Context, eng *engine.Engine, stage string, docs []beir.Doc) error {
	_, err := ingest.Slice(ctx, eng, docs, ingest.Options{Batch: 64, Progress: func(pr ingest.Progress) {
		b.report(stage+": index", "documents", pr.Documents, pr.Total, "")
	}})
	return err
}

// indexDir is where a collection is indexed: MineDir/idx for Data (as
// scripts/reranker.sh did), MineDir/idx-NAME for the others.
func (b *build) indexDir(dir string) string {
	if b.cfg.Data != "" && filepath.Clean(dir) == filepath.Clean(b.cfg.Data) {
		return filepath.Join(b.cfg.MineDir, "idx")
	}
	return filepath.Join(b.cfg.MineDir, "idx-"+filepath.Base(filepath.Clean(dir)))
}

// readCorpus reads a BEIR corpus whole.
func readCorpus(dir string) ([]beir.Doc, error) {
	path := beir.CorpusPath(dir)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	defer f.Close()
	var docs []beir.Doc
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error { docs = append(docs, d); return nil })
	return docs, err
}

// mineSet indexes s's corpus and mines its split with the fusion teacher
// into MineDir/mined.jsonl (Data) or MineDir/mined-NAME.jsonl, resuming.
func (b *build) mineSet(ctx context.Context, s Set, i int) (string, error) {
	c := &b.cfg
	isData := c.Data != "" && i == 0
	out := filepath.Join(c.MineDir, "mined.jsonl")
	if !isData {
		out = filepath.Join(c.MineDir, "mined-"+filepath.Base(filepath.Clean(s.Dir))+".jsonl")
	}
	stage := "mine " + setName(s)
	key := "mine:" + s.Dir + ":" + s.Split
	if b.st.Done[key] {
		return out, nil
	}
	b.enter(stage)
	t0 := time.Now()
	defer func() { b.took[stage] += time.Since(t0) }()
	requireTop := 0
	if !isData {
		requireTop = c.MoreRequireTop
	}
	err := b.mineWith(ctx, stage, s.Dir, out, requireTop, func() (mining.Source, error) {
		return mining.OpenBEIR(ctx, s.Dir, s.Split, mining.PromptDefaults{})
	})
	if err != nil {
		return "", err
	}
	return out, b.done(key)
}

// mineWith indexes dir's corpus (in indexDir) and mines the units open
// returns into out with the fusion teacher — BM25, the embedder's cosine
// and each teacher model's — calibrated on the first 256 of them, each
// positive kept only where the teacher ranks it within requireTop (0:
// every one); resuming.
func (b *build) mineWith(ctx context.Context, stage, dir, out string, requireTop int, open func() (mining.Source, error)) error {
	c := &b.cfg
	// A build sharing MineDir mined this set with the same settings: its
	// output is final.
	done, err := json.Marshal(map[string]any{"embedder": c.Embedder, "teachers": c.TeacherModels, "group": c.Group, "require_top": requireTop, "corpus": dir})
	if err != nil {
		return err
	}
	if bs, err := os.ReadFile(out + ".done"); err == nil && bytes.Equal(bs, done) {
		b.logf("%s: mined before with the same settings (%s)", stage, out)
		return nil
	}
	enc, name, closeEnc, err := b.embedder(ctx)
	if err != nil {
		return err
	}
	defer closeEnc()
	eng, err := engine.Open(ctx, b.indexDir(dir), engine.Options{Encoder: enc, Model: c.Embedder, Logf: b.cfg.Logf})
	if err != nil {
		return err
	}
	defer eng.Close()
	docs, err := readCorpus(dir)
	if err != nil {
		return err
	}
	if err := b.index(ctx, eng, stage, docs); err != nil {
		return err
	}
	b.meter = meter{}
	opt := mining.DefaultOptions()
	opt.Negatives, opt.Seed, opt.Resume, opt.Workers, opt.RequireTop = c.Group-1, 1, true, runtime.GOMAXPROCS(0), requireTop
	total := 0
	opt.Progress = func(done, _ int) { b.report(stage, "queries", done, total, "") }
	signals := []mining.Teacher{mining.MaxNormalized{Teacher: mining.EngineLexical{E: eng}},
		&mining.DenseTeacher{Enc: enc, Label: "dense:" + name, Vectors: mining.StoredVectors(eng)}}
	for _, dir := range c.TeacherModels {
		t, err := encoder.Load(ctx, dir, encoder.Options{})
		if err != nil {
			return fmt.Errorf("recipe: the teacher model %s: %w", dir, err)
		}
		defer t.Close()
		cached, err := encoder.NewCache(t, c.EmbeddingCache)
		if err != nil {
			return err
		}
		signals = append(signals, &mining.DenseTeacher{Enc: cached, Label: "dense:" + t.Manifest().Name})
	}
	teacher := &mining.FusionTeacher{Signals: signals}
	miner, err := mining.New(&mining.EngineRetriever{E: eng, Mode: engine.ModeHybrid}, teacher, mining.EngineCorpus{E: eng}, opt)
	if err != nil {
		return err
	}
	if err := b.calibrate(ctx, stage, out, miner, teacher, open); err != nil {
		return err
	}
	src, err := open()
	if err != nil {
		return err
	}
	defer src.Close()
	total = src.Len()
	b.report(stage, "queries", 0, total, "")
	st, err := miner.Run(ctx, src, out)
	if err != nil {
		return err
	}
	b.logf("%s: %d examples from %d queries, %d positives the teacher did not rank within %d left out (teacher %s: nDCG@10 %.4f of the positives among the candidates)",
		stage, st.Examples, st.Units, st.FilteredPositives, requireTop, st.Teacher, st.Quality.NDCG10())
	if bs, err := json.MarshalIndent(st, "", "  "); err == nil {
		if err := atomicfile.WriteBytes(out+".stats.json", append(bs, '\n')); err != nil {
			return err
		}
	}
	return atomicfile.WriteBytes(out+".done", done)
}

// calibrate gives the fusion teacher the calibration saved beside out (by
// the run being resumed), else fits one on the first 256 queries and saves
// it — the file annactl mine-negatives --teacher fusion keeps.
func (b *build) calibrate(ctx context.Context, stage, out string, miner *mining.Miner, t *mining.FusionTeacher, open func() (mining.Source, error)) error {
	path := out + ".teacher.json"
	if bs, err := os.ReadFile(path); err == nil {
		var cal mining.Calibration
		if err := json.Unmarshal(bs, &cal); err != nil {
			return fmt.Errorf("recipe: %s: %w (delete it and %s to mine again)", path, err, out)
		}
		t.Cal = &cal
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("recipe: %w", err)
	}
	src, err := open()
	if err != nil {
		return err
	}
	defer src.Close()
	b.logf("%s: calibrating the fusion teacher on the first %d queries (their candidates retrieved and scored as mining does; no progress shown)", stage, min(256, src.Len()))
	cal, err := miner.Calibrate(ctx, src, 256, t)
	if err != nil {
		return err
	}
	b.logf("%s: fusion teacher calibrated on %d queries: AUC %.4f (weights %v for %v)", stage, cal.Units, cal.AUC, roundAll(cal.Weights), cal.Signals)
	bs, err := json.MarshalIndent(cal, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(bs, '\n'))
}

// join is the training input: Data's mined file, or Work/train.jsonl with
// every set's, each query's examples capped at PerQuery and each set's at
// PerSet (capped sets keep examples spread evenly over the file).
func (b *build) join(mined []string) (string, error) {
	c := &b.cfg
	if len(mined) == 1 && c.PerQuery == 0 && c.PerSet == 0 {
		return mined[0], nil
	}
	out := filepath.Join(c.Work, "train.jsonl")
	if b.st.Done["join"] {
		return out, nil
	}
	err := atomicfile.Write(out, func(w io.Writer) error {
		for _, m := range mined {
			lines, err := capped(m, c.PerQuery, c.PerSet)
			if err != nil {
				return err
			}
			b.logf("training on %d examples of %s", len(lines), filepath.Base(m))
			for _, l := range lines {
				if _, err := w.Write(l); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("recipe: %w", err)
	}
	return out, b.done("join")
}

// capped reads a mined file's lines (each with its newline): at most
// perQuery a query, then at most perSet in all taken at even steps (0: no
// cap).
func capped(path string, perQuery, perSet int) ([][]byte, error) {
	bs, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	seen := map[string]int{}
	for i, l := range bytes.SplitAfter(bs, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if l[len(l)-1] != '\n' {
			l = append(l, '\n')
		}
		if perQuery > 0 {
			var rec struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(l, &rec); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			if seen[rec.Query]++; seen[rec.Query] > perQuery {
				continue
			}
		}
		lines = append(lines, l)
	}
	if perSet > 0 && len(lines) > perSet {
		kept := make([][]byte, perSet)
		for i := range kept {
			kept[i] = lines[i*len(lines)/perSet]
		}
		lines = kept
	}
	return lines, nil
}

// train fine-tunes the cross-encoder into Work/ce, from its checkpoint
// when there is one.
func (b *build) train(ctx context.Context, input string) (int, error) {
	c := &b.cfg
	if b.st.Done["train"] {
		return c.Steps, nil
	}
	b.enter("train")
	t0 := time.Now()
	defer func() { b.took["train"] += time.Since(t0) }()
	base, err := b.base(ctx)
	if err != nil {
		return 0, err
	}
	b.meter = meter{} // the steps' rate, not the download's
	detail := ""
	tc := train.Config{ModelDir: base, Data: input, OutDir: filepath.Join(c.Work, "ce"), Objective: train.ObjectiveListwise,
		DistillWeight: c.Distill, MaxLength: c.MaxLength, BatchSize: c.BatchQueries, GroupSize: c.Group, MaxSteps: c.Steps,
		LR: c.LR, Seed: c.Seed, EvalEvery: c.EvalEvery, CheckpointEvery: c.CheckpointEvery, Resume: true, Name: c.Name,
		Progress: func(p train.Progress) {
			if p.Eval != nil {
				detail = fmt.Sprintf("held-out accuracy %.3f over %d queries (step %d)", p.Eval.Accuracy, p.Eval.Queries, p.Step)
				b.logf("train: step %d: held-out loss %.4f, accuracy %.3f over %d queries", p.Step, p.Eval.Loss, p.Eval.Accuracy, p.Eval.Queries)
				return
			}
			b.report("train", "steps", p.Step, p.Steps, strings.TrimSuffix(fmt.Sprintf("loss %.4f; %s", p.Loss, detail), "; "))
		}}
	res, err := train.Run(ctx, tc)
	if err != nil {
		return 0, err
	}
	return res.Steps, b.done("train")
}

// base is the trainer's input for c.Base: a checkpoint as given; for an
// anna model directory, what it trains from (catalog.Checkpoint); for a
// catalogue name neither
// a directory nor installed, its training source, or its install.
func (b *build) base(ctx context.Context) (string, error) {
	c := &b.cfg
	opts := catalog.Options{ModelsDir: c.ModelsDir, DownloadsDir: c.DownloadsDir, Sources: home.SourceDir(), Progress: func(done, total int64) {
		b.report("train: download "+c.Base, "MB", int(done>>20), int(total>>20), "")
	}}
	dir := c.Base
	if !isDir(dir) {
		dir = filepath.Join(c.ModelsDir, c.Base)
	}
	if !isDir(dir) {
		e, err := catalog.Lookup(c.Base)
		if err != nil {
			return "", fmt.Errorf("recipe: base %q is not a directory or an installed model: %w", c.Base, err)
		}
		if path, ok, err := catalog.TrainingSource(ctx, e, opts); err != nil || ok {
			return path, err
		}
		if _, err := catalog.Install(ctx, e, opts); err != nil {
			return "", err
		}
		dir = filepath.Join(c.ModelsDir, catalog.InstalledName(e, ""))
	}
	path, err := catalog.Checkpoint(ctx, dir, opts)
	if err != nil {
		return "", fmt.Errorf("recipe: base %s: %w", dir, err)
	}
	return path, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
