package benchmarks

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/mining"
)

// timedQueries measures time spent in the model embedding queries.
type timedQueries struct {
	encoder.Encoder
	ns atomic.Int64
}

func (t *timedQueries) EmbedQueries(ctx context.Context, qs []string, p encoder.Prompt) ([][]float32, error) {
	start := time.Now()
	defer func() { t.ns.Add(int64(time.Since(start))) }()
	return t.Encoder.EmbedQueries(ctx, qs, p)
}

// timedTeacher measures time spent in the teacher's own scoring calls.
type timedTeacher struct {
	mining.Teacher
	ns atomic.Int64
}

func (t *timedTeacher) Score(ctx context.Context, q mining.Query, docs []mining.Doc) ([]float64, error) {
	start := time.Now()
	defer func() { t.ns.Add(int64(time.Since(start))) }()
	return t.Teacher.Score(ctx, q, docs)
}

// BenchmarkMiningSciFactTrain mines SciFact's 809 train queries as
// `annactl mine-negatives` does by default: candidates from the hybrid
// pipeline (BM25 + HNSW over MiniLM, RRF), dense MiniLM teacher, 7
// negatives from the top 50, margin 0.95. Documents come from the shared
// embedding cache; every query is embedded by the model (once: the
// retriever and the teacher share it through mining.QueryMemo).
//
// Reported, with one worker so that call times add up to wall time:
//   - queries/s;
//   - teacher_share: time inside Teacher.Score / wall time;
//   - model_share: time inside the model for queries (the dense teacher's
//     real work, run during retrieval and reused by the teacher) / wall;
//   - overhead: 1 − (model + teacher time outside the model) / wall, i.e. the
//     share of time in everything else: BM25, HNSW, fusion, document reads,
//     filtering, sampling, JSON, fsync'd checkpoints.
//
// Goal from the issue: overhead ≤ 20%.
func BenchmarkMiningSciFactTrain(b *testing.B) {
	dir := shareddata.Path(b, "datasets", "scifact")
	if _, err := home.RequireDefaultModel(); err != nil {
		b.Skip(err)
	}
	ds, err := beir.Load(dir, "train")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	mini := miningSide(b, ds, func() (*encoder.Model, error) { return encoder.Default(ctx) })
	eng, enc, tq := mini.eng, mini.enc, mini.tq
	for _, workers := range []int{1, 2} {
		b.Run(map[int]string{1: "workers=1", 2: "workers=2"}[workers], func(b *testing.B) {
			var wall, model, teach time.Duration
			queries := 0
			for range b.N {
				tq.ns.Store(0)
				// The engine and the teacher share enc: each query reaches
				// the model once per round (the memo holds 64 of 809).
				teacher := &timedTeacher{Teacher: &mining.DenseTeacher{Enc: enc, Vectors: mining.StoredVectors(eng)}}
				opt := mining.DefaultOptions()
				opt.Workers = workers
				m, err := mining.New(&mining.EngineRetriever{E: eng, Mode: engine.ModeHybrid}, teacher, mining.EngineCorpus{E: eng}, opt)
				if err != nil {
					b.Fatal(err)
				}
				src, err := mining.OpenBEIR(ctx, dir, "train", mining.PromptDefaults{})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				st, err := m.Run(ctx, src, filepath.Join(b.TempDir(), "mined.jsonl"))
				wall += time.Since(start)
				src.Close()
				if err != nil {
					b.Fatal(err)
				}
				queries += st.Units
				model += time.Duration(tq.ns.Load())
				teach += time.Duration(teacher.ns.Load())
			}
			b.ReportMetric(float64(queries)/wall.Seconds(), "queries/s")
			if workers == 1 {
				// The model runs inside retrieval (the memo then serves the
				// teacher), so model and teacher times do not overlap.
				b.ReportMetric(teach.Seconds()/wall.Seconds(), "teacher_share")
				b.ReportMetric(model.Seconds()/wall.Seconds(), "model_share")
				b.ReportMetric(1-(model+teach).Seconds()/wall.Seconds(), "overhead")
			}
		})
	}
}

