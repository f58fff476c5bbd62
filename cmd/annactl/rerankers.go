package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// installedModel is a converted model under $ANNA_HOME/models.
type installedModel struct {
	name, dir string
	man       *model.Manifest
	err       error // the manifest could not be read
}

// installedModels lists $ANNA_HOME/models by name (interrupted installs,
// *.partial and *.old, left out).
func installedModels() ([]installedModel, error) {
	dir := home.ModelsDir()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing models: %w", err)
	}
	var out []installedModel
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".partial") || strings.HasSuffix(e.Name(), ".old") {
			continue
		}
		im := installedModel{name: e.Name(), dir: filepath.Join(dir, e.Name())}
		im.man, im.err = model.LoadManifest(im.dir)
		out = append(out, im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// helpfulReranker is the installed reranker measured to help (its manifest's
// evaluations, `annactl eval --record`) with the largest mean gain in the
// use that helped, or "" when none is; with alone, only rerankers whose
// own order helped count (a teacher labels with its scores alone). others
// describe the installed rerankers that do not, for a message.
func helpfulReranker(alone bool) (dir string, others []string, err error) {
	models, err := installedModels()
	if err != nil {
		return "", nil, err
	}
	best := 0.0
	for _, m := range models {
		if m.err != nil || m.man.Task != model.TaskRerank {
			continue
		}
		h, f := m.man.Helps()
		if alone {
			h, f = m.man.HelpsIn(false), false
		}
		if !h {
			others = append(others, m.name+" ("+rerankState(m.man)+")")
			continue
		}
		if g, _ := m.man.Gain(f); dir == "" || g > best {
			dir, best = m.dir, g
		}
	}
	return dir, others, nil
}

// rerankState says what a reranker's measurements say, for people.
func rerankState(m *model.Manifest) string {
	if len(m.Measured) == 0 {
		return "not measured"
	}
	h, f := m.Helps()
	var parts []string
	for _, use := range []bool{false, true} {
		g, n := m.Gain(use)
		if n == 0 {
			continue
		}
		how := "replacing the candidates' order"
		if use {
			how = "fused with the candidates' lists by RRF"
		}
		parts = append(parts, fmt.Sprintf("%s nDCG@10 %+.4f over %d", how, g, n))
	}
	state := "does not help"
	if h {
		state = "helps (used unasked, " + map[bool]string{false: "replacing", true: "fused by RRF"}[f] + ")"
	}
	return state + ": " + strings.Join(parts, "; ")
}
