// Package notebook reads Jupyter notebooks (.ipynb, nbformat 3 and 4):
// markdown and code cells in order, outputs left out, in parts by the
// markdown cells' headings, each part's Section its headings and the
// cells it spans ("Results (cells 4-7)"). Title: the notebook metadata's
// title, else its first heading.
package notebook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/safe"
)

// Reader reads notebooks.
var Reader = doc.ReaderFunc(Read)

type source []string

// UnmarshalJSON takes a cell's source as one string or a list of lines.
func (s *source) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = source{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

type cell struct {
	Type   string `json:"cell_type"`
	Source source `json:"source"`
	Input  source `json:"input"` // nbformat 3 code cells
}

type notebook struct {
	Cells      []cell `json:"cells"`
	Worksheets []struct {
		Cells []cell `json:"cells"`
	} `json:"worksheets"`
	Metadata struct {
		Title   string `json:"title"`
		Authors []struct {
			Name string `json:"name"`
		} `json:"authors"`
		Kernel struct {
			Language string `json:"language"`
		} `json:"kernelspec"`
		Language struct {
			Name string `json:"name"`
		} `json:"language_info"`
	} `json:"metadata"`
}

// Read reads one notebook.
func Read(ctx context.Context, in doc.Input) (doc.Doc, error) {
	ctx = safe.Ctx(ctx)
	var nb notebook
	if err := json.Unmarshal(in.Data, &nb); err != nil {
		return doc.Doc{}, fmt.Errorf("%w: not a notebook's JSON: %v", doc.ErrCorrupt, err)
	}
	cells := nb.Cells
	for _, ws := range nb.Worksheets {
		cells = append(cells, ws.Cells...)
	}
	var d doc.Doc
	d.Title = doc.Title(nb.Metadata.Title)
	if len(nb.Metadata.Authors) > 0 {
		d.Author = doc.Title(nb.Metadata.Authors[0].Name)
	}
	lang := nb.Metadata.Language.Name
	if lang == "" {
		lang = nb.Metadata.Kernel.Language
	}
	var lines []string
	var heads []doc.Heading
	var cellOf []int // the cell (1-based) of each line
	size, limit := 0, in.Limits.Or().MaxText
	for i, c := range cells {
		src := c.Source
		if len(src) == 0 {
			src = c.Input
		}
		text := strings.TrimSpace(strings.Join(src, ""))
		if text == "" || (c.Type != "markdown" && c.Type != "code" && c.Type != "heading") {
			continue
		}
		if size += len(text); size > limit {
			d.Truncated = true
			break
		}
		if len(lines) > 0 {
			lines = append(lines, "")
			cellOf = append(cellOf, i+1)
		}
		fence := false
		for _, l := range doc.Lines(strings.ReplaceAll(text, "\r\n", "\n")) {
			t := strings.TrimSpace(l)
			if c.Type == "markdown" && strings.HasPrefix(t, "```") {
				fence = !fence
			}
			if c.Type != "code" && !fence {
				if h := strings.TrimLeft(t, "#"); len(h) < len(t) && len(t)-len(h) <= 6 && strings.HasPrefix(h, " ") {
					heads = append(heads, doc.Heading{Line: len(lines) + 1, Level: len(t) - len(h), Title: doc.Title(h)})
				} else if c.Type == "heading" {
					heads = append(heads, doc.Heading{Line: len(lines) + 1, Level: 1, Title: doc.Title(t)})
				}
			}
			lines = append(lines, l)
			cellOf = append(cellOf, i+1)
		}
	}
	if d.Title == "" && len(heads) > 0 {
		d.Title = heads[0].Title
	}
	for _, p := range doc.Sections(lines, 1, heads, doc.TargetPart) {
		from, to := cellOf[p.StartLine-1], cellOf[p.EndLine-1]
		cells := fmt.Sprintf("cell %d", from)
		if to > from {
			cells = fmt.Sprintf("cells %d-%d", from, to)
		}
		if p.Section != "" {
			p.Section += " (" + cells + ")"
		} else {
			p.Section = cells
		}
		p.StartLine, p.EndLine = 0, 0
		p.Code = lang
		d.Parts = append(d.Parts, p)
	}
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: no cell holds text", doc.ErrNoText)
	}
	return d, nil
}
