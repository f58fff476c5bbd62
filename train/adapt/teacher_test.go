package adapt

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// TestDefaultTeacherModels: every installed catalogue embedding model
// teaches but the index's own (in any form), its float32 form preferred;
// the multilingual model only where the documents are in a language the
// English models do not know.
func TestDefaultTeacherModels(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	models := filepath.Join(tmp, "models")
	for _, n := range []string{"all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8", "bge-small-en-v1.5", "bge-small-en-v1.5-int8", "e5-small-v2-int8", "multilingual-e5-small", "smollm2-135m-instruct"} {
		if err := os.MkdirAll(filepath.Join(models, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	english := tinyIndex(t, filepath.Join(tmp, "en"), 12)
	dirs, left, err := DefaultTeacherModels(ctx, english, models)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(models, "bge-small-en-v1.5"), filepath.Join(models, "e5-small-v2-int8")}
	if !slices.Equal(dirs, want) {
		t.Fatalf("English documents, a MiniLM index: teachers %v, want %v (left out: %v)", dirs, want, left)
	}
	if s := strings.Join(left, "; "); !strings.Contains(s, "all-MiniLM-L6-v2 (the index's model)") || !strings.Contains(s, "multilingual-e5-small (the documents are in en") {
		t.Fatalf("left out: %v", left)
	}

	// German documents: only the model that knows German.
	emb, err := home.RequireDefaultModel()
	if err != nil {
		t.Skip(err)
	}
	de := filepath.Join(tmp, "de")
	eng, err := engine.Open(ctx, de, engine.Options{Model: emb})
	if err != nil {
		t.Fatal(err)
	}
	var docs []engine.Document
	for i, s := range []string{
		"Der Hund läuft schnell über die Wiese und bellt laut, weil er den Ball sehen kann.",
		"Die Stadt liegt an einem großen Fluss, und im Sommer fahren viele Schiffe vorbei.",
		"Wir haben gestern Abend in der Küche gekocht und danach lange zusammen gegessen.",
	} {
		docs = append(docs, engine.Document{ID: string(rune('a' + i)), Text: s, Language: "de"})
	}
	if _, err := eng.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	dirs, left, err = DefaultTeacherModels(ctx, de, models)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(models, "multilingual-e5-small")}; !slices.Equal(dirs, want) {
		t.Fatalf("German documents: teachers %v, want %v (left out: %v)", dirs, want, left)
	}
	if s := strings.Join(left, "; "); !strings.Contains(s, "bge-small-en-v1.5 (not trained on de") {
		t.Fatalf("German documents, left out: %v", left)
	}
	// Nothing installed: no teacher, no error.
	if dirs, _, err := DefaultTeacherModels(ctx, english, filepath.Join(tmp, "none")); err != nil || len(dirs) != 0 {
		t.Fatalf("no models installed: %v, %v", dirs, err)
	}
}
