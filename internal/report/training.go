package report

import (
	"fmt"
	"github.com/anna-search/anna/internal/format/metrics"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// maxPoints bounds the points of a line: longer series are drawn as the
// means of consecutive buckets of steps (the caption says how many).
const maxPoints = 2000

// WriteTraining writes the HTML report of a training run drawn from its
// metrics: the loss (with its parts, and the held-out loss), learning rate,
// gradient norm and held-out accuracy by step, a summary and the settings.
// Plots with nothing to draw yet are replaced by a note. Non-finite values
// are left out of the plots.
func WriteTraining(w io.Writer, run metrics.Run, m metrics.Metrics) error {
	pg := &page{Title: "Training report: " + run.Name, Subtitle: subtitle(run)}
	pg.Blocks = append(pg.Blocks, block{Heading: "Summary"}, block{Table: trainingSummary(run, m)})

	bucket := max(1, (len(m.Steps)+maxPoints-1)/maxPoints)
	per := ""
	if bucket > 1 {
		per = fmt.Sprintf(" Each point of a by-step line is the mean of %d consecutive steps.", bucket)
	}
	steps := func(f func(metrics.Step) float64) plotter.XYs {
		xy := make(plotter.XYs, 0, len(m.Steps))
		for _, s := range m.Steps {
			xy = append(xy, plotter.XY{X: float64(s.Step), Y: f(s)})
		}
		return bucketMeans(finiteXYs(xy), bucket)
	}
	evals := func(f func(metrics.Eval) float64) plotter.XYs {
		xy := make(plotter.XYs, 0, len(m.Evals))
		for _, e := range m.Evals {
			xy = append(xy, plotter.XY{X: float64(e.Step), Y: f(e)})
		}
		return finiteXYs(xy)
	}

	// Loss, its parts and the held-out loss.
	loss := []series{{name: "training loss", xy: steps(func(s metrics.Step) float64 { return s.Loss })}}
	if hasPart(m.Steps, func(s metrics.Step) *float64 { return s.Contrastive }) {
		loss = append(loss, series{name: "label part", dashed: true, xy: steps(func(s metrics.Step) float64 { return part(s.Contrastive) })})
	}
	if hasPart(m.Steps, func(s metrics.Step) *float64 { return s.Distillation }) {
		loss = append(loss, series{name: "distillation part", dashed: true, xy: steps(func(s metrics.Step) float64 { return part(s.Distillation) })})
	}
	loss = append(loss, series{name: "held-out loss", points: true, xy: evals(func(e metrics.Eval) float64 { return e.Loss })})
	figs := []struct {
		title, y, caption string
		series            []series
		unit              bool
	}{
		{"Loss", "loss", "Training loss by optimizer step (mean over the step's micro-batches) and held-out loss at each evaluation (step 0: before training)." + per, loss, false},
		{"Learning rate", "learning rate", "Learning rate of each step's update (linear warm-up, then linear decay)." + per,
			[]series{{name: "learning rate", xy: steps(func(s metrics.Step) float64 { return s.LR })}}, false},
		{"Gradient norm", "gradient norm", "Global gradient norm of each step before clipping." + per,
			[]series{{name: "gradient norm", xy: steps(func(s metrics.Step) float64 { return s.GradNorm })}}, false},
		{"Held-out accuracy", "accuracy", "Share of held-out queries whose positive scores above all of their own negatives.",
			[]series{{name: "held-out accuracy", points: true, xy: evals(func(e metrics.Eval) float64 { return e.Accuracy })}}, true},
	}
	pg.Blocks = append(pg.Blocks, block{Heading: "Plots"})
	for _, f := range figs {
		b, err := lineFigure(f.title, f.y, f.caption, f.series, f.unit)
		if err != nil {
			return err
		}
		pg.Blocks = append(pg.Blocks, b)
	}
	pg.Blocks = append(pg.Blocks, block{Heading: "Settings"}, block{Table: settingsTable(run)})
	return pg.write(w)
}

func subtitle(r metrics.Run) string {
	batch := strconv.Itoa(r.BatchSize)
	if r.Accum > 1 {
		batch = fmt.Sprintf("%d×%d", r.BatchSize, r.Accum)
	}
	return fmt.Sprintf("model %s, objective %s, batch %s queries (%d documents each), lr %g, %d steps, seed %d",
		filepath.Base(r.Model), r.Objective, batch, r.GroupSize, r.LR, r.Steps, r.Seed)
}

func settingsTable(r metrics.Run) *table {
	t := &table{Head: []string{"setting", "value"}}
	add := func(n, v string) { t.Rows = append(t.Rows, []cell{{Text: n}, {Text: v}}) }
	add("name", r.Name)
	add("model", r.Model)
	add("objective", r.Objective)
	add("batch size (queries per micro-batch)", strconv.Itoa(r.BatchSize))
	add("accumulation (micro-batches per step)", strconv.Itoa(max(1, r.Accum)))
	add("group size (documents per query)", strconv.Itoa(r.GroupSize))
	add("learning rate (peak)", strconv.FormatFloat(r.LR, 'g', -1, 64))
	add("steps", strconv.Itoa(r.Steps))
	add("seed", strconv.FormatUint(r.Seed, 10))
	for _, s := range r.Settings {
		add(s.Name, s.Value)
	}
	return t
}

func trainingSummary(run metrics.Run, m metrics.Metrics) *table {
	t := &table{}
	add := func(n, v string) { t.Rows = append(t.Rows, []cell{{Text: n}, {Text: v, Num: true}}) }
	done := 0
	if n := len(m.Steps); n > 0 {
		done = m.Steps[n-1].Step
	}
	add("steps done", fmt.Sprintf("%d of %d", done, run.Steps))
	if n := len(m.Steps); n > 0 {
		add("training loss, first → last step", fmt.Sprintf("%.4f → %.4f", m.Steps[0].Loss, m.Steps[n-1].Loss))
		var rate float64
		for _, s := range m.Steps {
			rate += s.ExamplesPerS
		}
		add("throughput (mean over steps)", fmt.Sprintf("%.1f queries/s", rate/float64(n)))
	}
	if n := len(m.Evals); n > 0 {
		a, b := m.Evals[0], m.Evals[n-1]
		add(fmt.Sprintf("held-out loss, step %d → %d", a.Step, b.Step), fmt.Sprintf("%.4f → %.4f", a.Loss, b.Loss))
		add(fmt.Sprintf("held-out accuracy, step %d → %d", a.Step, b.Step), fmt.Sprintf("%.3f → %.3f (%d queries)", a.Accuracy, b.Accuracy, b.Queries))
	} else {
		add("held-out evaluation", "none")
	}
	add("elapsed", time.Duration(m.ElapsedS()*float64(time.Second)).Round(time.Second).String())
	return t
}

// series is one line (or, with points, a line through marked points).
type series struct {
	name           string
	xy             plotter.XYs
	dashed, points bool
}

// lineFigure draws the series over steps (the value axis [0, 1] when unit),
// or notes that none has data. A lone series needs no legend.
func lineFigure(title, y, caption string, ss []series, unit bool) (block, error) {
	p := newPlot(title, "step", y)
	p.Add(plotter.NewGrid())
	var legend []legendEntry
	for i, s := range ss {
		if len(s.xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return block{}, fmt.Errorf("report: %s: %w", title, err)
		}
		l.Color = colour(i)
		l.Width = vg.Points(1.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		var thumb plot.Thumbnailer = l
		if s.points || len(s.xy) == 1 {
			pts.Color = colour(i)
			pts.Shape = draw.CircleGlyph{}
			pts.Radius = vg.Points(2.5)
			p.Add(pts)
			thumb = thumbs{l, pts}
		}
		legend = append(legend, legendEntry{s.name, thumb})
	}
	if len(legend) == 0 {
		return block{Note: title + ": nothing recorded yet."}, nil
	}
	if unit {
		p.Y.Min, p.Y.Max = 0, 1
	}
	if len(legend) == 1 {
		legend = nil
	}
	svg, err := renderSVG(p, legend)
	if err != nil {
		return block{}, err
	}
	return block{Figure: &figure{SVG: svg, Caption: caption}}, nil
}

// thumbs draws several legend thumbnails on top of each other.
type thumbs []plot.Thumbnailer

func (t thumbs) Thumbnail(c *draw.Canvas) {
	for _, x := range t {
		x.Thumbnail(c)
	}
}

func hasPart(steps []metrics.Step, f func(metrics.Step) *float64) bool {
	for _, s := range steps {
		if f(s) != nil {
			return true
		}
	}
	return false
}

func part(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func finiteXYs(xy plotter.XYs) plotter.XYs {
	out := xy[:0]
	for _, p := range xy {
		if !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) {
			out = append(out, p)
		}
	}
	return out
}

// bucketMeans replaces each run of n consecutive points by their mean.
func bucketMeans(xy plotter.XYs, n int) plotter.XYs {
	if n <= 1 {
		return xy
	}
	out := make(plotter.XYs, 0, (len(xy)+n-1)/n)
	for lo := 0; lo < len(xy); lo += n {
		hi := min(len(xy), lo+n)
		var sx, sy float64
		for _, p := range xy[lo:hi] {
			sx += p.X
			sy += p.Y
		}
		k := float64(hi - lo)
		out = append(out, plotter.XY{X: sx / k, Y: sy / k})
	}
	return out
}
