package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// TestGeneralBuild: a general reranker learns from the judgments and the
// pseudo-queries of the sets it finds, never from those left out, which it
// is measured on; its pseudo-query check is recorded beside; a second
// build sharing the mined sets mines nothing again; each query's examples
// are capped.
func TestGeneralBuild(t *testing.T) {
	tmp := t.TempDir()
	datasets := filepath.Join(tmp, "datasets")
	writeSet(t, filepath.Join(datasets, "scifact"), 30, 12)
	writeSet(t, filepath.Join(datasets, "cranfield"), 20, 6)

	c := tinyConfig(t, "", filepath.Join(tmp, "w1"))
	if _, _, err := General(&c, datasets, []string{"nfcorpus"}); err == nil || !strings.Contains(err.Error(), "nfcorpus") {
		t.Fatalf("leaving out an unknown set: %v", err)
	}
	if _, _, err := General(&c, filepath.Join(tmp, "none"), nil); !errors.Is(err, ErrData) {
		t.Fatalf("no set found: %v", err)
	}
	c = tinyConfig(t, "", filepath.Join(tmp, "w1"))
	used, left, err := General(&c, datasets, []string{"cranfield"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(used, []string{"scifact train", "scifact pseudo-queries"}) || !slices.Equal(left, []string{"cranfield"}) ||
		!slices.Equal(c.Evals, []string{filepath.Join(datasets, "cranfield")}) || c.Data != "" {
		t.Fatalf("used %v, left out %v, evals %v, data %q", used, left, c.Evals, c.Data)
	}
	c.TeacherModels = []string{home.DefaultModel()} // stands in for a stronger model
	c.Check, c.CheckQueries, c.PseudoQueries, c.PerQuery = true, 3, 10, 1
	c.MineDir = filepath.Join(tmp, "mined")
	res, err := Build(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	man, err := model.LoadManifest(res.Installed)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, x := range man.Measured {
		count[x.Dataset+" "+x.Split]++
	}
	if len(count) != 2 || count["cranfield test"] != 4 || count["scifact pseudo"] != 2 {
		t.Fatalf("measurements %+v: want cranfield's test split (4) and scifact's pseudo-query check (2)", man.Measured)
	}
	// Trained on scifact's judged queries and pseudo-queries, one example
	// a query; never on cranfield's.
	bs, err := os.ReadFile(filepath.Join(c.Work, "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(bs)), "\n") {
		var rec struct{ Query string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		queries[rec.Query]++
	}
	for q, n := range queries {
		if n > 1 {
			t.Fatalf("query %q has %d examples; PerQuery is 1", q, n)
		}
	}
	pseudo, err := os.ReadFile(filepath.Join(c.MineDir, "pseudo-scifact.jsonl"))
	if err != nil || strings.Count(string(pseudo), "\n") != 10 {
		t.Fatalf("pseudo-queries of scifact: %q (%v); want 10", pseudo, err)
	}
	if _, err := os.Stat(filepath.Join(c.MineDir, "mined-cranfield.jsonl")); err == nil {
		t.Fatal("cranfield, left out, was mined")
	}

	// Another build sharing the mined sets: nothing mined again.
	stat := func() map[string]string {
		out := map[string]string{}
		ms, _ := filepath.Glob(filepath.Join(c.MineDir, "mined-*.jsonl"))
		for _, m := range ms {
			fi, err := os.Stat(m)
			if err != nil {
				t.Fatal(err)
			}
			out[m] = fi.ModTime().String()
		}
		return out
	}
	before := stat()
	c2 := c
	c2.Work, c2.Name, c2.Steps = filepath.Join(tmp, "w2"), "rr2", 2
	var ev events
	c2.Progress = ev.add
	if _, err := Build(context.Background(), c2); err != nil {
		t.Fatal(err)
	}
	if after := stat(); len(before) != 3 || !mapsEqual(before, after) {
		t.Fatalf("mined files before %v, after a second build %v", before, after)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