// BenchmarkMiningSciFactPipelineTeacher mines SciFact's train queries with
// the pipeline as teacher (`--teacher fusion --teacher-model
// bge-small-en-v1.5`): candidates from BM25, MiniLM's and bge-small's dense
// lists fused by RRF; soft labels from the calibrated fusion of BM25 and both
// cosines. Documents come from the shared embedding cache (both models);
// every query is embedded by both models once (retrieval), the teacher
// reusing those vectors through each model's QueryMemo.
//
// Reported, one worker: queries/s; model_share: time inside the two models
// embedding queries / wall; teacher_share: time inside Teacher.Score (BM25
// of every scored document, stored-vector reads, cosines, the logistic) /
// wall; overhead: the rest — three searches, fusion, document reads,
// filtering, sampling, JSON, checkpoints. Calibration (256 queries) runs
// before the timed run and is reported apart. Goal from issue 16: the
// tool's own overhead ≤ 20 % of the time.
func BenchmarkMiningSciFactPipelineTeacher(b *testing.B) {
	dir := shareddata.Path(b, "datasets", "scifact")
	if _, err := home.RequireDefaultModel(); err != nil {
		b.Skip(err)
	}
	bgeDir := filepath.Join(home.ModelsDir(), "bge-small-en-v1.5")
	if _, err := os.Stat(filepath.Join(bgeDir, "anna-model.json")); err != nil {
		b.Skipf("bge-small-en-v1.5 not installed (annactl models install bge-small-en-v1.5): %v", err)
	}
	ds, err := beir.Load(dir, "train")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	mini := miningSide(b, ds, func() (*encoder.Model, error) { return encoder.Default(ctx) })
	bge := miningSide(b, ds, func() (*encoder.Model, error) { return encoder.Load(ctx, bgeDir, encoder.Options{}) })

	var wall, model, teach, calib time.Duration
	queries := 0
	for range b.N {
		mini.tq.ns.Store(0)
		bge.tq.ns.Store(0)
		fusion := &mining.FusionTeacher{Signals: []mining.Teacher{
			mining.MaxNormalized{Teacher: mining.EngineLexical{E: mini.eng}},
			&mining.DenseTeacher{Enc: mini.enc, Vectors: mining.StoredVectors(mini.eng)},
			&mining.DenseTeacher{Enc: bge.enc, Vectors: mining.StoredVectors(bge.eng)},
		}}
		teacher := &timedTeacher{Teacher: fusion}
		opt := mining.DefaultOptions()
		opt.Workers = 1
		retr := &mining.FusedRetriever{Lists: []mining.Retriever{
			&mining.EngineRetriever{E: mini.eng, Mode: engine.ModeLexical},
			&mining.EngineRetriever{E: mini.eng, Mode: engine.ModeDense},
			&mining.EngineRetriever{E: bge.eng, Mode: engine.ModeDense},
		}}
		cm, err := mining.New(retr, fusion, mining.EngineCorpus{E: mini.eng}, opt)
		if err != nil {
			b.Fatal(err)
		}
		src, err := mining.OpenBEIR(ctx, dir, "train", mining.PromptDefaults{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := cm.Calibrate(ctx, src, 256, fusion); err != nil {
			b.Fatal(err)
		}
		calib += time.Since(start)
		src.Close()
		mini.tq.ns.Store(0)
		bge.tq.ns.Store(0)
		m, err := mining.New(retr, teacher, mining.EngineCorpus{E: mini.eng}, opt)
		if err != nil {
			b.Fatal(err)
		}
		if src, err = mining.OpenBEIR(ctx, dir, "train", mining.PromptDefaults{}); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		st, err := m.Run(ctx, src, filepath.Join(b.TempDir(), "mined.jsonl"))
		wall += time.Since(start)
		src.Close()
		if err != nil {
			b.Fatal(err)
		}
		queries += st.Units
		model += time.Duration(mini.tq.ns.Load() + bge.tq.ns.Load())
		teach += time.Duration(teacher.ns.Load())
		b.Logf("teacher %s: nDCG@10 %.4f on %d queries", fusion.Name(), st.Quality.NDCG10(), st.Quality.Units)
	}
	b.ReportMetric(float64(queries)/wall.Seconds(), "queries/s")
	b.ReportMetric(model.Seconds()/wall.Seconds(), "model_share")
	b.ReportMetric(teach.Seconds()/wall.Seconds(), "teacher_share")
	b.ReportMetric(1-(model+teach).Seconds()/wall.Seconds(), "overhead")
	b.ReportMetric(calib.Seconds()/float64(b.N), "calibration-s")
}

// side is one model's half of a mining benchmark: its engine over the
// corpus, and the encoder (shared cache, query memo) whose time in the model
// for queries tq measures.
type side struct {
	eng *engine.Engine
	enc encoder.Encoder
	tq  *timedQueries
}

// miningSide loads a model, wraps it in the shared embedding cache and a
// query memo, and indexes ds's corpus with it (from the cache).
func miningSide(b *testing.B, ds *beir.Dataset, load func() (*encoder.Model, error)) side {
	ctx := context.Background()
	ort, err := load()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ort.Close() })
	cache, err := encoder.NewCache(ort, "")
	if err != nil {
		b.Fatal(err)
	}
	tq := &timedQueries{Encoder: ort}
	enc, err := mining.NewQueryMemo(cache, tq, 64)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.Open(ctx, filepath.Join(b.TempDir(), "anna"), engine.Options{Encoder: enc})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	if _, err := ingest.Slice(ctx, eng, ds.Corpus, ingest.Options{Batch: 1024}); err != nil {
		b.Fatal(err)
	}
	return side{eng, enc, tq}
}
