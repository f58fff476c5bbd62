package adapt

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// TestGuardCorpusMeasures is a measurement (skipped unless GUARD_RUNS is
// set): whole-corpus guards. For each run folder, every held-out query
// (heldout.jsonl, heldout-log.jsonl; at most GUARD_MAXQ) is searched over
// the whole corpus by exact cosine with the base model and the student;
// their top 10 are scored against pseudo-judgments from models other
// than the student's family: BM25 and the teacher model (GUARD_TEACHER,
// default bge-small-en-v1.5), fused by RRF; then corpusCheck, the check
// adapt runs (the last of the four measures), with the hybrid retrieval it
// can score beside it. GUARD_STUDENT names the
// student's model directory inside each run folder (default
// work/student/model); GUARD_EXTRACTIVE=1 has the last measure add
// extractive queries to fewer than minCheckQueries held out, as check
// does for a run that trained on none (GUARD_EXTRACTIVE=only: those
// queries alone); GUARD_CHECK_ONLY=1 measures only the check.
//
//	GUARD_RUNS=DIR1,DIR2 go test -v -run TestGuardCorpusMeasures -timeout 120m ./train/adapt
func TestGuardCorpusMeasures(t *testing.T) {
	runs := os.Getenv("GUARD_RUNS")
	if runs == "" {
		t.Skip("a measurement: set GUARD_RUNS")
	}
	ctx := context.Background()
	cacheDir := os.Getenv("GUARD_CACHE")
	if cacheDir == "" {
		cacheDir = filepath.Join(os.TempDir(), "guardcache")
	}
	tm := os.Getenv("GUARD_TEACHER")
	if tm == "" {
		tm = filepath.Join(home.ModelsDir(), "bge-small-en-v1.5")
	}
	maxQ, _ := strconv.Atoi(os.Getenv("GUARD_MAXQ"))
	load := func(dir, cache string) (encoder.Encoder, func() error) {
		e, err := encoder.Load(ctx, dir, encoder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := encoder.NewCache(e, cache)
		if err != nil {
			t.Fatal(err)
		}
		return c, e.Close
	}
	base, closeBase := load(home.DefaultModel(), cacheDir)
	defer closeBase()
	teacher, closeTeacher := load(tm, "")
	defer closeTeacher()
	checkOnly := os.Getenv("GUARD_CHECK_ONLY") != "" // only the check as adapt runs it
	for _, w := range strings.Split(runs, ",") {
		eng, err := engine.Open(ctx, w+"/idx", engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := eng.Teacher().IDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string // the corpus, for the first three measures
		for lo := 0; lo < len(ids) && !checkOnly; lo += 256 {
			docs, err := eng.Get(ctx, ids[lo:min(lo+256, len(ids))]...)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				texts = append(texts, engine.EmbedText(d))
			}
		}
		studentDir := "work/student/model"
		if s := os.Getenv("GUARD_STUDENT"); s != "" {
			studentDir = s // another model of the run's, e.g. its student re-exported
		}
		student, closeStudent := load(filepath.Join(w, studentDir), cacheDir)
		embed := func(enc encoder.Encoder) [][]float32 {
			var out [][]float32
			for lo := 0; lo < len(texts); lo += 64 {
				v, err := enc.EmbedDocuments(ctx, texts[lo:min(lo+64, len(texts))])
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v...)
			}
			return out
		}
		r := &run{cfg: Config{Index: w + "/idx", Work: w + "/work", TeacherModels: []string{tm}}, embedBase: true}
		held, err := r.heldQueries()
		if err != nil {
			t.Fatal(err)
		}
		dv := [3][][]float32{embed(base), embed(student), embed(teacher)}
		var qs []string // the held-out queries, for the first three measures
		if !checkOnly {
			for _, q := range held {
				qs = append(qs, q.Text)
			}
		}
		if maxQ > 0 && len(qs) > maxQ {
			qs = qs[:maxQ]
		}
		var sum [2][4]float64
		for _, q := range qs {
			var tops [3][]int
			for m, enc := range []encoder.Encoder{base, student, teacher} {
				qv, err := enc.EmbedQueries(ctx, []string{q}, encoder.Prompt{})
				if err != nil {
					t.Fatal(err)
				}
				tops[m] = topCos(qv[0], dv[m], 100)
			}
			res, err := eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeLexical, K: 100})
			if err != nil {
				t.Fatal(err)
			}
			at := map[string]int{}
			for i, id := range ids {
				at[id] = i
			}
			var lex []int
			for _, r := range res {
				lex = append(lex, at[r.ID])
			}
			// pseudo-judgments: RRF of BM25 and the teacher model (g2), and
			// of BM25, the teacher model and the base (g3).
			g2, g3 := map[int]float64{}, map[int]float64{}
			for _, l := range [][]int{lex, tops[2]} {
				for r, d := range l {
					g2[d] += 1 / float64(61+r)
					g3[d] += 1 / float64(61+r)
				}
			}
			for r, d := range tops[0] {
				g3[d] += 1 / float64(61+r)
			}
			top10 := map[int]bool{}
			for _, d := range topOf(g2, 10) {
				top10[d] = true
			}
			bge10 := map[int]bool{}
			for _, d := range tops[2][:10] {
				bge10[d] = true
			}
			for m := 0; m < 2; m++ {
				ranked := tops[m][:10]
				var ov float64
				bin := map[int]float64{}
				for d := range top10 {
					bin[d] = 1
				}
				for _, d := range ranked {
					if bge10[d] {
						ov++
					}
				}
				sum[m][0] += ov / 10
				sum[m][1] += gainNDCG(ranked, g2)
				sum[m][2] += gainNDCG(ranked, g3)
				sum[m][3] += gainNDCG(ranked, bin)
			}
		}
		if n := float64(len(qs)); n > 0 {
			t.Logf("%s (%d q): overlap@10 with teacher model %.4f → %.4f | nDCG@10 RRF(BM25,teacher) %.4f → %.4f | RRF(BM25,teacher,base) %.4f → %.4f | binary top10 RRF(BM25,teacher) %.4f → %.4f",
				w, len(qs), sum[0][0]/n, sum[1][0]/n, sum[0][1]/n, sum[1][1]/n, sum[0][2]/n, sum[1][2]/n, sum[0][3]/n, sum[1][3]/n)
		}
		eng.Close()
		// The check as adapt runs it (corpusCheck; the index's model
		// embedded, since the run's index may hold the student's vectors).
		e, err := r.openIndex(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch os.Getenv("GUARD_EXTRACTIVE") {
		case "":
		case "only": // extractive queries instead of the held-out ones
			if held, err = extractiveCheck(ctx, e, maxCheckQueries); err != nil {
				t.Fatal(err)
			}
		default: // as check does for a run without extractive queries
			if held, _, err = withExtractive(ctx, e, held); err != nil {
				t.Fatal(err)
			}
		}
		cs, err := r.corpusCheck(ctx, e, base, student, held, true)
		cn := len(held)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: corpusCheck on %d queries: dense %.4f → %.4f, hybrid %.4f → %.4f", w, cn, cs.Base, cs.Student, cs.BaseHybrid, cs.StudentHybrid)
		closeStudent()
	}
}

func topCos(q []float32, docs [][]float32, k int) []int {
	s := make([]float64, len(docs))
	for i, d := range docs {
		for j := range d {
			s[i] += float64(q[j]) * float64(d[j])
		}
	}
	ord := make([]int, len(docs))
	for i := range ord {
		ord[i] = i
	}
	sort.SliceStable(ord, func(a, b int) bool { return s[ord[a]] > s[ord[b]] })
	return ord[:min(k, len(ord))]
}

func topOf(g map[int]float64, k int) []int {
	var ds []int
	for d := range g {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(a, b int) bool {
		if g[ds[a]] != g[ds[b]] {
			return g[ds[a]] > g[ds[b]]
		}
		return ds[a] < ds[b]
	})
	return ds[:min(k, len(ds))]
}

func gainNDCG(ranked []int, g map[int]float64) float64 {
	var dcg, idcg float64
	for r, d := range ranked {
		dcg += g[d] / math.Log2(float64(r)+2)
	}
	for r, d := range topOf(g, len(ranked)) {
		idcg += g[d] / math.Log2(float64(r)+2)
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}
