package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// EvalRun is one dataset's evaluation: a score line per retrieval mode.
type EvalRun struct {
	Dataset string // shown as given, e.g. "scifact (test)"
	Queries int    // judged queries (0: not shown)
	Modes   []ModeScores
}

// ModeScores is one retrieval mode's scores on a dataset: the means over
// the judged queries, each in [0, 1], and the mean wall time per query.
type ModeScores struct {
	Mode                          string // e.g. bm25, dense, hybrid, hybrid+rerank
	NDCG10, Recall100, MRR10, MAP float64
	MsPerQuery                    float64 // 0: not measured
}

// evalMetrics are the charted metrics, in order.
var evalMetrics = []struct {
	name string
	get  func(ModeScores) float64
}{
	{"nDCG@10", func(s ModeScores) float64 { return s.NDCG10 }},
	{"Recall@100", func(s ModeScores) float64 { return s.Recall100 }},
	{"MRR@10", func(s ModeScores) float64 { return s.MRR10 }},
	{"MAP", func(s ModeScores) float64 { return s.MAP }},
}

// WriteEval writes the HTML report of an evaluation over one or more
// datasets: for each metric (nDCG@10, Recall@100, MRR@10, MAP, and ms/query
// when any mode measured it) a bar chart with a group of bars per dataset,
// one bar per mode side by side, then a table per dataset with the best
// value of each column in bold. Modes are drawn in the order they first
// appear; a mode a dataset lacks has no bar there. It refuses no runs, a
// dataset without modes, a mode named twice in a dataset, and scores that
// are not finite or outside [0, 1].
func WriteEval(w io.Writer, title string, runs []EvalRun) error {
	modes, err := checkEval(runs)
	if err != nil {
		return err
	}
	datasets := make([]string, len(runs))
	for i, r := range runs {
		datasets[i] = r.Dataset
	}
	pg := &page{Title: title, Subtitle: fmt.Sprintf("%d dataset%s; modes: %s", len(runs), plural(len(runs)), strings.Join(modes, ", "))}
	timed := false
	for _, r := range runs {
		for _, s := range r.Modes {
			timed = timed || s.MsPerQuery > 0
		}
	}
	pg.Blocks = append(pg.Blocks, block{Heading: "Scores by mode"})
	for _, m := range evalMetrics {
		b, err := barFigure(m.name, m.name, m.name+" by dataset, one bar per mode.", "%.3f", datasets, modes, runs, m.get, 1)
		if err != nil {
			return err
		}
		pg.Blocks = append(pg.Blocks, b)
	}
	if timed {
		b, err := barFigure("Time per query", "ms/query", "Mean wall time per query in milliseconds (lower is better); no bar: not measured.", "%.1f", datasets, modes, runs,
			func(s ModeScores) float64 {
				if s.MsPerQuery == 0 {
					return math.NaN() // not measured
				}
				return s.MsPerQuery
			}, 0)
		if err != nil {
			return err
		}
		pg.Blocks = append(pg.Blocks, b)
	}
	for _, r := range runs {
		h := r.Dataset
		if r.Queries > 0 {
			h = fmt.Sprintf("%s: %d queries", r.Dataset, r.Queries)
		}
		pg.Blocks = append(pg.Blocks, block{Heading: h}, block{Table: evalTable(r, timed)})
	}
	return pg.write(w)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// checkEval validates runs and returns the modes in first-seen order.
func checkEval(runs []EvalRun) ([]string, error) {
	if len(runs) == 0 {
		return nil, errors.New("report: no evaluation runs")
	}
	var modes []string
	seen := map[string]bool{}
	for _, r := range runs {
		if len(r.Modes) == 0 {
			return nil, fmt.Errorf("report: dataset %q has no modes", r.Dataset)
		}
		in := map[string]bool{}
		for _, s := range r.Modes {
			if in[s.Mode] {
				return nil, fmt.Errorf("report: dataset %q has mode %q twice", r.Dataset, s.Mode)
			}
			in[s.Mode] = true
			for _, m := range evalMetrics {
				if v := m.get(s); !(v >= 0 && v <= 1) {
					return nil, fmt.Errorf("report: dataset %q mode %q: %s is %v, want a value in [0, 1]", r.Dataset, s.Mode, m.name, v)
				}
			}
			if math.IsNaN(s.MsPerQuery) || math.IsInf(s.MsPerQuery, 0) || s.MsPerQuery < 0 {
				return nil, fmt.Errorf("report: dataset %q mode %q: ms/query is %v", r.Dataset, s.Mode, s.MsPerQuery)
			}
			if !seen[s.Mode] {
				seen[s.Mode] = true
				modes = append(modes, s.Mode)
			}
		}
	}
	return modes, nil
}

// scoreOf finds mode's scores in r.
func scoreOf(r EvalRun, mode string) (ModeScores, bool) {
	for _, s := range r.Modes {
		if s.Mode == mode {
			return s, true
		}
	}
	return ModeScores{}, false
}

// barFigure draws get for every (dataset, mode) as grouped bars, labelled
// with format where they are wide enough (get's NaN: no bar); yMax > 0
// fixes the value axis at [0, yMax].
func barFigure(title, y, caption, format string, datasets, modes []string, runs []EvalRun, get func(ModeScores) float64, yMax float64) (block, error) {
	p := newPlot(title, "", y)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	p.NominalX(datasets...)
	// The bars of a group share 80 % of the space between groups.
	plotW := float64(figW) - 180
	barW := vg.Length(math.Min(36, 0.8*plotW/float64(len(datasets))/float64(len(modes))))
	var legend []legendEntry
	var top float64
	for i, mode := range modes {
		vals := make(plotter.Values, len(runs))
		for j, r := range runs {
			if s, ok := scoreOf(r, mode); ok && !math.IsNaN(get(s)) {
				vals[j] = get(s)
			}
		}
		bars, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return block{}, fmt.Errorf("report: %s: %w", title, err)
		}
		bars.Color = colour(i)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(modes)-1)/2) * barW
		p.Add(bars)
		legend = append(legend, legendEntry{mode, bars})
		if barW >= 26 {
			// The value above each bar, where it fits.
			var xyl plotter.XYLabels
			for j, r := range runs {
				if s, ok := scoreOf(r, mode); ok && !math.IsNaN(get(s)) {
					xyl.XYs = append(xyl.XYs, plotter.XY{X: float64(j), Y: get(s)})
					xyl.Labels = append(xyl.Labels, fmt.Sprintf(format, get(s)))
				}
			}
			if len(xyl.XYs) > 0 {
				labels, err := plotter.NewLabels(xyl)
				if err != nil {
					return block{}, fmt.Errorf("report: %s: %w", title, err)
				}
				for k := range labels.TextStyle {
					labels.TextStyle[k].Font.Size = vg.Points(8)
					labels.TextStyle[k].XAlign = draw.XCenter
				}
				labels.Offset = vg.Point{X: bars.Offset, Y: vg.Points(2)}
				p.Add(labels)
			}
		}
		top = math.Max(top, slices.Max(vals))
	}
	p.X.Min, p.X.Max = -0.5, float64(len(datasets))-0.5
	p.Y.Min, p.Y.Max = 0, top*1.12 // room for the labels
	if yMax > 0 {
		p.Y.Max = yMax
	}
	svg, err := renderSVG(p, legend)
	if err != nil {
		return block{}, err
	}
	return block{Figure: &figure{SVG: svg, Caption: caption}}, nil
}

