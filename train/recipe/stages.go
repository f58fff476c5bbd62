package recipe

import (
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

// indexDir is where a collection is indexed: Work/idx for Data (as
// scripts/reranker.sh did), Work/idx-NAME for the others.
func (b *build) indexDir(dir string) string {
	if filepath.Clean(dir) == filepath.Clean(b.cfg.Data) {
		return filepath.Join(b.cfg.Work, "idx")
	}
	return filepath.Join(b.cfg.Work, "idx-"+filepath.Base(filepath.Clean(dir)))
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
// into Work/mined.jsonl (Data) or Work/mined-NAME.jsonl, resuming.
func (b *build) mineSet(ctx context.Context, s Set, i int) (string, error) {
	c := &b.cfg
	out := filepath.Join(c.Work, "mined.jsonl")
	if i > 0 {
		out = filepath.Join(c.Work, "mined-"+filepath.Base(filepath.Clean(s.Dir))+".jsonl")
	}
	stage := "mine " + setName(s)
	key := "mine:" + s.Dir + ":" + s.Split
	if b.st.Done[key] {
		return out, nil
	}
	b.enter(stage)
	t0 := time.Now()
	defer func() { b.took[stage] += time.Since(t0) }()
	enc, name, closeEnc, err := b.embedder(ctx)
	if err != nil {
		return "", err
	}
	defer closeEnc()
	eng, err := engine.Open(ctx, b.indexDir(s.Dir), engine.Options{Encoder: enc, Model: c.Embedder, Logf: b.cfg.Logf})
	if err != nil {
		return "", err
	}
	defer eng.Close()
	docs, err := readCorpus(s.Dir)
	if err != nil {
		return "", err
	}
	if err := b.index(ctx, eng, stage, docs); err != nil {
		return "", err
	}
	b.meter = meter{}
	opt := mining.DefaultOptions()
	opt.Negatives, opt.Seed, opt.Resume, opt.Workers = c.Group-1, 1, true, runtime.GOMAXPROCS(0)
	if i > 0 {
		opt.RequireTop = c.MoreRequireTop
	}
	total := 0
	opt.Progress = func(done, _ int) { b.report(stage, "queries", done, total, "") }
	dense := &mining.DenseTeacher{Enc: enc, Label: "dense:" + name, Vectors: mining.StoredVectors(eng)}
	teacher := &mining.FusionTeacher{Signals: []mining.Teacher{mining.MaxNormalized{Teacher: mining.EngineLexical{E: eng}}, dense}}
	miner, err := mining.New(&mining.EngineRetriever{E: eng, Mode: engine.ModeHybrid}, teacher, mining.EngineCorpus{E: eng}, opt)
	if err != nil {
		return "", err
	}
	if err := b.calibrate(ctx, s, out, miner, teacher); err != nil {
		return "", err
	}
	src, err := mining.OpenBEIR(ctx, s.Dir, s.Split, mining.PromptDefaults{})
	if err != nil {
		return "", err
	}
	defer src.Close()
	total = src.Len()
	b.report(stage, "queries", 0, total, "")
	st, err := miner.Run(ctx, src, out)
	if err != nil {
		return "", err
	}
	b.logf("mined %s: %d examples from %d queries (teacher %s: nDCG@10 %.4f of the positives among the candidates)",
		setName(s), st.Examples, st.Units, st.Teacher, st.Quality.NDCG10())
	if bs, err := json.MarshalIndent(st, "", "  "); err == nil {
		if err := atomicfile.WriteBytes(out+".stats.json", append(bs, '\n')); err != nil {
			return "", err
		}
	}
	return out, b.done(key)
}

// calibrate gives the fusion teacher the calibration saved beside out (by
// the run being resumed), else fits one on the first 256 queries and saves
// it — the file annactl mine-negatives --teacher fusion keeps.
func (b *build) calibrate(ctx context.Context, s Set, out string, miner *mining.Miner, t *mining.FusionTeacher) error {
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
	src, err := mining.OpenBEIR(ctx, s.Dir, s.Split, mining.PromptDefaults{})
	if err != nil {
		return err
	}
	defer src.Close()
	b.logf("calibrating the fusion teacher on the first %d queries of %s (their candidates retrieved and scored as mining does; no progress shown)", min(256, src.Len()), setName(s))
	cal, err := miner.Calibrate(ctx, src, 256, t)
	if err != nil {
		return err
	}
	b.logf("fusion teacher calibrated on %d queries of %s: AUC %.4f", cal.Units, setName(s), cal.AUC)
	bs, err := json.MarshalIndent(cal, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(bs, '\n'))
}

// join is the training input: Data's mined file, or Work/train.jsonl with
// every set's.
func (b *build) join(mined []string) (string, error) {
	if len(mined) == 1 {
		return mined[0], nil
	}
	out := filepath.Join(b.cfg.Work, "train.jsonl")
	if b.st.Done["join"] {
		return out, nil
	}
	err := atomicfile.Write(out, func(w io.Writer) error {
		for _, m := range mined {
			f, err := os.Open(m)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("recipe: %w", err)
	}
	return out, b.done("join")
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
