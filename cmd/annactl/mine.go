package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/anna-search/anna/beir"
	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/rerank"
)

func init() {
	register(command{name: "mine-negatives", summary: "mine hard negatives with teacher scores (FlagEmbedding / sentence-transformers data)", run: runMine})
}

// nanFlag is a float flag that is unset (NaN) until given.
type nanFlag struct{ v *float64 }

func (f nanFlag) String() string {
	if f.v == nil || math.IsNaN(*f.v) {
		return "off"
	}
	return fmt.Sprint(*f.v)
}
func (f nanFlag) Set(s string) error {
	if s == "off" {
		*f.v = math.NaN()
		return nil
	}
	_, err := fmt.Sscan(s, f.v)
	return err
}

func runMine(ctx context.Context, args []string) error {
	opt := mining.DefaultOptions()
	fs := flag.NewFlagSet("mine-negatives", flag.ContinueOnError)
	dataset := fs.String("dataset", "", "BEIR folder: its qrels split is the input, its corpus is indexed if needed")
	split := fs.String("split", "train", "qrels split of --dataset")
	input := fs.String("input", "", `JSON lines {"query", "pos": [...] | "pos_ids": [...], "prompt"} (instead of the qrels of --dataset)`)
	index := fs.String("index", "", "anna directory holding the corpus (default with --dataset: one under $ANNA_HOME/cache/mining)")
	output := fs.String("output", "", "output file (JSON lines)")
	modelDir := fs.String("model", "", "embedding model directory (default: the index's, else the installed default)")
	mode := fs.String("mode", "hybrid", "candidate pipeline: lexical | dense | hybrid")
	teacherName := fs.String("teacher", "", "dense (cosine of the embedding model) | cross-encoder (needs --reranker); default cross-encoder when --reranker is given, else dense")
	rerankDir := fs.String("reranker", "", "cross-encoder model directory (the rerank stage) to use as teacher")
	fs.IntVar(&opt.Negatives, "negatives", opt.Negatives, "hard negatives per example")
	fs.IntVar(&opt.TopK, "top-k", opt.TopK, "candidates considered per query (after removing its positives)")
	fs.Float64Var(&opt.Margin, "margin", opt.Margin, "relative margin: drop candidates above pos − (1−margin)·|pos| of the lowest positive (= margin·pos for pos ≥ 0); 0 = off")
	fs.Var(nanFlag{&opt.AbsMargin}, "abs-margin", "absolute margin: drop candidates above pos − abs-margin (default off)")
	fs.Var(nanFlag{&opt.MaxScore}, "max-score", "score ceiling: drop candidates scoring above (default off)")
	fs.Var(nanFlag{&opt.MinScore}, "min-score", "score floor: drop candidates scoring below (default off)")
	fs.IntVar(&opt.RangeMin, "range-min", 0, "skip the first range-min candidates (rank window, 0-based, positives removed)")
	fs.IntVar(&opt.RangeMax, "range-max", 0, "consider candidates of rank < range-max (0 = top-k)")
	sampling := fs.String("sampling", "random", "random (seeded) | top (highest teacher scores)")
	fs.Uint64Var(&opt.Seed, "seed", 0, "sampling seed")
	fs.IntVar(&opt.MinNegatives, "min-negatives", opt.MinNegatives, "do not write examples with fewer negatives (counted)")
	format := fs.String("format", "flag", "flag (FlagEmbedding) | triplet | n-tuple | labeled-list (sentence-transformers)")
	fs.BoolVar(&opt.Grouped, "grouped", false, "one example per query with all its positives (default: one per (query, positive))")
	fs.StringVar(&opt.Type, "type", "normal", `FlagEmbedding "type" field`)
	instruction := fs.String("instruction", "", `default task instruction for queries (a line's "prompt" overrides it)`)
	examples := fs.String("examples", "", `few-shot examples for the query side: JSON lines {"query", "response"}`)
	fs.IntVar(&opt.Workers, "workers", runtime.GOMAXPROCS(0), "queries processed in parallel (output does not depend on it)")
	fs.BoolVar(&opt.Resume, "resume", false, "continue an interrupted run of the same command and output")
	fs.BoolVar(&opt.SkipBad, "skip-bad", false, "skip bad input (counted) instead of stopping")
	statsPath := fs.String("stats", "", "write the stats summary as JSON here (default OUTPUT.stats.json)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: annactl mine-negatives (--dataset BEIR_DIR [--split train] | --input PAIRS.jsonl --index ANNA_DIR) --output FILE [flags]

Candidates come from the search pipeline (top-k, the query's positives and texts equal
to the query or a positive removed), are scored by the teacher (positives too), filtered
by the positive-aware margin, and sampled with a seed. Ctrl-C stops cleanly; --resume
continues with no duplicates and no gaps.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	opt.Sampling = mining.Sampling(*sampling)
	opt.Format = mining.Format(*format)
	if *output == "" || (*dataset == "" && *input == "") || (*input != "" && *dataset == "" && *index == "") {
		fmt.Fprintln(fs.Output(), "need --output and either --dataset, or --input with --index (or --dataset for the corpus)")
		fs.Usage()
		return errUsage
	}
	m, err := engine.ParseMode(*mode)
	if err != nil || m == engine.ModeRerank {
		return fmt.Errorf("--mode %q: want lexical, dense or hybrid (use --reranker to make the cross-encoder the teacher)", *mode)
	}
	switch *teacherName {
	case "":
		*teacherName = "dense"
		if *rerankDir != "" {
			*teacherName = "cross-encoder"
		}
	case "dense", "cross-encoder":
	default:
		return fmt.Errorf("--teacher %q: want dense or cross-encoder", *teacherName)
	}
	if *teacherName == "cross-encoder" && *rerankDir == "" {
		return errors.New("--teacher cross-encoder needs --reranker MODEL_DIR")
	}
	defaults := mining.PromptDefaults{Instruction: *instruction}
	if *examples != "" {
		if defaults.Examples, err = readShots(*examples); err != nil {
			return err
		}
	}

	// The model behind the on-disk embedding cache: the corpus is embedded
	// once, and the teacher's query embedding is a cache hit after retrieval's.
	enc, closeEnc, err := loadMiningEncoder(ctx, *modelDir, *index)
	if err != nil {
		return err
	}
	defer closeEnc()
	dir := *index
	if dir == "" {
		dir = defaultMiningIndex(*dataset, enc.Fingerprint())
	}
	var rr *rerank.ORTReranker
	if *rerankDir != "" {
		if rr, err = rerank.Load(ctx, *rerankDir, rerank.Options{}); err != nil {
			return err
		}
		defer rr.Close()
	}
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc, Model: *modelDir, Logf: logf})
	if err != nil {
		return err
	}
	defer eng.Close()
	if *dataset != "" {
		if err := indexDataset(ctx, eng, *dataset); err != nil {
			return err
		}
	}

	return runMineWith(ctx, opt, eng, enc, rr, *teacherName, m, *dataset, *split, *input, *output, *statsPath, defaults)
}

