package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// page is one report: a title and blocks in order.
type page struct {
	Title, Subtitle string
	Blocks          []block
}

// block is one of: a heading, a note, a table or a figure.
type block struct {
	Heading string
	Note    string
	Table   *table
	Figure  *figure
}

type table struct {
	Head []string
	Rows [][]cell
}

type cell struct {
	Text   string
	Num    bool // right-aligned
	Strong bool
}

type figure struct {
	SVG     template.HTML
	Caption string
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
@font-face { font-family: "Liberation Sans"; src: local("Liberation Sans"), local("LiberationSans"), local("Arial"), local("ArialMT"), local("Helvetica"); }
@font-face { font-family: "Liberation Sans"; font-weight: bold; src: local("Liberation Sans Bold"), local("LiberationSans-Bold"), local("Arial Bold"), local("Arial-BoldMT"), local("Helvetica Bold"); }
body { font-family: "Liberation Sans", Arial, Helvetica, sans-serif; margin: 2em auto; max-width: 62em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
p.sub { margin-top: 0; color: #555; }
h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0 2em; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: #555; font-size: 0.9em; }
p.note { color: #555; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{with .Subtitle}}<p class="sub">{{.}}</p>
{{end}}{{range .Blocks}}{{with .Heading}}<h2>{{.}}</h2>
{{end}}{{with .Note}}<p class="note">{{.}}</p>
{{end}}{{with .Table}}<table>
{{with .Head}}<tr>{{range .}}<th>{{.}}</th>{{end}}</tr>
{{end}}{{range .Rows}}<tr>{{range .}}<td{{if .Num}} class="num"{{end}}>{{if .Strong}}<strong>{{.Text}}</strong>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{with .Figure}}<figure>
{{.SVG}}<figcaption>{{.Caption}}</figcaption>
</figure>
{{end}}{{end}}</body>
</html>
`))

func (p *page) write(w io.Writer) error {
	if err := pageTmpl.Execute(w, p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// Figure size and the series colours (Tableau 10).
const (
	figW = vg.Length(640)
	figH = vg.Length(300)
)

var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff}, {0x76, 0xb7, 0xb2, 0xff},
	{0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff},
	{0x9c, 0x75, 0x5f, 0xff}, {0xba, 0xb0, 0xac, 0xff},
}

func colour(i int) color.RGBA { return palette[i%len(palette)] }

// newPlot returns a plot with a title, axis labels and a grid.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	return p
}

// legendEntry names a series in a legend drawn beside the plot.
type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// drawFigure draws p on dc with the legend entries in a column at its right.
func drawFigure(dc draw.Canvas, p *plot.Plot, legend []legendEntry) {
	if len(legend) == 0 {
		p.Draw(dc)
		return
	}
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.Padding = vg.Points(2)
	for _, e := range legend {
		l.Add(e.name, e.thumb)
	}
	pad := vg.Points(8)
	lw := l.Rectangle(dc).Size().X
	p.Draw(draw.Crop(dc, 0, -(lw + 2*pad), 0, 0))
	top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + vg.Points(12)
	l.Draw(draw.Crop(dc, dc.Max.X-dc.Min.X-lw-pad, -pad, 0, -top))
}

// renderSVG draws p, with the legend entries in a column at its right, as
// an <svg> element (the XML prolog dropped) for inlining in HTML.
func renderSVG(p *plot.Plot, legend []legendEntry) (svg template.HTML, err error) {
	defer func() {
		// gonum/plot panics on some degenerate input; a report must not
		// take its caller down.
		if r := recover(); r != nil {
			err = fmt.Errorf("report: drawing %q: %v", p.Title.Text, r)
		}
	}()
	c := vgsvg.New(figW, figH)
	drawFigure(draw.New(c), p, legend)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	s := buf.String()
	i := strings.Index(s, "<svg")
	if i < 0 {
		return "", fmt.Errorf("report: drawing %q: no <svg> element", p.Title.Text)
	}
	return template.HTML(s[i:]), nil
}
