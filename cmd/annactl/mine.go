package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/rerank"
	"github.com/spf13/cobra"
)

type mineFlags struct {
	dataset, split, input, index, output, model, mode, teacher, reranker string
	sampling, format, instruction, examples, stats                       string
	teacherModels, teacherIndexes                                        []string
	calibrate                                                            int
}

func (a *app) mineCommand() *cobra.Command {
	opt := mining.DefaultOptions()
	var fl mineFlags
	var be backendFlags // the index's lists from a Weaviate cluster (--teacher-model indexes stay local)
	cmd := &cobra.Command{
		Use:   "mine-negatives (--dataset BEIR_DIR | --input PAIRS.jsonl --index DIR) --output FILE",
		Short: "mine hard negatives with teacher scores (FlagEmbedding / sentence-transformers data)",
		Long: `Candidates come from the search pipeline (top-k, the query's positives and texts
equal to the query or a positive removed), are scored by the teacher (positives too),
filtered by the positive-aware margin, and sampled with a seed. Ctrl-C stops cleanly;
--resume continues with no duplicates and no gaps, and the output is the same as an
uninterrupted run's.

The pipeline as teacher (--teacher fusion): --teacher-model adds another embedding
model (its own index of the corpus, built once under the cache with --dataset) and
--teacher-index an existing index of the same corpus; their dense lists join the
candidates by reciprocal rank fusion, and the soft labels come from a logistic fusion
of BM25 and every model's cosine, calibrated on the first --calibrate queries' labels
(saved in OUTPUT.teacher.json, reused by --resume). The stats report each teacher's
own quality on the input's labels (nDCG@10 of the positives among the candidates).`,
		Example: `  annactl mine-negatives --dataset ../shared/datasets/scifact --split train --output mined.jsonl
  annactl mine-negatives --input pairs.jsonl --index my-index --output mined.jsonl --resume
  annactl mine-negatives --dataset ../shared/datasets/scifact --split train --output mined.jsonl \
      --teacher fusion --teacher-model bge-small-en-v1.5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "output"); err != nil {
				return err
			}
			if fl.dataset == "" && fl.input == "" {
				return usageErrorf("give --dataset BEIR_DIR, or --input PAIRS.jsonl with --index DIR")
			}
			if fl.input != "" && fl.dataset == "" && fl.index == "" {
				return usageErrorf("--input needs --index DIR (the corpus to mine from), or --dataset for the corpus")
			}
			for name, v := range map[string]int{"negatives": opt.Negatives, "top-k": opt.TopK, "workers": opt.Workers} {
				if err := atLeast(name, v, 1); err != nil {
					return err
				}
			}
			for name, v := range map[string]int{"range-min": opt.RangeMin, "range-max": opt.RangeMax, "min-negatives": opt.MinNegatives, "require-positive-top": opt.RequireTop} {
				if err := atLeast(name, v, 0); err != nil {
					return err
				}
			}
			if err := inRange("margin", opt.Margin, 0, 1); err != nil {
				return err
			}
			if err := oneOf("sampling", fl.sampling, "random", "top"); err != nil {
				return err
			}
			if err := oneOf("format", fl.format, "flag", "triplet", "n-tuple", "labeled-list"); err != nil {
				return err
			}
			opt.Sampling = mining.Sampling(fl.sampling)
			opt.Format = mining.Format(fl.format)
			m, err := parseMode("mode", fl.mode)
			if err != nil {
				return err
			}
			if m == engine.ModeRerank {
				return usageErrorf("--mode rerank: want lexical, dense or hybrid (give --reranker to make the cross-encoder the teacher)")
			}
			switch fl.teacher {
			case "":
				// The strongest scorer available: the cross-encoder given,
				// else an installed one measured to help, else the
				// calibrated fusion of BM25 and the cosines (on SciFact
				// train its soft labels rank the positives at nDCG@10
				// 0.734, the cosine alone at 0.676).
				fl.teacher = "fusion"
				if fl.reranker == "" {
					// Its scores alone label the pairs: it must have
					// helped alone, not only fused with the lists.
					dir, others, err := helpfulReranker(true)
					if err != nil {
						return err
					}
					if dir != "" {
						a.logf("mine-negatives: teacher: %s, an installed reranker measured to help on its own (--teacher fusion to use the fusion instead)", dir)
						fl.reranker = dir
					} else if len(others) > 0 {
						a.logf("mine-negatives: teacher: the fusion (no installed reranker is measured to help on its own: %s)", strings.Join(others, "; "))
					}
				}
				if fl.reranker != "" {
					fl.teacher = "cross-encoder"
				}
			case "dense", "cross-encoder", "fusion":
			default:
				return usageErrorf("--teacher %q: want dense, fusion or cross-encoder", fl.teacher)
			}
			if len(fl.teacherModels) > 0 && fl.dataset == "" {
				return usageErrorf("--teacher-model needs --dataset (its corpus is indexed with the model); give --teacher-index DIR for an index you built")
			}
			if err := atLeast("calibrate", fl.calibrate, 1); err != nil {
				return err
			}
			if fl.teacher == "cross-encoder" && fl.reranker == "" {
				return usageErrorf("--teacher cross-encoder needs --reranker DIR")
			}
			ctx := cmd.Context()
			defaults := mining.PromptDefaults{Instruction: fl.instruction}
			if fl.examples != "" {
				if defaults.Examples, err = readShots(fl.examples); err != nil {
					return err
				}
			}
			// The model behind the on-disk embedding cache: the corpus is embedded
			// once, and the teacher's query embedding is a cache hit after retrieval's.
			enc, closeEnc, err := loadMiningEncoder(ctx, fl.model, fl.index)
			if err != nil {
				return err
			}
			defer closeEnc()
			dir := fl.index
			if dir == "" {
				dir = defaultMiningIndex(fl.dataset, enc.Fingerprint())
			}
			var rr *rerank.ORTReranker
			if fl.reranker != "" {
				if rr, err = rerank.Load(ctx, fl.reranker, rerank.Options{}); err != nil {
					return err
				}
				defer rr.Close()
			}
			opts := engine.Options{Encoder: enc, Model: fl.model, Logf: a.logf}
			if err := be.apply(cmd, &opts); err != nil {
				return err
			}
			eng, err := engine.Open(ctx, dir, opts)
			if err != nil {
				return err
			}
			defer eng.Close()
			if fl.dataset != "" {
				if err := a.indexDataset(ctx, eng, fl.dataset); err != nil {
					return err
				}
			}
			// The other models of the pipeline: one engine (index of the same
			// corpus) each.
			var others []teacherEngine
			defer func() {
				for _, o := range others {
					o.close()
				}
			}()
			for _, name := range fl.teacherModels {
				o, err := a.openTeacherEngine(ctx, resolveModelDir(name), "", fl.dataset)
				if err != nil {
					return fmt.Errorf("--teacher-model %s: %w", name, err)
				}
				others = append(others, o)
			}
			for _, dir := range fl.teacherIndexes {
				o, err := a.openTeacherEngine(ctx, "", dir, "")
				if err != nil {
					return fmt.Errorf("--teacher-index %s: %w", dir, err)
				}
				others = append(others, o)
			}
			return a.runMineWith(ctx, mineRun{opt: opt, eng: eng, enc: enc, rr: rr, teacher: fl.teacher, mode: m, others: others,
				calibrate: fl.calibrate, dataset: fl.dataset, split: fl.split, input: fl.input, output: fl.output, stats: fl.stats, defaults: defaults})
		},
	}
	be.register(cmd)
	f := cmd.Flags()
	f.StringVar(&fl.dataset, "dataset", "", "BEIR folder: its qrels split is the input, its corpus is indexed if needed")
	f.StringVar(&fl.split, "split", "train", "qrels split of --dataset")
	f.StringVar(&fl.input, "input", "", `JSON lines {"query", "pos": [...] | "pos_ids": [...], "prompt"} (instead of the qrels of --dataset)`)
	indexFlag(cmd, &fl.index, "anna directory `DIR` holding the corpus (default with --dataset: one under $ANNA_HOME/cache/mining)")
	f.StringVar(&fl.output, "output", "", "output `FILE` (JSON lines)")
	modelVar(f, &fl.model, "model", "", "embedding model directory `DIR` (default: the index's, else the installed default)")
	f.StringVar(&fl.mode, "mode", "hybrid", "candidate pipeline: lexical | dense | hybrid")
	f.StringVar(&fl.teacher, "teacher", "", "dense (cosine of the embedding model) | fusion (calibrated fusion of BM25, every model's cosine and the --reranker's logit if given) | cross-encoder (needs --reranker); default cross-encoder when --reranker is given or an installed reranker is measured to help on its own (annactl models list), else fusion")
	f.StringArrayVar(&fl.teacherModels, "teacher-model", nil, "another embedding model `NAME|DIR` for the candidates (RRF) and the fusion teacher; needs --dataset (repeatable)")
	f.StringArrayVar(&fl.teacherIndexes, "teacher-index", nil, "an index `DIR` of the same corpus with another model, for the candidates (RRF) and the fusion teacher (repeatable)")
	f.IntVar(&fl.calibrate, "calibrate", 256, "queries whose labels calibrate the fusion teacher")
	modelVar(f, &fl.reranker, "reranker", "", "cross-encoder model directory `DIR` (the rerank stage) to use as teacher (with --teacher fusion: as one of its signals)")
	f.IntVar(&opt.Negatives, "negatives", opt.Negatives, "hard negatives per example")
	f.IntVar(&opt.TopK, "top-k", opt.TopK, "candidates considered per query (after removing its positives)")
	f.Float64Var(&opt.Margin, "margin", opt.Margin, "relative margin: drop candidates above pos − (1−margin)·|pos| of the lowest positive (= margin·pos for pos ≥ 0); 0 = off")
	f.Var(maybeFloat{&opt.AbsMargin}, "abs-margin", "absolute margin: drop candidates above pos − abs-margin (default off)")
	f.Var(maybeFloat{&opt.MaxScore}, "max-score", "score ceiling: drop candidates scoring above (default off)")
	f.Var(maybeFloat{&opt.MinScore}, "min-score", "score floor: drop candidates scoring below (default off)")
	f.IntVar(&opt.RangeMin, "range-min", 0, "skip the first range-min candidates (rank window, 0-based, positives removed)")
	f.IntVar(&opt.RangeMax, "range-max", 0, "consider candidates of rank < range-max (0 = top-k)")
	f.StringVar(&fl.sampling, "sampling", "random", "random (seeded) | top (highest teacher scores)")
	f.Uint64Var(&opt.Seed, "seed", 0, "sampling seed")
	f.IntVar(&opt.MinNegatives, "min-negatives", opt.MinNegatives, "do not write examples with fewer negatives (counted)")
	f.IntVar(&opt.RequireTop, "require-positive-top", 0, "keep a positive only where the teacher ranks it within the top `K` of itself and its candidates (0: off; for generated queries, annactl doc2query: 1 keeps a query only if the teacher finds its document first)")
	f.StringVar(&fl.format, "format", "flag", "flag (FlagEmbedding) | triplet | n-tuple | labeled-list (sentence-transformers)")
	f.BoolVar(&opt.Grouped, "grouped", false, "one example per query with all its positives (default: one per (query, positive))")
	f.StringVar(&opt.Type, "type", "normal", `FlagEmbedding "type" field`)
	f.StringVar(&fl.instruction, "instruction", "", `default task instruction for queries (a line's "prompt" overrides it)`)
	f.StringVar(&fl.examples, "examples", "", `few-shot examples for the query side: JSON lines {"query", "response"} in FILE`)
	f.IntVar(&opt.Workers, "workers", runtime.GOMAXPROCS(0), "queries processed in parallel (the output does not depend on it)")
	f.BoolVar(&opt.Resume, "resume", false, "continue an interrupted run of the same command and output")
	f.BoolVar(&opt.SkipBad, "skip-bad", false, "skip bad input (counted) instead of stopping")
	f.StringVar(&fl.stats, "stats", "", "write the stats summary as JSON to `FILE` (default OUTPUT.stats.json)")
	return cmd
}

// mineRun is one mine-negatives run, wired.
type mineRun struct {
	opt                                  mining.Options
	eng                                  *engine.Engine
	enc                                  encoder.Encoder
	rr                                   *rerank.ORTReranker
	teacher                              string
	mode                                 engine.Mode
	others                               []teacherEngine
	calibrate                            int
	dataset, split, input, output, stats string
	defaults                             mining.PromptDefaults
}

// teacherEngine is another model's index of the same corpus.
type teacherEngine struct {
	eng   *engine.Engine
	enc   encoder.Encoder
	close func()
}

// openTeacherEngine opens an index of the corpus for another model: an
// existing one (index), or, with dataset, the cache's index for that model,
// built or completed from the dataset's corpus.
func (a *app) openTeacherEngine(ctx context.Context, modelDir, index, dataset string) (teacherEngine, error) {
	enc, closeEnc, err := loadMiningEncoder(ctx, modelDir, index)
	if err != nil {
		return teacherEngine{}, err
	}
	if index == "" {
		index = defaultMiningIndex(dataset, enc.Fingerprint())
	}
	if dataset != "" {
		// The cached index of the corpus is brought up to date, then read
		// only (a shared lock), so that runs mining beside each other share
		// it. One that cannot take the writer's lock finds another run
		// reading it, which completed it first.
		eng, err := engine.Open(ctx, index, engine.Options{Encoder: enc, Model: modelDir, Logf: a.logf})
		if err == nil {
			err = a.indexDataset(ctx, eng, dataset)
			if cerr := eng.Close(); err == nil {
				err = cerr
			}
		} else if errors.Is(err, engine.ErrLocked) {
			a.logf("%s: read by another run; reading it as that run completed it", index)
			err = nil
		}
		if err != nil {
			closeEnc()
			return teacherEngine{}, err
		}
	}
	eng, err := engine.Open(ctx, index, engine.Options{Encoder: enc, Model: modelDir, Logf: a.logf, ReadOnly: true})
	if err != nil {
		closeEnc()
		return teacherEngine{}, err
	}
	return teacherEngine{eng: eng, enc: enc, close: func() { eng.Close(); closeEnc() }}, nil
}

// pipeline returns the candidates' retriever: the engine's search in the
// run's mode alone, or, with other models, the RRF of the engine's lists
// and each other model's dense list.
func (r *mineRun) pipeline() mining.Retriever {
	if len(r.others) == 0 {
		return &mining.EngineRetriever{E: r.eng, Mode: r.mode}
	}
	var lists []mining.Retriever
	if r.mode != engine.ModeDense {
		lists = append(lists, &mining.EngineRetriever{E: r.eng, Mode: engine.ModeLexical})
	}
	if r.mode != engine.ModeLexical {
		lists = append(lists, &mining.EngineRetriever{E: r.eng, Mode: engine.ModeDense})
	}
	for _, o := range r.others {
		lists = append(lists, &mining.EngineRetriever{E: o.eng, Mode: engine.ModeDense})
	}
	return &mining.FusedRetriever{Lists: lists}
}

func (r *mineRun) openSource(ctx context.Context) (mining.Source, error) {
	if r.input != "" {
		return mining.OpenPairs(ctx, r.input, r.defaults)
	}
	return mining.OpenBEIR(ctx, r.dataset, r.split, r.defaults)
}

// calibrationPath is where the fusion teacher's calibration is kept.
func calibrationPath(output string) string { return output + ".teacher.json" }

func (a *app) runMineWith(ctx context.Context, r mineRun) error {
	opt, eng, enc, rr, output, statsPath := r.opt, r.eng, r.enc, r.rr, r.output, r.stats
	var teacher mining.Teacher
	var fusion *mining.FusionTeacher
	switch r.teacher {
	case "dense":
		teacher = &mining.DenseTeacher{Enc: enc, Label: "dense:" + modelLabel(enc), Vectors: mining.StoredVectors(eng)}
	case "fusion":
		fusion = &mining.FusionTeacher{Signals: []mining.Teacher{
			mining.MaxNormalized{Teacher: mining.EngineLexical{E: eng}},
			&mining.DenseTeacher{Enc: enc, Label: "dense:" + modelLabel(enc), Vectors: mining.StoredVectors(eng)},
		}}
		for _, o := range r.others {
			fusion.Signals = append(fusion.Signals, &mining.DenseTeacher{Enc: o.enc, Label: "dense:" + modelLabel(o.enc), Vectors: mining.StoredVectors(o.eng)})
		}
		if rr != nil {
			// A cross-encoder given with --teacher fusion is one more
			// signal: the calibration weighs it against the others.
			fusion.Signals = append(fusion.Signals, &mining.CrossEncoderTeacher{R: rr, Label: "cross-encoder:" + rr.Manifest().Name})
		}
		teacher = fusion
	case "cross-encoder":
		if rr == nil {
			return usageErrorf("--teacher cross-encoder needs --reranker DIR")
		}
		teacher = &mining.CrossEncoderTeacher{R: rr, Label: "cross-encoder:" + rr.Manifest().Name}
	}
	var p *progress // the run's, once its source is open
	opt.Progress = func(done, _ int) {
		if p != nil {
			p.update(done, "")
		}
	}
	miner, err := mining.New(r.pipeline(), teacher, mining.EngineCorpus{E: eng}, opt)
	if err != nil {
		return err
	}
	if fusion != nil {
		if err := a.calibrateFusion(ctx, &r, miner, fusion); err != nil {
			return err
		}
	}
	src, err := r.openSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	p = a.progress("mining "+src.Name(), src.Len())
	st, runErr := miner.Run(ctx, src, output)
	p.done()
	if st != nil {
		st.Write(a.stderr)
		if statsPath == "" {
			statsPath = output + ".stats.json"
		}
		if b, err := json.MarshalIndent(statsJSON(st), "", "  "); err == nil {
			if err := os.WriteFile(statsPath, append(b, '\n'), 0o644); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if errors.Is(runErr, context.Canceled) {
		fmt.Fprintf(a.stderr, "stopped: %s is complete up to its last checkpoint; run the same command with --resume to continue\n", output)
	}
	return runErr
}

// calibrateFusion gives the fusion teacher its calibration: the one saved
// beside the output by the run being resumed, else a fit on the first
// queries of the input, saved for a later --resume.
func (a *app) calibrateFusion(ctx context.Context, r *mineRun, miner *mining.Miner, t *mining.FusionTeacher) error {
	path := calibrationPath(r.output)
	if r.opt.Resume {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			var c mining.Calibration
			if err := json.Unmarshal(b, &c); err != nil {
				return fmt.Errorf("%s: %w (delete it and the output to start over)", path, err)
			}
			t.Cal = &c
			return nil
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
	}
	src, err := r.openSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintf(a.stderr, "calibrating the fusion teacher on the first %d queries...\n", r.calibrate)
	c, err := miner.Calibrate(ctx, src, r.calibrate, t)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "fusion teacher: %s\n  on %d queries (%d positives, %d candidates): AUC %.4f (signals alone %s), weights %s\n",
		t.Name(), c.Units, c.Positives, c.Negatives, c.AUC, floats(c.SignalAUC), floats(c.Weights))
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// statsJSON is the stats file: the counters plus readable score summaries
// (the raw quantile sample stays in the progress file only).
func statsJSON(st *mining.Stats) any {
	sum := func(s *mining.Summary) map[string]float64 {
		if s.N == 0 {
			return map[string]float64{"n": 0}
		}
		return map[string]float64{"n": float64(s.N), "mean": s.Mean(), "std": s.Std(), "min": s.Min,
			"p10": s.Quantile(0.1), "p50": s.Quantile(0.5), "p90": s.Quantile(0.9), "max": s.Max}
	}
	c := *st
	c.PosScores, c.NegScores = mining.Summary{}, mining.Summary{}
	return struct {
		mining.Stats
		PosScores map[string]float64 `json:"pos_scores"`
		NegScores map[string]float64 `json:"neg_scores"`
		Quality   map[string]float64 `json:"teacher_quality"`
	}{c, sum(&st.PosScores), sum(&st.NegScores), map[string]float64{
		"queries": float64(st.Quality.Units), "ndcg@10": st.Quality.NDCG10(), "top1_positive": st.Quality.Top1Rate()}}
}

func modelLabel(enc encoder.Encoder) string {
	type manifester interface{ ModelName() string }
	if m, ok := enc.(manifester); ok && m.ModelName() != "" {
		return m.ModelName()
	}
	fp := enc.Fingerprint()
	return fp[:min(12, len(fp))]
}

// loadMiningEncoder loads the embedding model (flag, else the one the index
// records, else the default) wrapped in the shared embedding cache.
func loadMiningEncoder(ctx context.Context, modelDir, index string) (encoder.Encoder, func(), error) {
	if modelDir == "" && index != "" {
		m, err := engine.RecordedModel(index)
		if err != nil {
			return nil, nil, err
		}
		modelDir = m.Dir
	}
	var ort *encoder.ORTEncoder
	var err error
	if modelDir == "" {
		ort, err = encoder.Default(ctx)
	} else {
		ort, err = encoder.Load(ctx, modelDir, encoder.Options{})
	}
	if err != nil {
		return nil, nil, err
	}
	c, err := encoder.NewCache(ort, "")
	if err != nil {
		ort.Close()
		return nil, nil, err
	}
	// Documents and queries through the disk cache (a resumed or repeated
	// run embeds nothing twice); each query once for retrieval and teacher
	// together.
	memo, err := mining.NewQueryMemo(c, nil, 256)
	if err != nil {
		ort.Close()
		return nil, nil, err
	}
	return namedEncoder{memo, ort.Manifest().Name}, func() { ort.Close() }, nil
}

type namedEncoder struct {
	*mining.QueryMemo
	name string
}

func (n namedEncoder) ModelName() string { return n.name }

// defaultMiningIndex is where --dataset is indexed when no --index is given:
// one directory per dataset path and model.
func defaultMiningIndex(dataset, fp string) string {
	abs, err := filepath.Abs(dataset)
	if err != nil {
		abs = dataset
	}
	h := sha256.Sum256([]byte(abs + "\x00" + fp))
	return filepath.Join(home.CacheDir(), "mining", fmt.Sprintf("%s-%x", filepath.Base(abs), h[:6]))
}

// indexDataset adds the BEIR corpus to eng; unchanged documents are skipped,
// so this costs only a read when the index is already complete.
func (a *app) indexDataset(ctx context.Context, eng *engine.Engine, dir string) error {
	st, err := eng.Stats()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open corpus: %w", err)
	}
	defer f.Close()
	var batch []engine.Document
	added := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := eng.Add(ctx, batch)
		added += res.Added + res.Updated
		batch = batch[:0]
		return err
	}
	p := a.progress("indexing "+filepath.Base(dir), 0)
	n := 0
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
		batch = append(batch, engine.Document(d))
		n++
		if len(batch) == 512 {
			p.update(n, "")
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	p.done()
	if err != nil {
		return fmt.Errorf("indexing %s: %w", path, err)
	}
	if added > 0 || st.Documents == 0 {
		fmt.Fprintf(a.stderr, "indexed %s: %d documents (%d new or changed) in %s\n", path, n, added, eng.Dir())
	}
	return nil
}

// readShots reads few-shot examples, one JSON object per line.
func readShots(path string) ([]mining.Shot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read examples: %w", err)
	}
	var out []mining.Shot
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var s mining.Shot
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if s.Query == "" || s.Response == "" {
			return nil, fmt.Errorf(`%s:%d: need "query" and "response"`, path, i+1)
		}
		out = append(out, s)
	}
	return out, nil
}