// evalTable is a dataset's scores, a row per mode, the best of each column
// in bold (the least for ms/query).
func evalTable(r EvalRun, timed bool) *table {
	t := &table{Head: []string{"mode"}}
	for _, m := range evalMetrics {
		t.Head = append(t.Head, m.name)
	}
	if timed {
		t.Head = append(t.Head, "ms/query")
	}
	best := make([]float64, len(evalMetrics))
	fastest := math.Inf(1)
	for _, s := range r.Modes {
		for k, m := range evalMetrics {
			best[k] = math.Max(best[k], m.get(s))
		}
		if s.MsPerQuery > 0 {
			fastest = math.Min(fastest, s.MsPerQuery)
		}
	}
	for _, s := range r.Modes {
		row := []cell{{Text: s.Mode}}
		for k, m := range evalMetrics {
			v := m.get(s)
			row = append(row, cell{Text: fmt.Sprintf("%.4f", v), Num: true, Strong: len(r.Modes) > 1 && v == best[k]})
		}
		if timed {
			c := cell{Text: "—", Num: true}
			if s.MsPerQuery > 0 {
				c = cell{Text: fmt.Sprintf("%.1f", s.MsPerQuery), Num: true, Strong: len(r.Modes) > 1 && s.MsPerQuery == fastest}
			}
			row = append(row, c)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
