package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/model"
)

// installedDefault returns the default model's directory and manifest,
// skipping the test when it is not installed.
func installedDefault(t *testing.T) (string, *model.Manifest) {
	t.Helper()
	dir, err := home.RequireDefaultModel()
	if err != nil {
		t.Skipf("default model not installed: %v", err)
	}
	m, err := model.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// linkModel makes dst a copy of the model directory src (hard links where
// the file system allows: a training folder of the test's own).
func linkModel(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if os.Link(from, to) == nil {
			continue
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ownHome points ANNA_HOME at an empty directory (ONNX Runtime stays the
// installed one) and returns its models directory.
func ownHome(t *testing.T) string {
	t.Helper()
	t.Setenv("ANNA_ORT_LIB", home.ORTLibrary())
	t.Setenv("ANNA_HOME", filepath.Join(t.TempDir(), "home"))
	return home.ModelsDir()
}

// TestModelMismatchNamesModels: the refusal names both models by manifest
// name and short fingerprint, not by two 64-digit fingerprints.
func TestModelMismatchNamesModels(t *testing.T) {
	ctx := context.Background()
	defDir, def := installedDefault(t)
	dir := t.TempDir()
	// Recorded as the default model (its name from the manifest of Model).
	e, err := engine.Open(ctx, dir, engine.Options{Model: defDir, Encoder: &encodertest.Hashing{D: 16, FP: def.Fingerprint}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Add(ctx, []engine.Document{doc(1)}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Stats(); err != nil || st.Model.Name != def.Name {
		t.Fatalf("stats model %+v %v, want name %q", st.Model, err, def.Name)
	}
	e.Close()
	short, err := encoder.Load(ctx, defDir, encoder.Options{MaxLength: 128}) // another fingerprint
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	_, err = engine.Open(ctx, dir, engine.Options{Encoder: short})
	var mm *engine.ModelMismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("want a ModelMismatchError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{def.Name + " (" + def.Fingerprint[:12] + ")", def.Name + " (" + short.Fingerprint()[:12] + ")"} {
		if !strings.Contains(msg, want) {
			t.Errorf("mismatch message %q does not name %q", msg, want)
		}
	}
	for _, full := range []string{def.Fingerprint, short.Fingerprint()} {
		if strings.Contains(msg, full) {
			t.Errorf("mismatch message %q spells out the fingerprint %s", msg, full)
		}
	}
}

// TestIndexSurvivesMovedModel: a directory bound to a model from a training
// folder keeps it (Options.KeepModel) under $ANNA_HOME/models; with the
// folder moved, then deleted, and the kept copy renamed, stats, lexical and
// dense searches all work. With no model installed at all, stats and
// lexical search still work, and a dense search names the missing model
// and how to get it back; `models add` of a copy brings dense back.
func TestIndexSurvivesMovedModel(t *testing.T) {
	ctx := context.Background()
	defDir, def := installedDefault(t)
	tmp := t.TempDir()
	ft := filepath.Join(tmp, "ft", "model")
	linkModel(t, defDir, ft)
	models := ownHome(t) // empty: the default model is not installed in it
	idx := filepath.Join(tmp, "idx")
	e, err := engine.Open(ctx, idx, engine.Options{Model: ft, KeepModel: true})
	if err != nil {
		t.Fatal(err)
	}
	docs := []engine.Document{
		{ID: "cat", Title: "Cats", Text: "The cat sleeps on the warm windowsill all afternoon."},
		{ID: "gpu", Title: "Graphics cards", Text: "A GPU multiplies large matrices in parallel."},
		{ID: "bread", Title: "Sourdough", Text: "Bread leavened by wild yeast and lactic acid bacteria."},
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(models, installed.KeepName(def))
	if m := e.Model(); m.Dir != ft || m.Name != def.Name || m.Fingerprint != def.Fingerprint {
		t.Fatalf("model %+v, want %s as given", m, ft)
	}
	if km, err := model.LoadManifest(kept); err != nil || km.Fingerprint != def.Fingerprint {
		t.Fatalf("the model was not kept as %s: %v", kept, err)
	}
	e.Close()

	works := func(stage string) {
		t.Helper()
		e, err := engine.Open(ctx, idx, engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: open: %v", stage, err)
		}
		defer e.Close()
		st, err := e.Stats()
		if err != nil || st.Documents != 3 || st.Model.Name != def.Name || st.Model.Fingerprint != def.Fingerprint {
			t.Fatalf("%s: stats %+v %v", stage, st, err)
		}
		for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
			rs, err := e.Search(ctx, "sourdough bread yeast", engine.SearchOptions{Mode: m, K: 1})
			if err != nil || len(rs) == 0 || rs[0].ID != "bread" {
				t.Fatalf("%s: %s search: %v %v", stage, m, ids(rs), err)
			}
		}
	}
	if err := os.Rename(filepath.Join(tmp, "ft"), filepath.Join(tmp, "ft_moved")); err != nil {
		t.Fatal(err)
	}
	// Concurrent first dense searches load the model once, race-free.
	e, err = engine.Open(ctx, idx, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rs, err := e.Search(ctx, "a cat on a windowsill", engine.SearchOptions{Mode: engine.ModeDense, K: 1}); err != nil || len(rs) != 1 || rs[0].ID != "cat" {
				t.Errorf("concurrent dense search: %v %v", ids(rs), err)
			}
		}()
	}
	wg.Wait()
	e.Close()
	works("training folder moved")
	if err := os.RemoveAll(filepath.Join(tmp, "ft_moved")); err != nil {
		t.Fatal(err)
	}
	works("training folder deleted")
	if err := os.Rename(kept, filepath.Join(models, "renamed")); err != nil {
		t.Fatal(err)
	}
	works("kept copy renamed (found by fingerprint)")

	// No model installed at all.
	if err := os.RemoveAll(models); err != nil {
		t.Fatal(err)
	}
	e, err = engine.Open(ctx, idx, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open with no model installed: %v", err)
	}
	if st, err := e.Stats(); err != nil || st.Documents != 3 || st.Model.Name != def.Name {
		t.Fatalf("stats with no model installed: %+v %v", st, err)
	}
	if rs, err := e.Search(ctx, "sourdough", engine.SearchOptions{Mode: engine.ModeLexical, K: 1}); err != nil || len(rs) != 1 || rs[0].ID != "bread" {
		t.Fatalf("lexical search with no model installed: %v %v", ids(rs), err)
	}
	_, err = e.Search(ctx, "sourdough", engine.SearchOptions{Mode: engine.ModeDense, K: 1})
	var nf *engine.ModelNotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, engine.ErrModelNotFound) {
		t.Fatalf("dense search with no model installed: %v, want a ModelNotFoundError", err)
	}
	for _, want := range []string{def.Name + " (" + def.Fingerprint[:12] + ")", "install a copy of it", "Reindex"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if hs := hint.Of(err); len(hs) != 2 || hs[0].Kind != hint.AddModel || hs[1].Kind != hint.Reindex || hs[1].Index != idx {
		t.Errorf("hints %+v, want add-model, then reindex %s", hs, idx)
	}
	e.Close()

	// `annactl models add DIR` of a copy of the model gives it back.
	again := filepath.Join(tmp, "again")
	linkModel(t, defDir, again)
	if _, _, _, err := installed.Keep(ctx, again, models); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(again)
	works("model added back")
}

// TestLexicalWithoutModel: a directory indexed with the default model is
// searched lexically and described by Stats with no model installed at
// all; Add of an unchanged document needs none either.
func TestLexicalWithoutModel(t *testing.T) {
	ctx := context.Background()
	installedDefault(t)
	idx := t.TempDir()
	e, err := engine.Open(ctx, idx, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := engine.Document{ID: "bread", Text: "Bread leavened by wild yeast."}
	if _, err := e.Add(ctx, []engine.Document{d}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	ownHome(t)
	e, err = engine.Open(ctx, idx, engine.Options{})
	if err != nil {
		t.Fatalf("open with no model installed: %v", err)
	}
	defer e.Close()
	if st, err := e.Stats(); err != nil || st.Documents != 1 || st.Model.Name != home.DefaultModelName+"-"+home.DefaultModelQuantization {
		t.Fatalf("stats: %+v %v", st, err)
	}
	if rs, err := e.Search(ctx, "yeast", engine.SearchOptions{Mode: engine.ModeLexical}); err != nil || len(rs) != 1 {
		t.Fatalf("lexical search: %v %v", ids(rs), err)
	}
	if res, err := e.Add(ctx, []engine.Document{d}); err != nil || res.Unchanged != 1 {
		t.Fatalf("re-adding an unchanged document: %+v %v", res, err)
	}
	if _, err := e.Add(ctx, []engine.Document{{ID: "new", Text: "needs the model"}}); !errors.Is(err, engine.ErrModelNotFound) {
		t.Fatalf("adding a new document with no model: %v, want ErrModelNotFound", err)
	}
	if enc := e.Encoder(); enc != nil {
		t.Fatalf("Encoder with no model installed: %v, want nil", enc)
	}
}

// TestOptionsModelAlias: Options.Model takes the catalogue's aliases
// (`annactl models` lists them) as annactl's --model does; a model named
// but not installed is an OptionError whose hint installs it.
func TestOptionsModelAlias(t *testing.T) {
	defDir, _ := installedDefault(t)
	models := ownHome(t)
	ctx := context.Background()
	_, err := engine.Open(ctx, filepath.Join(t.TempDir(), "idx"), engine.Options{Model: "multilingual"})
	var oe *engine.OptionError
	if hs := hint.Of(err); !errors.As(err, &oe) || oe.Field != "Options.Model" || len(hs) != 1 || hs[0] != (hint.Action{Kind: hint.InstallModel, Model: "multilingual-e5-small"}) {
		t.Fatalf("an alias of a model not installed: %v, hint %+v", err, hs)
	}
	// The alias's model, here a copy of the default one under its name.
	linkModel(t, defDir, filepath.Join(models, "multilingual-e5-small"))
	e, err := engine.Open(ctx, filepath.Join(t.TempDir(), "idx"), engine.Options{Model: "multilingual"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.Model().Dir; got != filepath.Join(models, "multilingual-e5-small") {
		t.Fatalf("Options.Model multilingual opened %s", got)
	}
}
