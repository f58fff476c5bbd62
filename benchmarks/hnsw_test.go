package benchmarks

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/index/dense/hnsw"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/index/dense"
	"github.com/anna-search/anna/internal/index/dense/densetest"
)

// BenchmarkHNSW builds our index (internal/index/dense over third_party/hnsw) and
// hnswlib's and FAISS's HNSW on the same 100,000 clustered 384-d vectors
// with the same M=16, efConstruction=200, then sweeps efSearch. For each it
// reports the build time and the QPS at the smallest ef reaching recall@10
// >= 0.95 against exact search, and the ratios ours/hnswlib. Everything is
// single-threaded (our build and search are; the Python script pins both
// libraries to one thread) so QPS compares per-core speed.
//
//	go test -v -run '^$' -bench HNSW -benchtime 1x ./benchmarks/
//
// (-v shows the whole ef sweep; without it the log is cut after 10 lines.)
//
// The vectors: 1000 Gaussian clusters, noise spread 1.5 (cosine ≈ 0.55 to
// the centre), the same generator and seed as index/dense's recall test.
// ANNA_HNSW_BENCH_N overrides the 100,000 for quick runs and
// ANNA_HNSW_BENCH_SPREAD the spread (2.5 is near-uniform noise, where every
// HNSW's recall collapses).
func BenchmarkHNSW(b *testing.B) {
	n, nq, dim, k := 100_000, 1000, 384, 10
	if s := os.Getenv("ANNA_HNSW_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 100 {
			b.Fatalf("ANNA_HNSW_BENCH_N=%q: want an integer >= 100", s)
		}
		n = v
	}
	spread := 1.5
	if s := os.Getenv("ANNA_HNSW_BENCH_SPREAD"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			b.Fatalf("ANNA_HNSW_BENCH_SPREAD=%q: want a positive number", s)
		}
		spread = v
	}
	const m, efc = 16, 200
	efs := []int{10, 16, 24, 32, 48, 64, 96, 128}

	data := densetest.Clustered(1, n+nq, dim, 1000, spread)
	base, queries := data[:n], data[n:]
	gt := hnswExactKNN(base, queries, k)

	ids := make([]string, n)
	pos := make(map[string]int32, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("doc%07d", i)
		pos[ids[i]] = int32(i)
	}
	for i := 0; i < b.N; i++ {
		ix := dense.New(dense.Config{Dim: dim, M: m, EfConstruction: efc})
		start := time.Now()
		docs := make([]dense.Doc, n)
		for i, id := range ids {
			docs[i] = dense.Doc{ID: id, Vectors: [][]float32{base[i]}}
		}
		if err := ix.Add(context.Background(), docs); err != nil {
			b.Fatal(err)
		}
		ourBuild := time.Since(start).Seconds()
		ours := hnswSweep(b, ix, queries, gt, pos, k, efs, 3)
		b.Logf("ours: build %.1fs (n=%d dim=%d spread=%v M=%d efC=%d)", ourBuild, n, dim, spread, m, efc)
		for _, p := range ours {
			b.Logf("ours: ef=%-4d recall@10=%.4f QPS=%.0f", p.EF, p.Recall, p.QPS)
		}
		b.ReportMetric(ourBuild, "build_s")
		ourAt := hnswAtRecall(ours, 0.95)
		if ourAt == nil {
			b.Errorf("our index never reaches recall@10 0.95 (max ef %d)", efs[len(efs)-1])
		} else {
			b.ReportMetric(ourAt.QPS, "QPS@0.95")
			b.ReportMetric(float64(ourAt.EF), "ef@0.95")
		}

		ref := hnswRunBaseline(b, base, queries, gt, k, m, efc, efs)
		for _, lib := range []string{"hnswlib", "faiss"} {
			r, ok := ref[lib]
			if !ok || r.Error != "" {
				b.Logf("%s: skipped: %s", lib, r.Error)
				continue
			}
			for _, p := range r.Sweep {
				b.Logf("%s %s: ef=%-4d recall@10=%.4f QPS=%.0f", lib, r.Version, p.EF, p.Recall, p.QPS)
			}
			b.ReportMetric(r.BuildS, lib+"_build_s")
			at := hnswAtRecall(r.Sweep, 0.95)
			if at == nil || ourAt == nil {
				b.Logf("%s: build %.1fs; no ratio at recall 0.95 (%s reaches it: %v; ours: %v)",
					lib, r.BuildS, lib, at != nil, ourAt != nil)
				continue
			}
			b.Logf("%s: build %.1fs; at recall>=0.95: ef=%d QPS=%.0f; ours/%s QPS ratio %.2f, build time ratio %.2f",
				lib, r.BuildS, at.EF, at.QPS, lib, ourAt.QPS/at.QPS, ourBuild/r.BuildS)
			b.ReportMetric(ourAt.QPS/at.QPS, "x_"+lib+"_qps")
			b.ReportMetric(ourBuild/r.BuildS, "x_"+lib+"_build")
		}
	}
}

type hnswSweepPoint struct {
	EF     int     `json:"ef"`
	Recall float64 `json:"recall"`
	QPS    float64 `json:"qps"`
}

