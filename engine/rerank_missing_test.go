package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
)

// TestRerankModeWithoutRerankerNamesTheBuild: ModeRerank on an engine
// opened without a reranker is an option error that says how to get one.
func TestRerankModeWithoutRerankerNamesTheBuild(t *testing.T) {
	e := openT(t, t.TempDir(), "fp-a")
	defer e.Close()
	_, err := e.Search(context.Background(), "q", engine.SearchOptions{Mode: engine.ModeRerank})
	var oe *engine.OptionError
	if !errors.As(err, &oe) || oe.Field != "SearchOptions.Mode" || !strings.Contains(err.Error(), "train/recipe.Build") {
		t.Fatalf("rerank without a reranker: %v", err)
	}
	if hs := hint.Of(err); len(hs) != 1 || hs[0].Kind != hint.BuildReranker {
		t.Fatalf("rerank without a reranker: hint %+v, want %s", hs, hint.BuildReranker)
	}
}
