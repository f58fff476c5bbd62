package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/inference"
	gobert "github.com/anna-search/anna/internal/model/bert"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// rooflineModels are the encoders BenchmarkEncoderRoofline measures, each
// where it is installed under $ANNA_HOME/models (or its archive is
// downloaded, for the catalogue's).
var rooflineModels = []string{"all-MiniLM-L6-v2", "bge-small-en-v1.5", "e5-small-v2", "multilingual-e5-small"}

// BenchmarkEncoderRoofline is issue 65's roofline: for each model of
// rooflineModels in float32 and int8, the first ANNA_BENCH_DOCS (default
// 100) SciFact abstracts (title + text, the model's document prefix, its
// max length), cut into the batches the encoder runs (internal/inference's
// Plan: one token length a batch, at most 32 texts and 1,024 tokens),
// through
//
//   - model/bert's Go forward on one thread (ForwardProfile), timed by that
//     thread's CPU clock per op class: the weight products (GEMM),
//     attention (scores, softmax, weighted sum) and the elementwise rest,
//     each class's op/s (a multiply-add is 2 ops) against the peak of the
//     kernel it runs on one core (tensor.MeasurePeaks: the int8 GEMM's
//     kernel, AMX, AVX-512 VNNI or AVX2, for int8 products, the FMA for
//     float32 products and attention, which is float32 in both forms);
//   - the encoder as it runs (internal/inference's Run: both cores, batches in
//     parallel) through the Go backend and through ONNX Runtime, the same
//     texts, in turn: docs per CPU second of this process, the whole
//     model's op/s per CPU second and its share of the ceiling, the time
//     the model's products and attention would take at the peaks
//     (elementwise work counted as free) over the time taken.
//
// The machine is shared: every rate is per CPU second, and the peaks are
// measured in the same run. GODEBUG=cpu.amxint8=off (then also
// cpu.avx512vnni=off) moves the Go side to the next int8 kernel; ONNX
// Runtime picks its own.
//
//	go test -v ./benchmarks -run '^$' -bench EncoderRoofline -benchtime 1x -timeout 60m
func BenchmarkEncoderRoofline(b *testing.B) {
	docs := 100
	if s := os.Getenv("ANNA_BENCH_DOCS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("ANNA_BENCH_DOCS=%q: want a positive number", s)
		}
		docs = n
	}
	all := encSciFactTexts(b)
	texts := all[:min(docs, len(all))]
	f32k, i8k := tensor.Kernels()
	peaks := map[string]float64{}
	var line []string
	for _, p := range tensor.MeasurePeaks(300 * time.Millisecond) {
		peaks[p.Name] = p.OpsPerSec
		line = append(line, fmt.Sprintf("%s %.0f G", p.Name, p.OpsPerSec/1e9))
	}
	b.Logf("peaks per core (op/s, a multiply-add 2 ops): %s; kernels: float32 %s, int8 %s", strings.Join(line, ", "), f32k, i8k)
	fmaPeak := peaks["avx512-fma"]
	if f32k != "avx512" {
		fmaPeak = peaks["avx2-fma"]
	}
	i8Peak := peaks[map[string]string{"amx": "amx-int8", "avx512vnni": "avx512-vnni", "avx2": "avx2-int8"}[i8k]]
	for _, name := range rooflineModels {
		for _, quant := range []string{"", model.QuantizeInt8} {
			form := "float32"
			if quant != "" {
				form = quant
			}
			b.Run(name+"/"+form, func(b *testing.B) {
				dir, why := rooflineDir(b, name, quant)
				if dir == "" {
					b.Skip(why)
				}
				peak, vnni := fmaPeak, 0.0
				if quant != "" {
					peak = i8Peak
					if i8k == "amx" {
						vnni = peaks["avx512-vnni"]
					}
				}
				for range b.N {
					rooflineModel(b, dir, texts, peak, fmaPeak, vnni)
				}
			})
		}
	}
}

// rooflineDir is the directory of model name in form quant: installed
// (an int8 one only if its activations are quantized per row, today's
// graph), else imported into a temporary directory by the catalogue from
// its downloaded archive or kept source files; or "" and why not.
func rooflineDir(b *testing.B, name, quant string) (string, string) {
	b.Helper()
	installed := name
	if quant != "" {
		installed += "-" + quant
	}
	dir := filepath.Join(home.ModelsDir(), installed)
	if man, err := model.LoadManifest(dir); err == nil && (quant == "" || man.Activations == model.ActivationsRow) {
		return dir, ""
	}
	e, err := catalog.Lookup(name)
	if err != nil {
		return "", fmt.Sprintf("%s is not installed as %s today's form, nor in this catalogue", installed, dir)
	}
	return importModel(b, e, quant)
}

// rooflineSpec opens a model as the encoder does (its batching defaults).
var rooflineSpec = inference.Spec{
	Task: model.TaskEmbed, Name: "roofline", Want: "an embedding model", Window: 4096,
	Defaults: inference.Options{IntraOpThreads: 1, InterOpThreads: 1, BatchSize: 32},
}

