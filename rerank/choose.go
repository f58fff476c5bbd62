package rerank

import (
	"context"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/safe"
)

// Choose loads the reranker in dir or, when dir is "", the one anna uses
// unasked: the reranker installed under $ANNA_HOME/models measured to help
// (installed.HelpfulReranker), if any; r is nil when none is. It returns
// the directory loaded and fusion, the use the reranker was measured to
// help in (fused with the retrieval lists by RRF rather than replacing
// their order: engine.SearchOptions.RerankFusion). `annactl search`, `serve`
// and `mcp` choose with it.
func Choose(ctx context.Context, dir string, opts Options) (r *Model, chosen string, fusion bool, err error) {
	ctx = safe.Ctx(ctx)
	if dir == "" {
		if dir, _, err = installed.HelpfulReranker(home.ModelsDir(), false); err != nil || dir == "" {
			return nil, "", false, err
		}
	}
	if r, err = Load(ctx, dir, opts); err != nil {
		return nil, "", false, err
	}
	_, fusion = r.Manifest().Helps()
	return r, dir, fusion, nil
}
