package adapt

import (
	"cmp"
	"context"
	"os"
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
	if err != nil || maxLen != man.MaxLength {
		t.Fatalf("base of a default-model index: %q, max length %d, %v; want max length %d", got, maxLen, err, man.MaxLength)
	}
	// The manifest's source is the checkpoint where it is a path here; `make
	// setup` records where the model came from ("npm …"), and the checkpoint
	// is then the catalogue's training source, unpacked under $ANNA_HOME/src.
	want, wantDir := man.Source, home.SourceDir()
	if _, err := os.Stat(man.Source); err != nil {
		want = ""
	}
	if (want != "" && got != want) || (want == "" && filepath.Dir(got) != wantDir) {
		t.Fatalf("base of a default-model index: %q; want %q (the manifest's source %q)", got, cmp.Or(want, wantDir+"/…"), man.Source)
	}
	if m, _ := filepath.Glob(filepath.Join(got, "*.safetensors")); len(m) == 0 {
		t.Fatalf("base of a default-model index: %s holds no *.safetensors", got)
	}
}