type hnswLibResult struct {
	Version string           `json:"version"`
	BuildS  float64          `json:"build_s"`
	Sweep   []hnswSweepPoint `json:"sweep"`
	Error   string           `json:"error"`
}

// hnswAtRecall returns the sweep point with the smallest ef reaching target.
func hnswAtRecall(sweep []hnswSweepPoint, target float64) *hnswSweepPoint {
	for i := range sweep {
		if sweep[i].Recall >= target {
			return &sweep[i]
		}
	}
	return nil
}

// hnswExactKNN returns, per query, the indices of the k base vectors with the
// largest dot product (the vectors are normalised: cosine).
func hnswExactKNN(base, queries [][]float32, k int) [][]int32 {
	type sd struct {
		i int32
		s float32
	}
	out := make([][]int32, len(queries))
	top := make([]sd, 0, k+1)
	for qi, q := range queries {
		top = top[:0]
		for i, v := range base {
			s := hnsw.Dot(q, v)
			if len(top) == k && s <= top[k-1].s {
				continue
			}
			j, _ := slices.BinarySearchFunc(top, s, func(e sd, s float32) int {
				if e.s > s {
					return -1
				}
				return 1
			})
			top = slices.Insert(top, j, sd{int32(i), s})
			if len(top) > k {
				top = top[:k]
			}
		}
		row := make([]int32, len(top))
		for j, e := range top {
			row[j] = e.i
		}
		out[qi] = row
	}
	return out
}

func hnswRecall(found, gt [][]int32) float64 {
	hits, total := 0, 0
	for i := range gt {
		for _, f := range found[i] {
			if slices.Contains(gt[i], f) {
				hits++
			}
		}
		total += len(gt[i])
	}
	return float64(hits) / float64(total)
}

func hnswWriteF32(b *testing.B, path string, rows [][]float32) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	var buf [4]byte
	for _, r := range rows {
		for _, x := range r {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(x))
			w.Write(buf[:])
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// hnswRunBaseline runs benchmarks/hnsw/baseline.py on the same vectors. It
// returns nil (and logs why) when the reference venv is missing.
func hnswRunBaseline(b *testing.B, base, queries [][]float32, gt [][]int32, k, m, efc int, efs []int) map[string]hnswLibResult {
	b.Helper()
	python := filepath.Join(home.Dir(), "venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		b.Logf("hnswlib/FAISS reference skipped: %s not found (run `make pydeps`)", python)
		return nil
	}
	dir := b.TempDir()
	hnswWriteF32(b, filepath.Join(dir, "base.f32"), base)
	hnswWriteF32(b, filepath.Join(dir, "queries.f32"), queries)
	gtf := make([][]float32, len(gt))
	for i, row := range gt {
		gtf[i] = make([]float32, len(row))
		for j, x := range row {
			gtf[i][j] = math.Float32frombits(uint32(x)) // int32 bits, read back as int32
		}
	}
	hnswWriteF32(b, filepath.Join(dir, "gt.i32"), gtf)
	efStr := make([]string, len(efs))
	for i, e := range efs {
		efStr[i] = strconv.Itoa(e)
	}
	script := filepath.Join("hnsw", "baseline.py")
	cmd := exec.Command(python, script,
		"--base", filepath.Join(dir, "base.f32"), "--queries", filepath.Join(dir, "queries.f32"),
		"--gt", filepath.Join(dir, "gt.i32"), "--n", strconv.Itoa(len(base)), "--nq", strconv.Itoa(len(queries)),
		"--dim", strconv.Itoa(len(base[0])), "--k", strconv.Itoa(k), "--M", strconv.Itoa(m),
		"--efc", strconv.Itoa(efc), "--ef", strings.Join(efStr, ","))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s: %v", script, err)
	}
	var res map[string]hnswLibResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("%s output %q: %v", script, out, err)
	}
	return res
}

// hnswSweep searches ix with every query at each ef (the best of reps
// timed passes) and returns recall@k against gt and QPS per ef; pos maps a
// hit's ID to its row in gt's numbering.
func hnswSweep(b *testing.B, ix *dense.Index, queries [][]float32, gt [][]int32, pos map[string]int32, k int, efs []int, reps int) []hnswSweepPoint {
	b.Helper()
	var out []hnswSweepPoint
	for _, ef := range efs {
		found := make([][]int32, len(queries))
		best := math.Inf(1)
		for rep := 0; rep < reps; rep++ {
			start := time.Now()
			for qi, q := range queries {
				hits, err := ix.Search(context.Background(), q, k, dense.SearchOptions{Ef: ef})
				if err != nil {
					b.Fatal(err)
				}
				row := make([]int32, len(hits))
				for j, h := range hits {
					row[j] = pos[h.ID]
				}
				found[qi] = row
			}
			best = min(best, time.Since(start).Seconds())
		}
		out = append(out, hnswSweepPoint{EF: ef, Recall: hnswRecall(found, gt), QPS: float64(len(queries)) / best})
	}
	return out
}