// rooflineModel measures one model directory (see BenchmarkEncoderRoofline);
// vnni > 0 (int8 on an AMX CPU) also gives the shares of the ceiling with
// the products at VNNI's peak, the next kernel's, which the goal
// names.
func rooflineModel(b *testing.B, dir string, texts []string, peak, fmaPeak, vnni float64) {
	ctx := context.Background()
	md, err := model.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	in := make([]string, len(texts))
	for i, t := range texts {
		in[i] = md.Manifest.DocumentPrefix + t
	}
	plan, err := inference.Open(ctx, dir, rooflineSpec, inference.Options{Backend: inference.DefaultBackend()})
	if err != nil {
		b.Fatal(err)
	}
	defer plan.Close()
	encs, batches := plan.Plan(in)
	tokens := 0
	for _, e := range encs {
		tokens += len(e.IDs)
	}
	n := float64(len(texts))
	b.Logf("%s: %d texts, %d tokens (%.0f a text), %d batches", md.Manifest.Name, len(texts), tokens, float64(tokens)/n, len(batches))

	// The Go forward on one thread, by op class.
	var prof *gobert.Profile
	if gm, err := gobert.LoadGraph(md.ONNXPath, md.Config); err != nil {
		b.Logf("Go forward: not run: %v", err)
	} else {
		prof = rooflineProfile(b, gm, encs, batches, plan.Tokenizer().PadID())
		total, _ := prof.Total()
		for c := range gobert.NumOpClasses {
			p := peak
			if c == gobert.Attention {
				p = fmaPeak
			}
			t := prof.Time[c].Seconds()
			share := t / total.Seconds()
			switch c {
			case gobert.Elementwise:
				b.Logf("  go, 1 thread, %-11s %5.1f %% of the time, %6.2f G values/s", c, 100*share, prof.Ops[c]/t/1e9)
			default:
				b.Logf("  go, 1 thread, %-11s %5.1f %% of the time, %8.1f G op/s, %5.1f %% of its kernel's peak (%.3g ops a text)", c, 100*share, prof.Ops[c]/t/1e9, 100*prof.Ops[c]/t/p, prof.Ops[c]/n)
			}
			b.ReportMetric(share, "go-"+c.String()+"-share")
			if c != gobert.Elementwise {
				b.ReportMetric(prof.Ops[c]/t/p, "go-"+c.String()+"/peak")
			}
		}
		arith := prof.Ops[gobert.GEMM] + prof.Ops[gobert.Attention]
		ceil := prof.Ops[gobert.GEMM]/peak + prof.Ops[gobert.Attention]/fmaPeak
		b.Logf("  go, 1 thread, whole model: %.1f docs per CPU second, %.1f G op/s, %.1f %% of the ceiling%s",
			n/total.Seconds(), arith/total.Seconds()/1e9, 100*ceil/total.Seconds(), vnniShare(prof, peak, fmaPeak, vnni, total.Seconds()))
		b.ReportMetric(n/total.Seconds(), "go-1thread-docs/cpu-s")
		b.ReportMetric(ceil/total.Seconds(), "go-1thread/ceiling")
	}

	// The encoder as it runs, Go and ONNX Runtime in turn.
	for _, be := range []string{inference.BackendGo, inference.BackendORT} {
		enc, err := encoder.Load(ctx, dir, encoder.Options{Backend: be})
		if err != nil {
			b.Logf("%s: not run: %v", be, err)
			continue
		}
		if _, err := enc.EmbedDocuments(ctx, texts[:min(4, len(texts))]); err != nil { // warm-up
			b.Fatal(err)
		}
		c0, w0 := cpuTime(b), time.Now()
		if _, err := enc.EmbedDocuments(ctx, texts); err != nil {
			b.Fatal(err)
		}
		cpu, wall := (cpuTime(b) - c0).Seconds(), time.Since(w0).Seconds()
		enc.Close()
		line := fmt.Sprintf("  %-3s encoder: %.1f docs per CPU second (%.1f docs/s on %d cores)", be, n/cpu, n/wall, runtime.GOMAXPROCS(0))
		if prof != nil {
			arith := prof.Ops[gobert.GEMM] + prof.Ops[gobert.Attention]
			ceil := prof.Ops[gobert.GEMM]/peak + prof.Ops[gobert.Attention]/fmaPeak
			line += fmt.Sprintf(", %.1f G op/s per CPU second, %.1f %% of the ceiling%s", arith/cpu/1e9, 100*ceil/cpu, vnniShare(prof, peak, fmaPeak, vnni, cpu))
			b.ReportMetric(ceil/cpu, be+"/ceiling")
		}
		b.Log(line)
		b.ReportMetric(n/cpu, be+"-docs/cpu-s")
	}
}

// vnniShare is ", X % at VNNI's peak": the share of the ceiling taken by a
// run of secs with the products at the VNNI peak vnni; "" when vnni is 0.
func vnniShare(prof *gobert.Profile, peak, fmaPeak, vnni, secs float64) string {
	if vnni == 0 {
		return ""
	}
	ceil := prof.Ops[gobert.GEMM]/vnni + prof.Ops[gobert.Attention]/fmaPeak
	return fmt.Sprintf(" (%.1f %% with the products at VNNI's peak)", 100*ceil/secs)
}

// rooflineProfile runs every batch through gm on this goroutine's thread,
// timed by its CPU clock.
func rooflineProfile(b *testing.B, gm *gobert.Model, encs []tokenizer.Encoding, batches [][]int, pad int64) *gobert.Profile {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := &gobert.Profile{Clock: threadCPU}
	for _, rows := range batches {
		be := make([]tokenizer.Encoding, len(rows))
		for j, i := range rows {
			be[j] = encs[i]
		}
		ids, types, mask, seq := tokenizer.Pad(be, pad)
		if _, err := gm.ForwardProfile(&gobert.Batch{N: len(be), T: seq, IDs: ids, Types: types, Mask: mask}, 1, p); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}
