package adapt

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// TestBaseOfDefaultModelIndex: an index built with the default model
// (engine.Options.Model empty, as `annactl index` without --model makes
// it) records no model directory; the student's checkpoint is still found,
// through the model's fingerprint.
func TestBaseOfDefaultModelIndex(t *testing.T) {
	emb, err := home.RequireDefaultModel()
	if err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	man, err := model.LoadManifest(emb)
	if err != nil || man.Source == "" {
		t.Skipf("the default model records no training source: %v", err)
	}
	ctx := context.Background()
	eng, err := engine.Open(ctx, filepath.Join(t.TempDir(), "idx"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Add(ctx, []engine.Document{{ID: "a", Text: "one document"}}); err != nil {
		t.Fatal(err)
	}
	got, maxLen, err := (&run{}).base(ctx, eng)
	if err != nil || got != man.Source || maxLen != man.MaxLength {
		t.Fatalf("base of a default-model index: %q, max length %d, %v; want %q, %d", got, maxLen, err, man.Source, man.MaxLength)
	}
}