func runMineWith(ctx context.Context, opt mining.Options, eng *engine.Engine, enc encoder.Encoder, rr *rerank.ORTReranker,
	teacherName string, mode engine.Mode, dataset, split, input, output, statsPath string, defaults mining.PromptDefaults) error {
	var teacher mining.Teacher
	switch teacherName {
	case "dense":
		teacher = &mining.DenseTeacher{Enc: enc, Label: "dense:" + modelLabel(enc), Vectors: mining.StoredVectors(eng)}
	case "cross-encoder":
		if rr == nil {
			return errors.New("--teacher cross-encoder needs --reranker MODEL_DIR")
		}
		teacher = &mining.CrossEncoderTeacher{R: rr, Label: "cross-encoder:" + rr.Manifest().Name}
	}
	var src mining.Source
	var err error
	if input != "" {
		src, err = mining.OpenPairs(ctx, input, defaults)
	} else {
		src, err = mining.OpenBEIR(ctx, dataset, split, defaults)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	p := newProgress("mining "+src.Name(), src.Len())
	opt.Progress = func(done, _ int) { p.update(done, "") }
	miner, err := mining.New(&mining.EngineRetriever{E: eng, Mode: mode}, teacher, mining.EngineCorpus{E: eng}, opt)
	if err != nil {
		return err
	}
	st, runErr := miner.Run(ctx, src, output)
	p.done()
	if st != nil {
		st.Write(os.Stderr)
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
		fmt.Fprintf(os.Stderr, "stopped: %s is complete up to its last checkpoint; run the same command with --resume to continue\n", output)
	}
	return runErr
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
	}{c, sum(&st.PosScores), sum(&st.NegScores)}
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
		var err error
		if modelDir, err = recordedModelDir(index); err != nil {
			return nil, nil, err
		}
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
	// Documents through the disk cache; queries straight to the model, once
	// per query for retrieval and teacher together.
	memo, err := mining.NewQueryMemo(c, ort, 256)
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
func indexDataset(ctx context.Context, eng *engine.Engine, dir string) error {
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
	p := newProgress("indexing "+filepath.Base(dir), 0)
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
		fmt.Fprintf(os.Stderr, "indexed %s: %d documents (%d new or changed) in %s\n", path, n, added, eng.Dir())
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
