package installed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anna-search/anna/model"
)

// Model is one entry of a models directory.
type Model struct {
	Name, Dir string
	Manifest  *model.Manifest // nil when Err is set
	Err       error           // the manifest could not be read: not a converted model
}

// List returns the directories under modelsDir by name, each with its
// manifest or the error reading it; interrupted installs (NAME.partial,
// NAME.old) are left out. A missing modelsDir holds none.
func List(modelsDir string) ([]Model, error) {
	entries, err := os.ReadDir(modelsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing models: %w", err)
	}
	var out []Model
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".partial") || strings.HasSuffix(e.Name(), ".old") {
			continue
		}
		m := Model{Name: e.Name(), Dir: filepath.Join(modelsDir, e.Name())}
		m.Manifest, m.Err = model.LoadManifest(m.Dir)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// HelpfulReranker is the policy by which anna uses a reranker nobody
// named: the installed reranker measured to help (its manifest's
// evaluations, `annactl eval --record`; model.Manifest.Helps) with the
// largest mean gain in the use that helped, or "" when none is. With
// alone, only rerankers whose own order helped count (a teacher labels
// with its scores alone). others describe the installed rerankers that
// do not help, for a message.
func HelpfulReranker(modelsDir string, alone bool) (dir string, others []string, err error) {
	models, err := List(modelsDir)
	if err != nil {
		return "", nil, err
	}
	best := 0.0
	for _, m := range models {
		if m.Err != nil || m.Manifest.Task != model.TaskRerank {
			continue
		}
		h, f := m.Manifest.Helps()
		if alone {
			h, f = m.Manifest.HelpsIn(false), false
		}
		if !h {
			others = append(others, m.Name+" ("+m.Manifest.Verdict()+")")
			continue
		}
		if g, _ := m.Manifest.Gain(f); dir == "" || g > best {
			dir, best = m.Dir, g
		}
	}
	return dir, others, nil
}
